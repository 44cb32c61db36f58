use super::*;

#[test]
fn events_are_read_from_json_lines() {
    let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"57","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}}"#;
    let seen = |e: Event| (e.kind, e.rv, e.initial_end, e.key);
    assert_eq!(
        json_event(bookmark).ok().map(seen),
        Some(("BOOKMARK".into(), Some("57".into()), true, "/".into()))
    );
    let added = br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"false"}}}}"#;
    let event = json_event(added).expect("an event");
    assert_eq!(
        (event.kind.as_str(), event.rv.as_deref(), event.initial_end, event.key.as_str()),
        ("ADDED", Some("9"), false, "/a")
    );
    // The object itself, for a client that reads more of it.
    assert!(event.object.starts_with(br#"{"metadata":{"name":"a""#));
    let expired = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":410}}"#;
    assert_eq!(json_event(expired).ok().map(|e| e.kind), Some("ERROR".into()));
    assert!(json_event(b"not json").is_err());
}

#[test]
fn events_are_read_from_protobuf_frames() {
    // The bookmark ending a pods WatchList, as kube-apiserver 1.36 sends it.
    let tail = proto::empty_object_tail("v1", "Pod").expect("pods have an empty tail").protobuf;
    let end = proto::bookmark("v1", "Pod", "57", true, tail);
    let frame = proto::encode_watch_frame("BOOKMARK", &end);
    let event = protobuf_event(&frame[4..]).expect("a frame");
    assert_eq!(
        (event.kind.as_str(), event.rv.as_deref(), event.initial_end),
        ("BOOKMARK", Some("57"), true)
    );
    assert_eq!(event.object, end);
    let plain = proto::bookmark("v1", "Pod", "58", false, tail);
    let event = protobuf_event(&proto::encode_watch_frame("BOOKMARK", &plain)[4..]);
    assert_eq!(event.ok().map(|e| (e.rv, e.initial_end)), Some((Some("58".into()), false)));
    assert!(protobuf_event(b"\x0a\x05ADDED").is_err());
}
