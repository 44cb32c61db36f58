use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Clock, Fetch};

/// A list that answers `rv` after a moment, counting itself in `sent`.
fn list(sent: &Arc<AtomicU64>, rv: u64) -> Fetch {
    let sent = sent.clone();
    Box::new(move || {
        Box::pin(async move {
            sent.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some(rv)
        })
    })
}

#[tokio::test]
async fn reads_of_every_resource_that_arrive_together_share_one_list() {
    let clock = Clock::new();
    let sent = Arc::new(AtomicU64::new(0));
    let reads =
        ["/pods", "/services", "discovery.k8s.io/endpointslices", "/nodes"].map(|resource| {
            let (clock, fetch) = (clock.clone(), list(&sent, 42));
            tokio::spawn(async move { clock.current_rv(resource, Instant::now(), fetch).await })
        });
    for read in reads {
        assert_eq!(read.await.unwrap(), Some(42));
    }
    assert_eq!(sent.load(Ordering::SeqCst), 1, "one list for the burst");
    // The list moved its own resource's watch cache only.
    let first = ["/pods", "/services", "discovery.k8s.io/endpointslices", "/nodes"]
        .iter()
        .filter(|r| clock.progressed(r) == 42)
        .count();
    assert_eq!(first, 1);
}

#[tokio::test]
async fn a_read_arriving_while_a_list_is_in_flight_waits_for_the_next() {
    let clock = Clock::new();
    let sent = Arc::new(AtomicU64::new(0));
    let early = {
        let (clock, fetch) = (clock.clone(), list(&sent, 10));
        tokio::spawn(async move { clock.current_rv("/pods", Instant::now(), fetch).await })
    };
    tokio::time::sleep(super::super::gather::GATHER + Duration::from_millis(20)).await;
    // The first list is on its way: it may predate this read's arrival.
    let late = clock.current_rv("/pods", Instant::now(), list(&sent, 11)).await;
    assert_eq!((early.await.unwrap(), late), (Some(10), Some(11)));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_resource_is_listed_for_progress_only_when_no_list_of_it_got_there() {
    let clock = Clock::new();
    let sent = Arc::new(AtomicU64::new(0));
    assert_eq!(clock.current_rv("/pods", Instant::now(), list(&sent, 100)).await, Some(100));
    // Pods' watch cache is there already; services' needs a list of its own, shared by every
    // cache of services waiting for it.
    assert!(clock.progress("/pods", 100, || list(&sent, 0)).await);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let waits: Vec<_> = (0..3)
        .map(|_| {
            let (clock, sent) = (clock.clone(), sent.clone());
            tokio::spawn(async move { clock.progress("/services", 100, || list(&sent, 101)).await })
        })
        .collect();
    for w in waits {
        assert!(w.await.unwrap());
    }
    assert_eq!(sent.load(Ordering::SeqCst), 2, "one list of services");
    assert_eq!(clock.progressed("/services"), 101);
}

#[tokio::test]
async fn a_list_sent_after_a_read_arrived_answers_it_later_too() {
    let clock = Clock::new();
    let sent = Arc::new(AtomicU64::new(0));
    let arrived = Instant::now();
    assert_eq!(clock.current_rv("/pods", arrived, list(&sent, 7)).await, Some(7));
    // Another read that arrived before that list was sent (its cache was busy meanwhile) needs
    // no list of its own; one that arrives now does.
    assert_eq!(clock.current_rv("/nodes", arrived, list(&sent, 8)).await, Some(7));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(clock.current_rv("/nodes", Instant::now(), list(&sent, 8)).await, Some(8));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
}

/// Reads coming in a stream right after a list (another tier's nodes starting one after
/// another, tens of milliseconds apart) wait longer for each other: one list for the stream,
/// where a 20 ms gather would send one per read or two.
#[tokio::test(start_paused = true)]
async fn reads_coming_in_a_stream_share_one_list() {
    let clock = Clock::new();
    let sent = Arc::new(AtomicU64::new(0));
    assert_eq!(clock.current_rv("/pods", Instant::now(), list(&sent, 10)).await, Some(10));
    let mut reads = Vec::new();
    for resource in ["/pods", "/services", "/nodes"] {
        let (clock, fetch) = (clock.clone(), list(&sent, 11));
        let arrived = Instant::now();
        reads.push(tokio::spawn(async move { clock.current_rv(resource, arrived, fetch).await }));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    for read in reads {
        assert_eq!(read.await.unwrap(), Some(11));
    }
    assert_eq!(sent.load(Ordering::SeqCst), 2, "one list for the stream");
}
