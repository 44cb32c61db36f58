use super::*;
use proptest::prelude::*;

#[test]
fn empty_envelope_bytes() {
    assert_eq!(
        encode_unknown("v1", "Status", b""),
        b"k8s\0\x0a\x0c\x0a\x02v1\x12\x06Status\x12\x00\x1a\x00\x22\x00"
    );
}

#[test]
fn list_meta_with_continue_and_remaining_count() {
    let meta =
        ListMeta { resource_version: "7", continue_token: "abc", remaining_item_count: Some(2) };
    let body = encode_list("v1", "PodList", &meta, &[b"\x0a\x00"]);
    let raw = decode_unknown(&body).unwrap().raw;
    assert_eq!(raw, b"\x0a\x0c\x0a\x00\x12\x017\x1a\x03abc\x20\x02\x12\x02\x0a\x00");
    let list = decode_list(&body).unwrap();
    assert_eq!(list.meta, meta);
    assert_eq!(list.items, vec![b"\x0a\x00".as_slice()]);
}

#[test]
fn rejects_bodies_without_magic() {
    assert_eq!(decode_unknown(b"{\"kind\":\"Pod\"}"), Err(Error::MissingMagic));
    assert_eq!(decode_unknown(b"k8s"), Err(Error::MissingMagic));
}

proptest! {
    #[test]
    fn unknown_round_trips(av in "[a-z./0-9]{0,40}", kind in "[A-Za-z]{0,20}",
                           raw in proptest::collection::vec(any::<u8>(), 0..300)) {
        let body = encode_unknown(&av, &kind, &raw);
        let unknown = decode_unknown(&body).unwrap();
        prop_assert_eq!(unknown.api_version, av.as_str());
        prop_assert_eq!(unknown.kind, kind.as_str());
        prop_assert_eq!(unknown.raw, raw.as_slice());
        prop_assert_eq!(body.capacity(), body.len());
    }

    #[test]
    fn list_round_trips(rv in "[0-9]{0,12}", cont in "[A-Za-z0-9_-]{0,200}",
                        count in proptest::option::of(any::<i64>()),
                        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..5)) {
        let meta = ListMeta { resource_version: &rv, continue_token: &cont, remaining_item_count: count };
        let body = encode_list("apps/v1", "DeploymentList", &meta, &items);
        let list = decode_list(&body).unwrap();
        prop_assert_eq!(list.meta, meta);
        prop_assert_eq!(list.items, items.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    #[test]
    fn decoders_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&body);
        let _ = decode_unknown(&body);
        let _ = decode_unknown(&with_magic);
        let _ = decode_list(&with_magic);
    }
}
