//! The partial decode on hand-made messages: gogo's merge rules, malformed input. (The table
//! is checked against k8s.io/api's schema by the fake apiserver's tests, which have it.)

use proptest::prelude::*;

use super::*;
use crate::proto::object_meta;

#[test]
fn repeated_messages_merge_and_the_first_element_is_the_first() {
    // status twice: gogo merges them, the last phase wins; podIPs across both occurrences are
    // one list, whose first element is the first seen.
    let meta = b"\x0a\x0a\x0a\x01p\x1a\x02ns\x32\x01\x31";
    let mut message = meta.to_vec();
    message.extend_from_slice(b"\x1a\x0b\x0a\x03Old\x62\x04\x0a\x02ip");
    message.extend_from_slice(b"\x1a\x0b\x0a\x03New\x62\x04\x0a\x02zz");
    let meta = object_meta(&message).unwrap();
    let fields = selectable_fields("", "pods", &message, &meta).unwrap();
    assert_eq!(fields.str_at(&["status", "phase"]), Some("New"));
    assert_eq!(fields.str_at(&["status", "podIPs", "0", "ip"]), Some("ip"));
    assert_eq!(fields.str_at(&["metadata", "namespace"]), Some("ns"));
    assert_eq!(fields.str_at(&["spec", "nodeName"]), None);
    assert_eq!(fields.bool_at(&["spec", "hostNetwork"]), None);
}

#[test]
fn malformed_fields_are_errors() {
    let meta = b"\x0a\x06\x0a\x01p\x32\x01\x31".to_vec();
    let with = |tail: &[u8]| {
        let mut m = meta.clone();
        m.extend_from_slice(tail);
        m
    };
    let check = |message: Vec<u8>| {
        let meta = object_meta(&message).unwrap();
        selectable_fields("", "pods", &message, &meta).map(|_| ()).unwrap_err()
    };
    // spec.nodeName as a varint; spec.hostNetwork as bytes; a nodeName that is not UTF-8.
    assert_eq!(check(with(b"\x12\x02\x50\x01")), Error::WrongWireType("nodeName"));
    assert_eq!(check(with(b"\x12\x03\x5a\x01\x01")), Error::WrongWireType("hostNetwork"));
    assert_eq!(check(with(b"\x12\x03\x52\x01\xff")), Error::InvalidUtf8("nodeName"));
    // spec as a varint, and a truncated status.
    assert_eq!(check(with(b"\x10\x01")), Error::WrongWireType("embedded message"));
    assert_eq!(check(with(b"\x1a\x04\x0a\x05ab")), Error::Truncated);
    // A resource without table entry reads nothing past ObjectMeta.
    let message = with(b"\x10\x01");
    let meta = object_meta(&message).unwrap();
    assert!(selectable_fields("", "configmaps", &message, &meta).is_ok());
}

proptest! {
    #[test]
    fn never_panics(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
        let meta = crate::meta::ObjectMetaRef::default();
        for kind in KINDS {
            let _ = selectable_fields(kind.group, kind.resource, &raw, &meta);
        }
    }
}
