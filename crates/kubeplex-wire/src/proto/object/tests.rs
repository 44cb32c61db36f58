use super::*;
use proptest::prelude::*;

#[test]
fn empty_object_table_is_sorted_and_has_core_kinds() {
    let table = super::super::empty_objects::EMPTY_OBJECTS;
    assert!(table.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
    let cm = empty_object_tail("v1", "ConfigMap").unwrap();
    assert_eq!((cm.json, cm.protobuf), ("", b"".as_slice()));
    let pod = empty_object_tail("v1", "Pod").unwrap();
    assert_eq!(pod.json, r#","spec":{"containers":null},"status":{}"#);
    let slice = empty_object_tail("discovery.k8s.io/v1", "EndpointSlice").unwrap();
    assert_eq!(slice.protobuf, b"\x22\x00");
    assert_eq!(empty_object_tail("v1", "Widget"), None);
    assert_eq!(empty_object_tail("example.com/v1", "Pod"), None);
}

#[test]
fn bookmark_tail_is_what_follows_metadata() {
    let tails = empty_object_tail("v1", "Service").unwrap();
    let body = bookmark("v1", "Service", "12", false, tails.protobuf);
    let raw = super::super::decode_unknown(&body).unwrap().raw;
    assert_eq!(bookmark_tail(raw).unwrap(), tails.protobuf);
    assert_eq!(object_meta(raw).unwrap().resource_version, "12");
    assert_eq!(bookmark_tail(b"\x12\x00"), Err(Error::MissingField("metadata")));
}

#[test]
fn missing_metadata_is_an_error() {
    assert_eq!(object_meta(b"\x12\x02\x0a\x00"), Err(Error::MissingField("metadata")));
    assert_eq!(
        partial_object_metadata(b"", "meta.k8s.io/v1"),
        Err(Error::MissingField("metadata"))
    );
    assert_eq!(object_meta(b"\x08\x01"), Err(Error::WrongWireType("metadata")));
    assert_eq!(object_meta(b"\x0a\x02\x0a\xff"), Err(Error::Truncated));
    assert_eq!(object_meta(b"\x0a\x03\x0a\x01\xff"), Err(Error::InvalidUtf8("name")));
}

proptest! {
    #[test]
    fn object_meta_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = object_meta(&raw);
        let _ = partial_object_metadata(&raw, "meta.k8s.io/v1");
        let _ = bookmark_tail(&raw);
    }

    #[test]
    fn bookmark_round_trips(rv in "[0-9]{1,20}", end in any::<bool>()) {
        let body = bookmark("apps/v1", "Deployment", &rv, end, b"");
        let unknown = super::super::decode_unknown(&body).unwrap();
        prop_assert_eq!(unknown.kind, "Deployment");
        let meta = object_meta(unknown.raw).unwrap();
        prop_assert_eq!(meta.resource_version.as_ref(), rv.as_str());
        prop_assert_eq!(meta.name.as_ref(), "");
    }
}
