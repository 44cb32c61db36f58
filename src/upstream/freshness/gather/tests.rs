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
