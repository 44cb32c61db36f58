use super::*;

#[test]
fn values_are_found_in_event_lines() {
    let line = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"42","annotations":{"kubeplex-bench/ts":"1700000000000000000"}}}}"#;
    assert_eq!(string_after(line, b"\"resourceVersion\":\""), Some("42"));
    assert_eq!(string_after(line, b"\"kubeplex-bench/ts\":\""), Some("1700000000000000000"));
    assert_eq!(string_after(line, b"\"missing\":\""), None);
    assert_eq!(string_after(b"\"resourceVersion\":\"4", b"\"resourceVersion\":\""), None);
}

#[test]
fn a_watchers_share_of_the_writes_follows_its_selector() {
    let spec = WatchSpec {
        collection: String::new(),
        names: (0..6).map(|i| format!("bench-{i:06}")).collect(),
        watchers: 1,
        rate: 1.0,
        duration: Duration::from_secs(1),
        field_selector: Some("spec.nodeName=node-1".into()),
        nodes: 3,
        pid: None,
        settle: Duration::ZERO,
        h2_connections: None,
    };
    assert_eq!(selection(&spec), Some(vec![false, true, false, false, true, false]));
    let by_name =
        WatchSpec { field_selector: Some("metadata.name=bench-000002".into()), ..spec.clone() };
    assert_eq!(selection(&by_name), Some(vec![false, false, true, false, false, false]));
    let other = WatchSpec { field_selector: Some("status.phase=Running".into()), ..spec };
    assert_eq!(selection(&other), None);
}
