use std::time::Instant;

use super::super::store::Store;
use super::super::testutil::{cm, keys, pod};
use super::*;
use crate::wire::continue_token::decode;
use proptest::prelude::*;

mod index;

fn store_of(objects: Vec<Arc<CachedObject>>, rv: u64) -> Store {
    let mut store = Store::default().with_indexes(&["metadata.name", "spec.nodeName"]);
    store.replace(objects, rv, Instant::now());
    store
}

fn token_start(page: &Page) -> (i64, String) {
    let token = decode(page.continue_token.as_deref().unwrap()).unwrap();
    (token.rv, token.start)
}

#[test]
fn keys_sort_as_bytes_across_namespaces() {
    let store =
        store_of(vec![cm("a", "x", 1, &[]), cm("a-b", "x", 2, &[]), cm("a", "w", 3, &[])], 9);
    let page = select(&store.current(), &Query { namespaced: true, ..Query::default() });
    // etcd order: "a-b/x" < "a/w" < "a/x", since '-' sorts before '/'.
    assert_eq!(keys(&page.items), ["a-b/x", "a/w", "a/x"]);
    assert_eq!((page.continue_token, page.remaining_item_count), (None, None));

    // The namespace "a" is the prefix "a/": "a-b" is not in it.
    let page = select(&store.current(), &Query { namespace: Some("a"), ..Query::default() });
    assert_eq!(keys(&page.items), ["a/w", "a/x"]);
}

#[test]
fn pages_across_namespaces_carry_namespace_in_start_key() {
    let store =
        store_of(vec![cm("a", "x", 1, &[]), cm("a-b", "x", 2, &[]), cm("b", "y", 3, &[])], 9);
    let snap = store.current();
    let q = Query { namespaced: true, limit: Some(2), ..Query::default() };
    let page = select(&snap, &q);
    assert_eq!(keys(&page.items), ["a-b/x", "a/x"]);
    assert_eq!(page.remaining_item_count, Some(1));
    assert_eq!(token_start(&page), (9, "/a/x\0".to_owned()));
    let start = token_start(&page).1;
    let next = select(&snap, &Query { start: Some(&start), ..q });
    assert_eq!(keys(&next.items), ["b/y"]);
    assert_eq!((next.continue_token, next.remaining_item_count), (None, None));
}

#[test]
fn cluster_scoped_start_key_is_the_name() {
    let store = store_of(vec![cm("", "n1", 1, &[]), cm("", "n2", 2, &[]), cm("", "n3", 3, &[])], 9);
    let q = Query { limit: Some(1), ..Query::default() };
    let page = select(&store.current(), &q);
    assert_eq!(token_start(&page), (9, "/n1\0".to_owned()));
    assert_eq!(page.remaining_item_count, Some(2));
    let next = select(&store.current(), &Query { start: Some("/n1\0"), ..q });
    assert_eq!(keys(&next.items), ["n2"]);
    // A start key that is not one of ours still starts at the next key in order.
    let next = select(&store.current(), &Query { start: Some("/n2"), ..q });
    assert_eq!(keys(&next.items), ["n2"]);
    assert_eq!(token_start(&next), (9, "/n2\0".to_owned()));
}

#[test]
fn a_full_filtered_page_has_a_token_if_anything_follows() {
    let store = store_of(
        vec![
            cm("ns", "a", 1, &[("app", "web")]),
            cm("ns", "b", 2, &[("app", "web")]),
            cm("ns", "c", 3, &[("app", "db")]),
        ],
        9,
    );
    let web = LabelSelector::parse("app=web").unwrap();
    let q = Query { namespace: Some("ns"), label: Some(&web), limit: Some(2), ..Query::default() };
    let page = select(&store.current(), &q);
    assert_eq!(keys(&page.items), ["ns/a", "ns/b"]);
    // "c" does not match, but the cache only sees that something follows the full page.
    assert_eq!(token_start(&page), (9, "/b\0".to_owned()));
    assert_eq!(page.remaining_item_count, None);
    let start = token_start(&page).1;
    let next = select(&store.current(), &Query { start: Some(&start), ..q });
    assert_eq!((next.items.len(), next.continue_token), (0, None));

    // A page that is not full is the last one, whatever follows.
    let q = Query { limit: Some(3), ..q };
    assert_eq!(select(&store.current(), &q).continue_token, None);
    // An empty selector is no selector: remainingItemCount is given.
    let everything = LabelSelector::parse("").unwrap();
    let q = Query { label: Some(&everything), limit: Some(1), ..q };
    assert_eq!(select(&store.current(), &q).remaining_item_count, Some(2));
}

#[test]
fn limit_zero_is_no_limit() {
    let store = store_of(vec![cm("ns", "a", 1, &[]), cm("ns", "b", 2, &[])], 9);
    let page = select(&store.current(), &Query { limit: Some(0), ..Query::default() });
    assert_eq!((page.items.len(), page.continue_token), (2, None));
    let page = select(&store.current(), &Query { limit: Some(2), ..Query::default() });
    assert_eq!((page.items.len(), page.continue_token), (2, None));
}

#[test]
fn field_selectors_on_pods() {
    let store = store_of(
        vec![
            pod("fx", "p-1", 1, "node-1"),
            pod("fx", "p-2", 2, "node-2"),
            pod("gx", "p-3", 3, "node-1"),
        ],
        9,
    );
    let sel = |s: &str| {
        cacheable_field_selector(Encoding::Json, "", "pods", &FieldSelector::parse(s).unwrap())
            .unwrap()
    };
    let list = |field: &FieldSelector, namespace| {
        let q = Query { namespace, namespaced: true, field: Some(field), ..Query::default() };
        keys(&select(&store.current(), &q).items)
    };
    assert_eq!(list(&sel("spec.nodeName=node-1"), None), ["fx/p-1", "gx/p-3"]);
    // The old alias is converted before matching.
    assert_eq!(list(&sel("spec.host=node-1"), Some("fx")), ["fx/p-1"]);
    assert_eq!(list(&sel("spec.nodeName!=node-1"), None), ["fx/p-2"]);
    assert_eq!(list(&sel("metadata.namespace=gx,status.phase=Running"), None), ["gx/p-3"]);
    // Accepted by the conversion but not in the field set: reads as "".
    assert_eq!(list(&sel("status.podIPs="), Some("fx")), ["fx/p-1", "fx/p-2"]);
    assert_eq!(list(&sel("status.podIPs=10.0.0.1"), Some("fx")), Vec::<String>::new());
}

#[test]
fn metadata_name_is_a_single_key_get_where_a_key_can_be_built() {
    let store =
        store_of(vec![cm("ns", "a", 1, &[]), cm("ns", "b", 2, &[]), cm("zz", "a", 3, &[])], 9);
    let name_a = FieldSelector::parse("metadata.name=a").unwrap();
    let q = Query {
        namespace: Some("ns"),
        namespaced: true,
        field: Some(&name_a),
        limit: Some(1),
        ..Query::default()
    };
    // One key is read: no token although "ns/b" follows.
    let page = select(&store.current(), &q);
    assert_eq!((keys(&page.items), page.continue_token), (vec!["ns/a".into()], None));
    // Across namespaces there is no key to read: the range is walked and paged.
    let page = select(&store.current(), &Query { namespace: None, ..q });
    assert_eq!(keys(&page.items), ["ns/a"]);
    assert_eq!(token_start(&page), (9, "/ns/a\0".to_owned()));
    // A cluster-scoped resource has a key without a namespace.
    let nodes = store_of(vec![cm("", "a", 1, &[]), cm("", "b", 2, &[])], 9);
    let page = select(&nodes.current(), &Query { namespace: None, namespaced: false, ..q });
    assert_eq!((keys(&page.items), page.continue_token), (vec!["a".into()], None));
    // With a label selector the one object must match it too.
    let db = LabelSelector::parse("app=db").unwrap();
    assert!(select(&store.current(), &Query { label: Some(&db), ..q }).items.is_empty());
}

#[test]
fn list_namespace_follows_the_registry() {
    let fs = |s: &str| FieldSelector::parse(s).unwrap();
    let ns_fx = fs("metadata.namespace=fx");
    assert_eq!(list_namespace(Some("req"), Some(&ns_fx), false), Some("req"));
    assert_eq!(list_namespace(None, Some(&ns_fx), false), Some("fx"));
    assert_eq!(list_namespace(Some(""), Some(&ns_fx), false), Some("fx"));
    assert_eq!(list_namespace(None, Some(&ns_fx), true), None);
    assert_eq!(list_namespace(None, Some(&fs("metadata.namespace!=fx")), false), None);
    assert_eq!(list_namespace(None, Some(&fs("metadata.namespace=Fx")), false), None);
    assert_eq!(list_namespace(None, Some(&fs("metadata.namespace=-fx")), false), None);
    assert_eq!(
        list_namespace(None, Some(&fs(&format!("metadata.namespace={}", "a".repeat(64)))), false),
        None
    );
    assert_eq!(list_namespace(None, None, false), None);
}

#[test]
fn field_selector_support_by_encoding() {
    let fs = |s: &str| FieldSelector::parse(s).unwrap();
    let ok = |e, g, r, s: &str| field_selector_supported(e, g, r, &fs(s));
    assert!(ok(Encoding::Json, "", "pods", "spec.nodeName=n1,metadata.name=p"));
    assert!(ok(Encoding::Json, "", "pods", "spec.host=n1"));
    assert!(ok(Encoding::Json, "", "secrets", "type=Opaque"));
    assert!(ok(Encoding::Json, "", "configmaps", ""));
    assert!(!ok(Encoding::Json, "", "configmaps", "data.key=x"));
    assert!(!ok(Encoding::Json, "example.com", "widgets", "spec.color=red"));
    assert!(ok(Encoding::Json, "example.com", "widgets", "metadata.name=w"));
    assert!(ok(Encoding::Protobuf, "", "pods", "metadata.name=p,metadata.namespace!=x"));
    // A protobuf cache reads pods' selectable fields from the message, and passes through
    // what it cannot evaluate (a replication controller's replica count, not in its table).
    assert!(ok(Encoding::Protobuf, "", "pods", "spec.nodeName=n1,status.phase!=Failed"));
    assert!(ok(Encoding::Protobuf, "", "pods", "spec.host=n1,spec.hostNetwork=true"));
    assert!(ok(Encoding::Protobuf, "", "pods", "status.podIPs="));
    assert!(ok(Encoding::Protobuf, "", "events", "source=kubelet,involvedObject.uid=u"));
    assert!(ok(Encoding::Protobuf, "", "nodes", "spec.unschedulable=false"));
    assert!(!ok(Encoding::Protobuf, "", "replicationcontrollers", "status.replicas=1"));
    assert!(ok(Encoding::Json, "", "replicationcontrollers", "status.replicas=1"));
    let converted = cacheable_field_selector(Encoding::Protobuf, "", "pods", &fs("spec.host=n1"));
    assert_eq!(converted.unwrap().to_string(), "spec.nodeName=n1");
    let converted = cacheable_field_selector(Encoding::Json, "", "pods", &fs("spec.host=n1"));
    assert_eq!(converted.unwrap().to_string(), "spec.nodeName=n1");
}

proptest! {
    #[test]
    fn select_never_panics_and_stays_in_range(
        namespace in proptest::option::of("[a-c/-]{0,3}"),
        start in proptest::option::of("\\PC{0,6}"),
        limit in proptest::option::of(any::<usize>()),
        rv in any::<u64>(),
    ) {
        let mut store = Store::default();
        let objects = ["a", "a-b", "b"].iter().flat_map(|ns| {
            ["x", "y"].iter().map(move |name| cm(ns, name, 1, &[]))
        });
        store.replace(objects, rv, Instant::now());
        let q = Query {
            namespace: namespace.as_deref(),
            namespaced: true,
            limit,
            start: start.as_deref(),
            ..Query::default()
        };
        let page = select(&store.current(), &q);
        let prefix = namespace.as_deref().filter(|ns| !ns.is_empty()).map(|ns| format!("{ns}/"));
        for o in &page.items {
            prop_assert!(prefix.as_ref().is_none_or(|p| o.key.starts_with(p.as_str())));
        }
        if let Some(token) = &page.continue_token {
            let token = decode(token).unwrap();
            prop_assert_eq!(token.rv, i64::try_from(rv).unwrap_or(i64::MAX));
        }
    }
}
