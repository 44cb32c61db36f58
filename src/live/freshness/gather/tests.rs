use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Gathered;

type Asked = Arc<Mutex<Vec<Vec<Option<&'static str>>>>>;

/// A read of `namespace` through `g`, whose requests answer what they were asked for and record
/// it in `asked`; the answer's scope (`None`: every namespace).
async fn read(
    g: &Arc<Gathered<Option<&'static str>, Option<&'static str>>>,
    asked: &Asked,
    namespace: Option<&'static str>,
) -> Option<&'static str> {
    let asked = asked.clone();
    let fetch = move |_sent, needs: Vec<Option<&'static str>>| {
        let scope =
            needs.first().copied().flatten().filter(|ns| needs.iter().all(|n| *n == Some(ns)));
        asked.lock().unwrap().push(needs);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some(scope)
        }) as futures_util::future::BoxFuture<'static, _>
    };
    let covers = move |scope: &Option<&'static str>| scope.is_none() || *scope == namespace;
    g.get_for(Instant::now(), namespace, covers, fetch).await.expect("answer")
}

#[tokio::test(start_paused = true)]
async fn reads_that_join_one_request_make_it_for_all_of_them() {
    let g = Arc::new(Gathered::default());
    let asked = Asked::default();
    // Two reads of one namespace together: one request, for that namespace.
    let (a, b) = tokio::join!(read(&g, &asked, Some("a")), read(&g, &asked, Some("a")));
    assert_eq!((a, b), (Some("a"), Some("a")));
    // A read of another namespace joins a read of the first: one request, for both (all).
    let (a, b) = tokio::join!(read(&g, &asked, Some("a")), read(&g, &asked, Some("b")));
    assert_eq!((a, b), (None, None));
    assert_eq!(*asked.lock().unwrap(), [vec![Some("a"), Some("a")], vec![Some("a"), Some("b")]]);
}

/// A read through `g` whose request takes `takes`; when it got its answer, from `start`.
async fn slow_read(
    g: &Arc<Gathered<Option<&'static str>, Option<&'static str>>>,
    takes: Duration,
    start: tokio::time::Instant,
) -> Duration {
    let fetch = move |_sent, _needs: Vec<Option<&'static str>>| {
        Box::pin(async move {
            tokio::time::sleep(takes).await;
            Some(Some("a"))
        }) as futures_util::future::BoxFuture<'static, _>
    };
    g.get_for(Instant::now(), Some("a"), |_| true, fetch).await.expect("answer");
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn overlapping_requests_do_not_wait_for_the_one_before() {
    let takes = Duration::from_millis(500);
    for (g, second_by) in [
        // One at a time: the second read waits for the first request, then its own.
        (Arc::new(Gathered::default()), Duration::from_millis(1000)),
        // Overlapping: the second read's request goes when its gathering ends.
        (Arc::new(Gathered::overlapping()), Duration::from_millis(700)),
    ] {
        let start = tokio::time::Instant::now();
        let second = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            slow_read(&g, takes, start).await
        };
        let (first, second) = tokio::join!(slow_read(&g, takes, start), second);
        assert!(first < Duration::from_millis(600), "{first:?}");
        match g.overlap {
            true => assert!(second < second_by, "{second:?}"),
            false => assert!(second >= second_by, "{second:?}"),
        }
    }
}
