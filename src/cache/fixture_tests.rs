//! The cache against kube-apiserver 1.36 captures (`shared/fixtures`): objects built from the
//! upstream's bytes keep them, and lists assembled from the cache are the apiserver's, byte for
//! byte.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::value::RawValue;

use super::object::{CachedObject, Encoding};
use super::select::{cacheable_field_selector, list_namespace, select, Page, Query};
use super::store::{Change, Store};
use super::testutil::keys;
use crate::wire::continue_token;
use crate::wire::meta::{self, ListMeta};
use crate::wire::proto;
use crate::wire::selector::{FieldSelector, LabelSelector};

macro_rules! fixture {
    ($name:literal) => {
        Bytes::from_static(include_bytes!(concat!("../../../shared/fixtures/", $name, ".body")))
    };
}

/// The items of a JSON list body, as slices of it.
fn json_items(body: &Bytes) -> Vec<Bytes> {
    #[derive(serde::Deserialize)]
    struct List<'a> {
        #[serde(borrow)]
        items: Vec<&'a RawValue>,
    }
    let list: List<'_> = serde_json::from_slice(body).unwrap();
    list.items.iter().map(|item| body.slice_ref(item.get().as_bytes())).collect()
}

fn is_slice_of(part: &Bytes, whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    p >= w && p + part.len() <= w + whole.len()
}

/// The configmaps of namespace fx at RV 265 (cm-list-json).
fn configmaps() -> Store {
    let body = fixture!("cm-list-json");
    let objects: Vec<_> = json_items(&body)
        .into_iter()
        .map(|item| Arc::new(CachedObject::from_json_item("", "configmaps", item).unwrap()))
        .collect();
    for o in &objects {
        assert!(is_slice_of(&o.body, &body), "{} was copied", o.key);
    }
    let mut store = Store::default();
    store.replace(objects, 265, Instant::now());
    store
}

/// A built-in kind's list body for a page, as the apiserver writes it.
fn list_body(kind: &str, rv: u64, page: &Page) -> Vec<u8> {
    let rv = rv.to_string();
    let meta = ListMeta {
        resource_version: &rv,
        continue_token: page.continue_token.as_deref().unwrap_or(""),
        remaining_item_count: page.remaining_item_count,
    };
    let items: Vec<&[u8]> = page.items.iter().map(|o| o.body.as_ref()).collect();
    meta::list_json("v1", kind, &meta, &items)
}

#[test]
fn configmap_items_keep_upstream_bytes() {
    let store = configmaps();
    assert_eq!(
        keys(store.current().items().values()),
        ["fx/cm-a", "fx/cm-b", "fx/cm-c", "fx/kube-root-ca.crt"]
    );
    let cm_b = store.get("fx/cm-b").unwrap();
    assert_eq!(cm_b.resource_version, 262);
    assert_eq!(
        cm_b.labels().to_vec(),
        [("app".into(), "web".into()), ("tier".into(), "back".into())]
    );
    // An unpaged list from the cache is the apiserver's body.
    let page = select(&store.current(), &Query { namespace: Some("fx"), ..Query::default() });
    assert_eq!(list_body("ConfigMapList", 265, &page), fixture!("cm-list-json"));
}

#[test]
fn get_body_becomes_the_list_item() {
    let get = CachedObject::from_json_object("", "configmaps", fixture!("cm-get-json"), false);
    let store = configmaps();
    assert_eq!(get.unwrap().body, store.get("fx/cm-a").unwrap().body);
}

#[test]
fn paging_serves_every_page_at_the_first_pages_rv() {
    let mut store = configmaps();
    let q = Query { namespace: Some("fx"), namespaced: true, limit: Some(2), ..Query::default() };
    let page1 = select(&store.current(), &q);
    assert_eq!(list_body("ConfigMapList", 265, &page1), fixture!("cm-list-page1"));
    let token = continue_token::decode(page1.continue_token.as_deref().unwrap()).unwrap();
    assert_eq!((token.rv, token.start.as_str()), (265, "/cm-b\0"));

    // The store moves on between the pages.
    let t = Instant::now();
    let cm_c = Arc::clone(store.get("fx/cm-c").unwrap());
    let deleted = (*cm_c).clone().at(266, cm_c.body.clone());
    store.apply(Change::Deleted(Arc::new(deleted)), t).unwrap();
    let mut added = (**store.get("fx/cm-b").unwrap()).clone();
    added.key = "fx/cm-bb".into();
    added.resource_version = 267;
    store.apply(Change::Added(Arc::new(added)), t).unwrap();
    store.bookmark(300, t);
    let now = select(&store.current(), &Query { start: Some(&token.start), ..q });
    assert_eq!(keys(&now.items), ["fx/cm-bb", "fx/kube-root-ca.crt"]);

    let rv = u64::try_from(token.rv).unwrap();
    let page2 = select(&store.at(rv, t).unwrap(), &Query { start: Some(&token.start), ..q });
    assert_eq!(list_body("ConfigMapList", 265, &page2), fixture!("cm-list-page2"));
}

#[test]
fn selectors_give_the_apiservers_lists() {
    let store = configmaps();
    let cases = [
        ("app=web,tier!=back", "", fixture!("cm-list-labelsel")),
        ("app in (web,db),!tier", "", fixture!("cm-list-labelsel-set")),
        ("", "metadata.name=cm-b", fixture!("cm-list-fieldsel-name")),
    ];
    for (label, field, expected) in cases {
        let label = LabelSelector::parse(label).unwrap();
        let field = FieldSelector::parse(field).unwrap();
        let field = cacheable_field_selector(Encoding::Json, "", "configmaps", &field).unwrap();
        let q = Query {
            namespace: list_namespace(Some("fx"), Some(&field), false),
            namespaced: true,
            label: Some(&label),
            field: Some(&field),
            ..Query::default()
        };
        let page = select(&store.current(), &q);
        assert_eq!(list_body("ConfigMapList", 265, &page), expected);
    }
}

#[test]
fn pods_by_node_name_from_json() {
    let body = fixture!("pod-list-fieldsel-node");
    let [p1] = json_items(&body).try_into().unwrap();
    let p1 = CachedObject::from_json_item("", "pods", p1).unwrap();
    assert!(is_slice_of(&p1.body, &body));
    assert_eq!(p1.field("spec.nodeName"), Some("node-1"));
    assert_eq!(p1.field("status.phase"), Some("Pending"));
    assert_eq!(p1.field("status.podIP"), Some(""));
    assert_eq!(p1.field("spec.schedulerName"), Some("default-scheduler"));
    // The same pod on another node.
    let text = std::str::from_utf8(&p1.body).unwrap();
    let p2 = text.replace("\"p-1\"", "\"p-2\"").replace("\"node-1\"", "\"node-2\"");
    let p2 = CachedObject::from_json_item("", "pods", Bytes::from(p2)).unwrap();
    assert_eq!((p2.key.as_str(), p2.field("spec.nodeName")), ("fx/p-2", Some("node-2")));

    let mut store = Store::default();
    store.replace([Arc::new(p2), Arc::new(p1)], 265, Instant::now());
    let field = FieldSelector::parse("spec.nodeName=node-1").unwrap();
    let field = cacheable_field_selector(Encoding::Json, "", "pods", &field).unwrap();
    let q =
        Query { namespace: Some("fx"), namespaced: true, field: Some(&field), ..Query::default() };
    let page = select(&store.current(), &q);
    assert_eq!(list_body("PodList", 265, &page), body);
}

#[test]
fn protobuf_items_keep_upstream_bytes() {
    let body = fixture!("pod-list-protobuf");
    let list = proto::decode_list(&body).unwrap();
    let objects: Vec<_> = list
        .items
        .iter()
        .map(|item| {
            let raw = body.slice_ref(item);
            Arc::new(CachedObject::from_protobuf_message("", "pods", raw).unwrap())
        })
        .collect();
    assert_eq!(keys(&objects), ["fx/p-1", "fx/p-2"]);
    for (o, item) in objects.iter().zip(&list.items) {
        assert!(is_slice_of(&o.body, &body));
        assert_eq!(o.body.as_ref(), *item);
    }
    assert_eq!(objects[0].labels().to_vec(), [("app".into(), "web".into())]);
    assert_eq!(objects[0].field("spec.nodeName"), Some("node-1"));

    let mut store = Store::default();
    store.replace(objects, 265, Instant::now());
    let page = select(&store.current(), &Query { namespace: Some("fx"), ..Query::default() });
    let items: Vec<&[u8]> = page.items.iter().map(|o| o.body.as_ref()).collect();
    let meta = ListMeta { resource_version: "265", ..ListMeta::default() };
    assert_eq!(proto::encode_list("v1", "PodList", &meta, &items), body);
}

/// The selectable fields read from the real protobuf capture are those the JSON cache reads from
/// the same pods: p-1 against the apiserver's own JSON of it (the node-filtered list), every
/// item against its JSON as the wire crate's codec decodes the message.
#[test]
fn protobuf_fields_equal_the_json_ones() {
    let body = fixture!("pod-list-protobuf");
    let list = proto::decode_list(&body).unwrap();
    let pod_type = crate::wire::codec::type_for("v1", "Pod").unwrap();
    let mut by_node = Vec::new();
    for item in &list.items {
        let from_proto =
            CachedObject::from_protobuf_message("", "pods", body.slice_ref(item)).unwrap();
        let mut json = crate::wire::codec::from_protobuf(pod_type, item).unwrap();
        let object = json.as_object_mut().unwrap();
        object.shift_remove("kind");
        object.shift_remove("apiVersion");
        let item_json = Bytes::from(serde_json::to_vec(&json).unwrap());
        let from_json = CachedObject::from_json_item("", "pods", item_json).unwrap();
        assert_eq!(from_proto.field_set(), from_json.field_set(), "{}", from_proto.key);
        by_node.push((
            from_proto.key.to_string(),
            from_proto.field("spec.nodeName").map(str::to_owned),
        ));
    }
    assert_eq!(by_node.len(), 2);
    assert_eq!(by_node[0], ("fx/p-1".to_owned(), Some("node-1".to_owned())));

    let json_body = fixture!("pod-list-fieldsel-node");
    let [p1] = json_items(&json_body).try_into().unwrap();
    let p1 = CachedObject::from_json_item("", "pods", p1).unwrap();
    let item = body.slice_ref(list.items[0]);
    let p1_proto = CachedObject::from_protobuf_message("", "pods", item).unwrap();
    assert_eq!(p1_proto.field_set(), p1.field_set());
    let names: Vec<&str> = p1_proto.field_set().iter().map(|(f, _)| *f).collect();
    assert_eq!(
        names,
        [
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName"
        ]
    );
}

#[test]
fn watch_events_apply_in_order() {
    let mut store = configmaps();
    let stream = fixture!("watch-json");
    let t = Instant::now();
    let mut seen = Vec::new();
    for line in stream.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let event = meta::parse_watch_event_json(line).unwrap();
        let object = stream.slice_ref(event.object);
        if event.event_type == "BOOKMARK" {
            let rv = meta::object_meta_json(&object).unwrap().resource_version.parse().unwrap();
            assert!(!store.bookmark(rv, t));
            continue;
        }
        let object =
            Arc::new(CachedObject::from_json_object("", "configmaps", object, false).unwrap());
        let change = match event.event_type.as_ref() {
            "ADDED" => Change::Added(object),
            "MODIFIED" => Change::Modified(object),
            _ => Change::Deleted(object),
        };
        let applied = store.apply(change, t).unwrap();
        assert_eq!(applied.change.event_type(), event.event_type);
        seen.push((
            event.event_type.into_owned(),
            applied.previous.map(|p| p.resource_version),
            store.get("fx/w-a").map(|o| o.label("app").unwrap_or("").to_owned()),
        ));
    }
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        seen,
        [
            ("ADDED".into(), None, s("web")),
            ("MODIFIED".into(), Some(268), s("web")),
            ("MODIFIED".into(), Some(269), s("other")),
            ("DELETED".into(), Some(270), None),
        ]
    );
    assert_eq!(store.resource_version(), 271);
    assert_eq!(store.at(269, t).unwrap().get("fx/w-a").unwrap().label("app"), Some("web"));
    assert_eq!(store.len(), 4);
}
