use super::*;
use kubeplex_wire::meta::ListMeta;

/// A ConfigMap's bare protobuf message with only the ObjectMeta fields a store keys on
/// (name = 1, namespace = 3, resourceVersion = 6).
fn config_map(namespace: &str, name: &str, rv: &str) -> Vec<u8> {
    let mut meta = Vec::new();
    proto::put_bytes_field(&mut meta, 1, name.as_bytes());
    proto::put_bytes_field(&mut meta, 3, namespace.as_bytes());
    proto::put_bytes_field(&mut meta, 6, rv.as_bytes());
    let mut message = Vec::new();
    proto::put_bytes_field(&mut message, 1, &meta);
    message
}

/// The fallback list of a kubelet's refused WatchList is in protobuf, as the kubelet asks: each
/// item is kept as a watch event's object (an envelope of the item's kind), under its key, and
/// the page's RV and continue token come back.
#[test]
fn a_protobuf_list_page_fills_the_store_as_watch_events_do() {
    let items = [config_map("team-0", "a", "11"), config_map("team-0", "b", "12")];
    let meta = ListMeta { resource_version: "20", continue_token: "next", ..Default::default() };
    let body = proto::encode_list("v1", "ConfigMapList", &meta, &items);
    let mut state = BTreeMap::new();
    let (rv, token) = read_protobuf_page(&body, &mut state).expect("a list page");
    assert_eq!((rv.as_str(), token.as_str()), ("20", "next"));
    assert_eq!(state.keys().collect::<Vec<_>>(), ["team-0/a", "team-0/b"]);
    let (rv, object) = &state["team-0/b"];
    assert_eq!(rv, "12");
    let unknown = proto::decode_unknown(object).expect("an envelope");
    assert_eq!((unknown.api_version, unknown.kind), ("v1", "ConfigMap"));
    assert_eq!(unknown.raw, &items[1][..]);
    // A body that is no protobuf list is an error, not an empty page.
    assert!(read_protobuf_page(b"{\"kind\":\"ConfigMapList\"}", &mut state).is_err());
}
