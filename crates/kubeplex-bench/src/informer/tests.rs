use kubeplex_wire::meta::ListMeta as WireListMeta;

use super::*;

#[test]
fn parameters_are_sorted_like_client_go() {
    let informer = Informer {
        collection: "/api/v1/pods".into(),
        selectors: vec![("fieldSelector", "spec.nodeName=node-1".into())],
        protobuf: true,
        start: Start::WatchList,
        user_agent: "kubelet",
    };
    assert_eq!(
        informer.path(&[("watch", "true"), ("allowWatchBookmarks", "true")]),
        "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-1&watch=true"
    );
}

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
    let meta =
        WireListMeta { resource_version: "20", continue_token: "next", ..Default::default() };
    let body = proto::encode_list("v1", "ConfigMapList", &meta, &items);
    let mut state = BTreeMap::new();
    let page = read_protobuf_page(&body, Some(&mut state)).expect("a list page");
    assert_eq!(
        (page.resource_version.as_str(), page.continue_token.as_deref()),
        ("20", Some("next"))
    );
    assert_eq!(page.items, 2);
    assert_eq!(state.keys().collect::<Vec<_>>(), ["team-0/a", "team-0/b"]);
    let (rv, object) = &state["team-0/b"];
    assert_eq!(rv, "12");
    let unknown = proto::decode_unknown(object).expect("an envelope");
    assert_eq!((unknown.api_version, unknown.kind), ("v1", "ConfigMap"));
    assert_eq!(unknown.raw, &items[1][..]);
    // A body that is no protobuf list is an error, not an empty page.
    assert!(read_protobuf_page(b"{\"kind\":\"ConfigMapList\"}", Some(&mut state)).is_err());
    // Counted, not kept: the same page leaves no store behind.
    let counted = read_protobuf_page(&body, None).expect("a list page");
    assert_eq!((counted.items, counted.continue_token.as_deref()), (2, Some("next")));
}

/// A JSON page read as the reflector's list: each item under its key with its RV and bytes, a
/// Table's rows counted; the last page has no continue token.
#[test]
fn a_json_list_page_fills_the_store() {
    let body = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"20","continue":"next"},"items":[{"metadata":{"name":"a","namespace":"team-0","resourceVersion":"11"}},{"metadata":{"name":"b","namespace":"team-0","resourceVersion":"12"}}]}"#;
    let mut state = BTreeMap::new();
    let page = read_json_page(body, Some(&mut state)).expect("a list page");
    assert_eq!(
        (page.resource_version.as_str(), page.continue_token.as_deref()),
        ("20", Some("next"))
    );
    assert_eq!(page.items, 2);
    assert_eq!(state["team-0/a"].0, "11");
    assert!(state["team-0/b"].1.starts_with(br#"{"metadata":{"name":"b""#));
    let table = br#"{"kind":"Table","metadata":{"resourceVersion":"21"},"rows":[{"cells":[]},{"cells":[]},{"cells":[]}]}"#;
    let page = read_json_page(table, None).expect("a Table");
    assert_eq!((page.items, page.continue_token), (3, None));
    assert!(read_json_page(b"not json", None).is_err());
}
