//! Reading kube-apiserver 1.36 captures (`shared/fixtures`) as the reflector does: both encodings
//! of one stream must say the same thing.

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../../../shared/fixtures/", $name, ".body")).as_slice()
    };
}

/// (type, resourceVersion, initial-events-end) of every event of a stream.
fn read_stream(encoding: Encoding, body: &[u8]) -> Vec<(String, u64, bool)> {
    let frames: Vec<Vec<u8>> = match encoding {
        Encoding::Json => {
            body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
        }
        Encoding::Protobuf => {
            let mut decoder = proto::WatchFrameDecoder::new(1 << 20);
            decoder.push(body);
            std::iter::from_fn(|| decoder.next_frame().expect("frame"))
                .map(|f| f.to_vec())
                .collect()
        }
    };
    frames
        .iter()
        .map(|f| {
            let e = parse_watch_event(encoding, f).expect("event");
            let rv = object_resource_version(encoding, &e.object).expect("rv");
            (e.event_type, rv, is_initial_events_end(encoding, &e.object))
        })
        .collect()
}

#[test]
fn a_streaming_list_reads_alike_in_both_encodings() {
    let json = read_stream(Encoding::Json, fixture!("watchlist-json"));
    let types: Vec<&str> = json.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(&types[..5], ["ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    // Exactly one bookmark ends the initial events, at the list's RV.
    let ends: Vec<_> = json.iter().filter(|(_, _, end)| *end).collect();
    assert_eq!(ends, [&("BOOKMARK".to_string(), 295, true)]);
    assert_eq!(json.last().map(|e| e.1), Some(299));

    let protobuf = read_stream(Encoding::Protobuf, fixture!("watchlist-protobuf"));
    let types: Vec<&str> = protobuf.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(&types[..5], ["ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(protobuf.iter().filter(|(_, _, end)| *end).count(), 1);
}

#[test]
fn a_plain_watch_has_no_initial_events_end() {
    for (encoding, body) in
        [(Encoding::Json, fixture!("watch-json")), (Encoding::Protobuf, fixture!("watch-protobuf"))]
    {
        let events = read_stream(encoding, body);
        assert!(!events.is_empty());
        assert!(events.iter().all(|(_, _, end)| !end), "{encoding:?}: {events:?}");
    }
}

#[test]
fn list_pages_give_rv_continue_and_items() {
    let json = parse_list_page(Encoding::Json, fixture!("cm-list-json")).expect("json list");
    let protobuf =
        parse_list_page(Encoding::Protobuf, fixture!("cm-list-protobuf")).expect("protobuf list");
    assert_eq!(json.resource_version, protobuf.resource_version);
    assert_eq!(json.items.len(), protobuf.items.len());
    assert!(!json.items.is_empty());
    assert!(json.continue_token.as_deref().unwrap_or("").is_empty());
    // Each item is an object of its own, as the list carried it.
    let first = meta::object_meta_json(&json.items[0]).expect("item meta");
    assert!(!first.name.is_empty());

    let page1 = parse_list_page(Encoding::Json, fixture!("cm-list-page1")).expect("page");
    assert_eq!(page1.resource_version, 265);
    assert!(page1.continue_token.is_some_and(|t| !t.is_empty()));
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    for encoding in [Encoding::Json, Encoding::Protobuf] {
        for junk in [&b""[..], b"{", b"k8s\0\x0a\xff", b"\xff\xff\xff"] {
            assert!(parse_list_page(encoding, junk).is_err());
            assert!(parse_watch_event(encoding, junk).is_err());
            assert!(object_resource_version(encoding, junk).is_err());
            assert!(!is_initial_events_end(encoding, junk));
            assert_eq!(error_code(encoding, junk), None);
        }
    }
    let not_a_number = br#"{"metadata":{"resourceVersion":"abc"}}"#;
    assert!(object_resource_version(Encoding::Json, not_a_number).is_err());
}

#[test]
fn error_events_give_their_status_code() {
    let json = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (265)","reason":"Expired","code":410}"#;
    assert_eq!(error_code(Encoding::Json, json), Some(410));
    let status = proto::encode_status(&proto::StatusRef {
        status: "Failure",
        message: "too old resource version",
        reason: "Expired",
        code: 410,
        ..Default::default()
    });
    let bare = proto::decode_unknown(&status).expect("envelope").raw;
    assert_eq!(error_code(Encoding::Protobuf, bare), Some(410));
}
