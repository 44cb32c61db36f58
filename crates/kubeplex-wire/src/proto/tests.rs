//! Byte-for-byte checks against kube-apiserver 1.36 captures (`shared/fixtures`).

use std::borrow::Cow;

use super::super::meta::{ListMeta, ObjectMetaRef};
use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../../../shared/fixtures/", $name, ".body")).as_slice()
    };
}

const CM_GET: &[u8] = fixture!("cm-get-protobuf");
const CM_LIST: &[u8] = fixture!("cm-list-protobuf");
const POD_LIST: &[u8] = fixture!("pod-list-protobuf");
const WATCH: &[u8] = fixture!("watch-protobuf");
const WATCHLIST: &[u8] = fixture!("watchlist-protobuf");

#[test]
fn get_envelope_is_rebuilt_byte_for_byte() {
    let unknown = decode_unknown(CM_GET).unwrap();
    assert_eq!((unknown.api_version, unknown.kind), ("v1", "ConfigMap"));
    assert_eq!((unknown.content_encoding, unknown.content_type), ("", ""));
    assert_eq!(unknown.raw.len(), 268);
    assert_eq!(encode_unknown("v1", "ConfigMap", unknown.raw), CM_GET);
}

#[test]
fn object_meta_of_get_fixture() {
    let raw = decode_unknown(CM_GET).unwrap().raw;
    let b = Cow::Borrowed;
    assert_eq!(
        object_meta(raw).unwrap(),
        ObjectMetaRef {
            name: b("cm-a"),
            namespace: b("fx"),
            uid: b("80d56268-58a8-45b5-bbec-38e06d3ab7f2"),
            resource_version: b("261"),
            labels: vec![(b("app"), b("web")), (b("tier"), b("front"))],
        }
    );
}

#[test]
fn lists_are_rebuilt_from_their_items() {
    for (body, kind, count) in [(CM_LIST, "ConfigMapList", 4), (POD_LIST, "PodList", 2)] {
        let list = decode_list(body).unwrap();
        assert_eq!((list.api_version, list.kind), ("v1", kind));
        assert_eq!(list.meta, ListMeta { resource_version: "265", ..ListMeta::default() });
        assert_eq!(list.items.len(), count);
        assert_eq!(encode_list("v1", kind, &list.meta, &list.items), body, "{kind}");
    }
}

#[test]
fn list_parts_are_the_list_in_pieces() {
    for (body, kind) in [(CM_LIST, "ConfigMapList"), (POD_LIST, "PodList")] {
        let list = decode_list(body).unwrap();
        let items: Vec<bytes::Bytes> =
            list.items.iter().map(|i| bytes::Bytes::copy_from_slice(i)).collect();
        let parts = encode_list_parts("v1", kind, &list.meta, &items);
        assert_eq!(parts.concat(), body, "{kind}");
        assert!(items.iter().all(|i| parts.iter().any(|p| p.as_ptr() == i.as_ptr())));
    }
    let meta = ListMeta { resource_version: "1", ..ListMeta::default() };
    assert_eq!(
        encode_list_parts("v1", "PodList", &meta, &[]).concat(),
        encode_list("v1", "PodList", &meta, &[] as &[&[u8]])
    );
}

#[test]
fn list_items_are_the_get_messages() {
    let list = decode_list(CM_LIST).unwrap();
    assert_eq!(list.items.first().copied(), Some(decode_unknown(CM_GET).unwrap().raw));
    let names: Vec<_> =
        list.items.iter().map(|item| object_meta(item).unwrap().name.into_owned()).collect();
    assert_eq!(names, ["cm-a", "cm-b", "cm-c", "kube-root-ca.crt"]);
    let pods = decode_list(POD_LIST).unwrap();
    let pod = object_meta(pods.items[0]).unwrap();
    assert_eq!(
        (pod.name.as_ref(), pod.namespace.as_ref(), pod.resource_version.as_ref()),
        ("p-1", "fx", "264")
    );
}

/// Splits a whole fixture stream with the incremental decoder, 7 bytes at a time.
fn frames(stream: &[u8]) -> Vec<bytes::Bytes> {
    let mut decoder = WatchFrameDecoder::default();
    let mut out = Vec::new();
    for chunk in stream.chunks(7) {
        decoder.push(chunk);
        while let Some(frame) = decoder.next_frame().unwrap() {
            out.push(frame);
        }
    }
    assert_eq!(decoder.buffered(), 0);
    out
}

/// Re-encodes every event of a stream, checks the whole stream is identical, and returns the
/// event types with each object's resourceVersion.
fn reencode(stream: &[u8]) -> Vec<(String, String)> {
    let mut rebuilt = Vec::new();
    let mut events = Vec::new();
    for frame in frames(stream) {
        let event = decode_watch_event(&frame).unwrap();
        rebuilt.extend(encode_watch_frame(event.event_type, event.object));
        let raw = decode_unknown(event.object).unwrap().raw;
        let rv = object_meta(raw).unwrap().resource_version.into_owned();
        events.push((event.event_type.to_owned(), rv));
    }
    assert_eq!(rebuilt, stream);
    events
}

#[test]
fn watch_stream_is_rebuilt_byte_for_byte() {
    let events = reencode(WATCH);
    let types: Vec<_> = events.iter().map(|(t, rv)| format!("{t}@{rv}")).collect();
    assert_eq!(types, ["ADDED@278", "MODIFIED@279", "MODIFIED@280", "DELETED@281", "BOOKMARK@281"]);
}

#[test]
fn watchlist_stream_is_rebuilt_byte_for_byte() {
    let events = reencode(WATCHLIST);
    let types: Vec<_> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK", "ADDED", "MODIFIED", "MODIFIED",
            "DELETED", "BOOKMARK"
        ]
    );
}

/// The frame of the `n`th event of a fixture stream, length prefix included.
fn nth_frame(stream: &[u8], n: usize) -> Vec<u8> {
    let frame = frames(stream).swap_remove(n);
    let mut out = (frame.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&frame);
    out
}

#[test]
fn bookmarks_match_the_apiserver() {
    let tail = empty_object_tail("v1", "ConfigMap").unwrap().protobuf;
    let plain = bookmark("v1", "ConfigMap", "281", false, tail);
    assert_eq!(encode_watch_frame("BOOKMARK", &plain), nth_frame(WATCH, 4));
    let end = bookmark("v1", "ConfigMap", "301", true, tail);
    assert_eq!(encode_watch_frame("BOOKMARK", &end), nth_frame(WATCHLIST, 4));
    let last = bookmark("v1", "ConfigMap", "305", false, tail);
    assert_eq!(encode_watch_frame("BOOKMARK", &last), nth_frame(WATCHLIST, 9));
}

#[test]
fn partial_object_metadata_wraps_the_object_meta_bytes() {
    let raw = decode_unknown(CM_GET).unwrap().raw;
    let meta = object_meta_bytes(raw).unwrap();
    assert_eq!(meta.len(), 243);
    let mut expected =
        b"k8s\0\x0a\x27\x0a\x0emeta.k8s.io/v1\x12\x15PartialObjectMetadata\x12\xf6\x01\x0a\xf3\x01"
            .to_vec();
    expected.extend_from_slice(meta);
    expected.extend_from_slice(b"\x1a\x00\x22\x00");
    assert_eq!(partial_object_metadata(raw, "meta.k8s.io/v1").unwrap(), expected);
}
