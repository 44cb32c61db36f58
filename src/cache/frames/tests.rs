use bytes::Bytes;

use super::*;
use crate::cache::object::CachedObject;
use crate::wire::status::Status;

macro_rules! fixture {
    ($name:literal) => {
        Bytes::from_static(include_bytes!(concat!("../../../../shared/fixtures/", $name, ".body")))
    };
}

fn configmaps(encoding: Encoding) -> Encoder {
    Encoder::new(encoding, "v1", "ConfigMap", true)
}

/// Every event of the apiserver's JSON watch, re-encoded from the object as the cache holds it
/// (the list item form), is the apiserver's line byte for byte — BOOKMARK included.
#[test]
fn json_frames_equal_the_apiservers_lines() {
    let enc = configmaps(Encoding::Json);
    for body in [fixture!("watch-json"), fixture!("watchlist-json")] {
        for line in body.split_inclusive(|b| *b == b'\n') {
            let e = meta::parse_watch_event_json(line).unwrap();
            let ours = if e.event_type == "BOOKMARK" {
                let m = meta::object_meta_json(e.object).unwrap();
                let end = e.object.windows(18).any(|w| w == b"initial-events-end");
                enc.bookmark(m.resource_version.parse().unwrap(), end, false)
            } else {
                let item = meta::strip_type_meta(e.object).unwrap();
                enc.event(&e.event_type, &item, false).unwrap()
            };
            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(line));
        }
    }
}

#[test]
fn metadata_frames_carry_the_objects_metadata_as_the_apiserver_does() {
    let enc = configmaps(Encoding::Json);
    // The apiserver's metadata watch lines all have this shape…
    for line in fixture!("watch-metadata").split_inclusive(|b| *b == b'\n') {
        let e = meta::parse_watch_event_json(line).unwrap();
        let prefix = format!(
            r#"{{"type":"{}","object":{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"#,
            e.event_type
        );
        assert!(line.starts_with(prefix.as_bytes()), "{}", String::from_utf8_lossy(line));
        assert!(line.ends_with(b"}}}\n"));
    }
    // …and ours carry the object's own metadata bytes in it.
    for line in fixture!("watch-json").split_inclusive(|b| *b == b'\n') {
        let e = meta::parse_watch_event_json(line).unwrap();
        if e.event_type == "BOOKMARK" {
            continue;
        }
        let item = meta::strip_type_meta(e.object).unwrap();
        let ours = enc.event(&e.event_type, &item, true).unwrap();
        let v: serde_json::Value = serde_json::from_slice(e.object).unwrap();
        let metadata = serde_json::to_string(&v["metadata"]).unwrap();
        let expected = format!(
            r#"{{"type":"{}","object":{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{metadata}}}}}"#,
            e.event_type
        ) + "\n";
        assert_eq!(String::from_utf8_lossy(&ours), expected);
    }
}

#[test]
fn protobuf_frames_equal_the_apiservers_frames() {
    let enc = configmaps(Encoding::Protobuf);
    for body in [fixture!("watch-protobuf"), fixture!("watchlist-protobuf")] {
        let mut frames = proto::WatchFrameDecoder::new(1 << 20);
        frames.push(&body);
        let mut n = 0;
        while let Some(frame) = frames.next_frame().unwrap() {
            n += 1;
            let e = proto::decode_watch_event(&frame).unwrap();
            let raw = proto::decode_unknown(e.object).unwrap().raw;
            let ours = if e.event_type == "BOOKMARK" {
                let m = proto::object_meta(raw).unwrap();
                let end = raw.windows(18).any(|w| w == b"initial-events-end");
                enc.bookmark(m.resource_version.parse().unwrap(), end, false)
            } else {
                enc.event(e.event_type, raw, false).unwrap()
            };
            assert_eq!(&ours[4..], &frame[..], "{}", e.event_type);
            assert_eq!(&ours[..4], &(frame.len() as u32).to_be_bytes());
        }
        assert!(n >= 5);
    }
}

#[test]
fn a_previous_state_is_sent_at_the_events_resource_version() {
    let json = configmaps(Encoding::Json);
    let item = br#"{"metadata":{"name":"a","namespace":"x","resourceVersion":"12","labels":{"resourceVersion":"k"}},"data":{"resourceVersion":"v"}}"#;
    let moved = json.with_resource_version(item, 40).unwrap();
    assert_eq!(
        String::from_utf8(moved).unwrap(),
        r#"{"metadata":{"name":"a","namespace":"x","resourceVersion":"40","labels":{"resourceVersion":"k"}},"data":{"resourceVersion":"v"}}"#
    );
    assert!(json.with_resource_version(br#"{"data":{}}"#, 1).is_err());
    assert!(json.with_resource_version(b"not json", 1).is_err());

    let pb = configmaps(Encoding::Protobuf);
    let body = fixture!("watch-protobuf");
    let mut frames = proto::WatchFrameDecoder::new(1 << 20);
    frames.push(&body);
    let frame = frames.next_frame().unwrap().unwrap();
    let raw = proto::decode_unknown(proto::decode_watch_event(&frame).unwrap().object).unwrap().raw;
    let before = proto::object_meta(raw).unwrap();
    let moved = pb.with_resource_version(raw, 123456789).unwrap();
    let after = proto::object_meta(&moved).unwrap();
    assert_eq!(after.resource_version, "123456789");
    assert_eq!(
        (after.name, after.namespace, after.uid),
        (before.name, before.namespace, before.uid)
    );
    assert_eq!(moved.len(), raw.len() + "123456789".len() - before.resource_version.len());
    // Everything after ObjectMeta is untouched.
    let tail = proto::bookmark_tail(raw).unwrap();
    assert!(moved.ends_with(tail));
    assert!(pb.with_resource_version(&[0xff, 0xff], 1).is_err());
}

#[test]
fn error_events_carry_the_status() {
    let status = Status::expired("too old resource version: 3 (40)");
    let json = configmaps(Encoding::Json).error(&status);
    let mut expected = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    expected.extend_from_slice(&status.to_json());
    expected.extend_from_slice(b"}\n");
    assert_eq!(json, Bytes::from(expected));
    let pb = configmaps(Encoding::Protobuf).error(&status);
    let e = proto::decode_watch_event(&pb[4..]).unwrap();
    assert_eq!(e.event_type, "ERROR");
    assert_eq!(e.object, status.to_protobuf().as_slice());
}

#[test]
fn custom_resources_keep_their_bytes() {
    let enc = Encoder::new(Encoding::Json, "example.com/v1", "Widget", false);
    let item = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"5"}}"#;
    let frame = enc.event("ADDED", item, false).unwrap();
    assert_eq!(
        &frame[..],
        [&b"{\"type\":\"ADDED\",\"object\":"[..], item, b"}\n"].concat().as_slice()
    );
    let cached = CachedObject::from_json_item("example.com", "widgets", Bytes::from_static(item));
    assert!(cached.is_ok());
}
