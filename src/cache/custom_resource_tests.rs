//! Custom resources against a real kube-apiserver 1.36 (`scripts/realcluster/crd-capture.py`,
//! `tests/fixtures/realcluster/custom/`): Cilium's CiliumNode and CiliumIdentity
//! (cluster-scoped), CiliumEndpoint and CiliumNetworkPolicy (namespaced), and a test CRD with
//! two served versions and selectable fields, each read in every form a cache of custom
//! resources answers. The apiserver holds custom resources as `Unstructured` maps, so none of
//! this is the typed encoders' order: what kubeplex writes from the objects a cache holds — the
//! list, its pages, a get, the WatchList's events and its initial-events-end BOOKMARK, events
//! of a watch while objects change, and each as PartialObjectMetadata — must be the
//! apiserver's bytes.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use super::frames::Encoder;
use super::object::{CachedObject, Encoding};
use super::select::{select, Query};
use super::store::Store;
use crate::wire::list_watch::parse_list_page;
use crate::wire::meta::{unstructured, ListMeta};
use crate::wire::resource::ResourceInfo;

const META_API_VERSION: &str = "meta.k8s.io/v1";

/// The namespace `crd-capture.py` creates its namespaced objects in.
const NAMESPACE: &str = "crd-capture";

/// (fixture name, group, version, resource, kind, namespaced): every kind `crd-capture.py` takes.
const CAPTURED: &[(&str, &str, &str, &str, &str, bool)] = &[
    ("ciliumnodes", "cilium.io", "v2", "ciliumnodes", "CiliumNode", false),
    ("ciliumendpoints", "cilium.io", "v2", "ciliumendpoints", "CiliumEndpoint", true),
    ("ciliumidentities", "cilium.io", "v2", "ciliumidentities", "CiliumIdentity", false),
    (
        "ciliumnetworkpolicies",
        "cilium.io",
        "v2",
        "ciliumnetworkpolicies",
        "CiliumNetworkPolicy",
        true,
    ),
    ("gadgets", "test.kubeplex.io", "v1", "gadgets", "Gadget", true),
    ("gadgets.v2", "test.kubeplex.io", "v2", "gadgets", "Gadget", true),
];

struct Captured {
    name: &'static str,
    info: ResourceInfo,
}

fn kinds() -> impl Iterator<Item = Captured> {
    CAPTURED.iter().map(|&(name, group, version, resource, kind, namespaced)| Captured {
        name,
        info: ResourceInfo {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced,
            verbs: ["get", "list", "watch"].map(String::from).to_vec(),
        },
    })
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/realcluster/custom/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (scripts/realcluster/crd-capture.py)"))
}

/// What the captured list's metadata says: its resourceVersion, continue token, remaining count.
fn list_meta(body: &[u8]) -> (String, String, Option<i64>) {
    let list: Value = serde_json::from_slice(body).expect("a JSON list");
    let m = &list["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&m["resourceVersion"]), s(&m["continue"]), m["remainingItemCount"].as_i64())
}

/// The objects a cache holds from the captured list, and the list's resourceVersion.
fn cached(c: &Captured) -> (Vec<Arc<CachedObject>>, u64) {
    let body = fixture(&format!("{}.json", c.name));
    let page = parse_list_page(Encoding::Json, &body).expect("a list");
    let objects = page
        .items
        .into_iter()
        .map(|item| {
            let o = CachedObject::from_list_item(&c.info, Encoding::Json, item);
            Arc::new(o.unwrap_or_else(|e| panic!("{}: {e}", c.name)))
        })
        .collect();
    (objects, page.resource_version)
}

fn bodies(objects: &[Arc<CachedObject>]) -> Vec<Bytes> {
    objects.iter().map(|o| o.body.clone()).collect()
}

fn same(written: &[u8], captured: &[u8], what: &str) {
    assert_eq!(String::from_utf8_lossy(written), String::from_utf8_lossy(captured), "{what}");
}

/// A list and its first page of 2 (continue token, remainingItemCount), written from the cache
/// as `serve::cache_read::encode` writes them, are the apiserver's.
#[test]
fn lists_and_pages_of_custom_resources_are_the_apiservers() {
    for c in kinds() {
        let (objects, rv) = cached(&c);
        assert!(objects.len() >= 3, "{}: {} objects captured", c.name, objects.len());
        let (api_version, list_kind) = (c.info.api_version(), c.info.list_kind());
        let rv_text = rv.to_string();
        let whole =
            ListMeta { resource_version: &rv_text, continue_token: "", remaining_item_count: None };
        let written = unstructured::list_json(&api_version, &list_kind, &whole, &bodies(&objects));
        same(&written, &fixture(&format!("{}.json", c.name)), c.name);

        // The first page, from a store at the list's RV, as a list at that exact RV pages it.
        let mut store = Store::default().with_indexes(&["metadata.name"]);
        store.replace(objects.clone(), rv, Instant::now());
        let page = select(
            &store.current(),
            &Query {
                // The capture lists a namespaced kind within its namespace.
                namespace: c.info.namespaced.then_some(NAMESPACE),
                namespaced: c.info.namespaced,
                limit: Some(2),
                ..Query::default()
            },
        );
        let captured = fixture(&format!("{}.page.json", c.name));
        let (page_rv, token, remaining) = list_meta(&captured);
        assert_eq!(page_rv, rv_text);
        assert_eq!(page.continue_token.as_deref().unwrap_or_default(), token, "{}", c.name);
        assert_eq!(page.remaining_item_count, remaining, "{}", c.name);
        let meta = ListMeta {
            resource_version: &rv_text,
            continue_token: &token,
            remaining_item_count: remaining,
        };
        let written =
            unstructured::list_json(&api_version, &list_kind, &meta, &bodies(&page.items));
        same(&written, &captured, &format!("{}: the first page", c.name));
    }
}

/// The list as a PartialObjectMetadataList, written from the cache, is the apiserver's.
#[test]
fn metadata_lists_of_custom_resources_are_the_apiservers() {
    for c in kinds() {
        let (objects, rv) = cached(&c);
        let rv = rv.to_string();
        let meta =
            ListMeta { resource_version: &rv, continue_token: "", remaining_item_count: None };
        let written = unstructured::partial_object_metadata_list_json(
            META_API_VERSION,
            &meta,
            &bodies(&objects),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        same(&written, &fixture(&format!("{}.meta.json", c.name)), c.name);
    }
}

/// A get, whole and as PartialObjectMetadata: the cached object's bytes, and its metadata.
#[test]
fn gets_of_custom_resources_are_the_apiservers() {
    for (name, kind) in [("ciliumnodes", 0), ("ciliumendpoints", 1), ("gadgets", 4)] {
        let c = kinds().nth(kind).unwrap();
        assert_eq!(c.name, name);
        let captured = fixture(&format!("{name}.get.json"));
        let object: Value = serde_json::from_slice(&captured).unwrap();
        let wanted = object["metadata"]["name"].as_str().unwrap();
        let (objects, _) = cached(&c);
        let o = objects.iter().find(|o| o.name() == wanted).expect("the object in the list");
        let mut written = o.body.to_vec();
        written.push(b'\n');
        same(&written, &captured, name);
        let mut written = unstructured::partial_object_metadata_json(&o.body, META_API_VERSION)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        written.push(b'\n');
        same(&written, &fixture(&format!("{name}.get.meta.json")), &format!("{name}: metadata"));
    }
}

/// A WatchList's ADDED events and its initial-events-end BOOKMARK, whole objects and
/// PartialObjectMetadata, framed from the cache as kubeplex frames them.
#[test]
fn watch_lists_of_custom_resources_are_the_apiservers() {
    for c in kinds() {
        let (objects, _) = cached(&c);
        let frames = Encoder::new(Encoding::Json, &c.info.api_version(), &c.info.kind, false);
        for (ext, metadata) in [("watch.json", false), ("meta.watch.json", true)] {
            let captured = fixture(&format!("{}.{ext}", c.name));
            let lines: Vec<&[u8]> = captured.split_inclusive(|b| *b == b'\n').collect();
            let (last, added) = lines.split_last().expect("events");
            assert_eq!(added.len(), objects.len(), "{} {ext}: one ADDED per object", c.name);
            for line in added {
                let event: Value = serde_json::from_slice(line).unwrap();
                assert_eq!(event["type"], "ADDED");
                let name = event["object"]["metadata"]["name"].as_str().unwrap();
                let namespace = event["object"]["metadata"]["namespace"].as_str().unwrap_or("");
                let o = objects
                    .iter()
                    .find(|o| o.name() == name && o.namespace() == namespace)
                    .expect("the object in the list");
                let written = frames.event("ADDED", &o.body, metadata).unwrap();
                same(&written, line, &format!("{} {ext}: {name}", c.name));
            }
            let bookmark: Value = serde_json::from_slice(last).unwrap();
            assert_eq!(bookmark["type"], "BOOKMARK", "{} {ext}", c.name);
            let rv = bookmark["object"]["metadata"]["resourceVersion"].as_str().unwrap();
            let written = frames.bookmark(rv.parse().unwrap(), true, metadata);
            same(&written, last, &format!("{} {ext}: the initial-events-end bookmark", c.name));
        }
    }
}

/// A watch while objects change (a patch, a status patch, a delete, a create): each event's
/// object, held by the cache as it came and framed again, is the apiserver's frame.
#[test]
fn watch_events_of_custom_resources_are_the_apiservers() {
    let mut types = std::collections::BTreeSet::new();
    for c in kinds() {
        let frames = Encoder::new(Encoding::Json, &c.info.api_version(), &c.info.kind, false);
        let captured = fixture(&format!("{}.events.json", c.name));
        for line in captured.split_inclusive(|b| *b == b'\n') {
            let event: Value = serde_json::from_slice(line).unwrap();
            let kind = event["type"].as_str().unwrap();
            let start = line.windows(10).position(|w| w == b"\"object\":{").expect("an object") + 9;
            let object = Bytes::copy_from_slice(&line[start..line.len() - 2]);
            let o = CachedObject::from_watch_object(&c.info, Encoding::Json, object)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let written = frames.event(kind, &o.body, false).unwrap();
            same(&written, line, &format!("{} {kind}", c.name));
            types.insert(kind.to_owned());
        }
    }
    assert_eq!(types.into_iter().collect::<Vec<_>>(), ["ADDED", "DELETED", "MODIFIED"]);
}

/// The list as a protobuf PartialObjectMetadataList (what client-go's metadata informers ask
/// for first), written from the JSON cache, is the apiserver's.
#[test]
fn protobuf_metadata_lists_of_custom_resources_are_the_apiservers() {
    for c in kinds() {
        let (objects, rv) = cached(&c);
        let rv = rv.to_string();
        let meta =
            ListMeta { resource_version: &rv, continue_token: "", remaining_item_count: None };
        let messages: Vec<Vec<u8>> = objects
            .iter()
            .map(|o| unstructured::partial_object_metadata_message(&o.body))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let written =
            crate::wire::proto::partial_object_metadata_list(META_API_VERSION, &meta, &messages)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let captured = fixture(&format!("{}.meta.pb", c.name));
        assert!(
            written == captured,
            "{}: {} bytes written, {} captured",
            c.name,
            written.len(),
            captured.len()
        );
    }
}
