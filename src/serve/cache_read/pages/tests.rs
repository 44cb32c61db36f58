use std::time::Duration;

use super::*;

#[test]
fn a_page_not_asked_for_within_its_idle_time_is_dropped_and_one_asked_for_is_kept() {
    // Idle 1 s, asked for every 250 ms: a loaded machine's late wake-ups stay well inside it.
    let pages = page_cache(1 << 20, Duration::from_secs(1));
    let body = bytes::Bytes::from_static(b"gzipped list");
    pages.insert("pods|100".into(), body.clone());
    pages.insert("pods|101".into(), body.clone());
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(pages.get("pods|101"), Some(body.clone()), "asked for: kept");
    }
    assert_eq!(pages.get("pods|100"), None, "a past state's page, idle 1.5 s: dropped");
    pages.run_pending_tasks();
    assert_eq!(pages.weighted_size(), ("pods|101".len() + body.len()) as u64);
}

#[test]
fn the_pages_bytes_are_exposed() {
    let pages = page_cache(1 << 20, PAGE_IDLE);
    let registry = prometheus::Registry::new();
    register(&pages, &registry).expect("register");
    pages.insert("k".into(), bytes::Bytes::from(vec![0u8; 999]));
    let families = registry.gather();
    let gauge = families.iter().find(|f| f.name() == "kubeplex_page_cache_bytes").expect("gauge");
    assert_eq!(gauge.get_metric()[0].get_gauge().get_value(), 1000.0);
}
