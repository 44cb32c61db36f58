use std::time::Instant;

use super::super::store::{Change, Store};
use super::super::testutil::{cm, pod};
use super::*;

const POD_FIELDS: &[&str] = &["metadata.name", "spec.nodeName"];

fn pods_store() -> Store {
    Store::default().with_indexes(POD_FIELDS)
}

/// An index as (value, keys) pairs, in order.
fn entries(indexes: &Indexes, field: &str) -> Vec<(String, Vec<String>)> {
    let index = indexes.get(field).unwrap();
    index
        .entries()
        .map(|(value, keys)| (value.to_owned(), keys.iter().map(|k| k.to_string()).collect()))
        .collect()
}

fn entry(value: &str, keys: &[&str]) -> (String, Vec<String>) {
    (value.to_owned(), keys.iter().map(|k| (*k).to_owned()).collect())
}

/// The indexes built afresh from the store's current objects.
fn rebuilt(store: &Store) -> Indexes {
    let mut indexes = Indexes::new(POD_FIELDS);
    for o in store.current().items().values() {
        indexes.update(None, Some(o));
    }
    indexes
}

#[test]
fn fields_indexed_by_resource_and_encoding() {
    // What the apiserver's watch cache indexes (the registry's index fields), and no more.
    assert_eq!(indexed_fields(Encoding::Json, "", "pods"), ["spec.nodeName"]);
    // A protobuf cache reads the node name from the message, and indexes it too.
    assert_eq!(indexed_fields(Encoding::Protobuf, "", "pods"), ["spec.nodeName"]);
    assert!(indexed_fields(Encoding::Protobuf, "", "nodes").is_empty());
    assert!(indexed_fields(Encoding::Json, "", "configmaps").is_empty());
    assert!(indexed_fields(Encoding::Json, "example.com", "pods").is_empty());
    let indexes = Indexes::new(&["metadata.name", "metadata.name"]);
    assert_eq!(indexes.fields().collect::<Vec<_>>(), ["metadata.name"]);
    assert!(indexes.get("spec.nodeName").is_none());
}

#[test]
fn events_add_move_and_remove_keys() {
    let t0 = Instant::now();
    let mut store = pods_store();
    store.replace([pod("a", "p1", 1, "n1"), pod("b", "p1", 2, "n2")], 10, t0);
    store.apply(Change::Added(pod("a", "p2", 11, "n1")), t0).unwrap();
    store.apply(Change::Added(pod("a", "p3", 12, "")), t0).unwrap();
    let indexes = store.current().indexes().clone();
    assert_eq!(
        entries(&indexes, "spec.nodeName"),
        [entry("", &["a/p3"]), entry("n1", &["a/p1", "a/p2"]), entry("n2", &["b/p1"])]
    );
    assert_eq!(
        entries(&indexes, "metadata.name"),
        [entry("p1", &["a/p1", "b/p1"]), entry("p2", &["a/p2"]), entry("p3", &["a/p3"])]
    );

    // Scheduling a pod moves its key; the emptied value goes away.
    store.apply(Change::Modified(pod("a", "p3", 13, "n2")), t0).unwrap();
    // A status change leaves every index as it was.
    let before = store.current().indexes().clone();
    store.apply(Change::Modified(pod("a", "p1", 14, "n1")), t0).unwrap();
    assert_eq!(store.current().indexes(), &before);
    assert_eq!(
        entries(store.current().indexes(), "spec.nodeName"),
        [entry("n1", &["a/p1", "a/p2"]), entry("n2", &["a/p3", "b/p1"])]
    );

    // DELETED removes the key from the entries of its last state; deleting an absent key, or
    // an ADDED for a present one, keeps the index exact.
    store.apply(Change::Deleted(pod("b", "p1", 15, "n2")), t0).unwrap();
    store.apply(Change::Deleted(pod("b", "zz", 16, "n9")), t0).unwrap();
    store.apply(Change::Added(pod("a", "p2", 17, "n3")), t0).unwrap();
    let indexes = store.current().indexes().clone();
    assert_eq!(
        entries(&indexes, "spec.nodeName"),
        [entry("n1", &["a/p1"]), entry("n2", &["a/p3"]), entry("n3", &["a/p2"])]
    );
    assert_eq!(
        entries(&indexes, "metadata.name"),
        [entry("p1", &["a/p1"]), entry("p2", &["a/p2"]), entry("p3", &["a/p3"])]
    );
    assert_eq!(indexes, rebuilt(&store));
}

#[test]
fn relist_applies_its_differences_to_the_indexes() {
    let t0 = Instant::now();
    let mut store = pods_store();
    store.replace(
        [pod("a", "p1", 1, "n1"), pod("a", "p2", 2, "n1"), pod("a", "p3", 3, "n2")],
        10,
        t0,
    );
    let changes = store.replace(
        [
            pod("a", "p1", 1, "n1"),  // unchanged
            pod("a", "p2", 20, "n3"), // moved
            pod("a", "p4", 21, "n2"), // added; p3 deleted
        ],
        30,
        t0,
    );
    assert_eq!(changes.len(), 3);
    assert_eq!(
        entries(store.current().indexes(), "spec.nodeName"),
        [entry("n1", &["a/p1"]), entry("n2", &["a/p4"]), entry("n3", &["a/p2"])]
    );
    assert_eq!(store.current().indexes(), &rebuilt(&store));
    // Relisting to nothing empties every index.
    store.replace(Vec::<Arc<CachedObject>>::new(), 40, t0);
    assert_eq!(entries(store.current().indexes(), "spec.nodeName"), []);
    assert_eq!(entries(store.current().indexes(), "metadata.name"), []);
}

#[test]
fn past_states_keep_their_own_indexes() {
    let t0 = Instant::now();
    let mut store = pods_store();
    store.replace([pod("a", "p1", 1, "n1")], 10, t0);
    let taken = store.current();
    store.apply(Change::Modified(pod("a", "p1", 11, "n2")), t0).unwrap();
    store.apply(Change::Added(pod("a", "p2", 12, "n1")), t0).unwrap();
    let n1 = |s: &super::super::store::Snapshot| {
        s.indexes()
            .get("spec.nodeName")
            .and_then(|i| i.keys("n1"))
            .map(|k| k.iter().map(|k| k.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(n1(&taken), Some(vec!["a/p1".to_owned()]));
    assert_eq!(n1(&store.at(10, t0).unwrap()), Some(vec!["a/p1".to_owned()]));
    assert_eq!(n1(&store.at(11, t0).unwrap()), None);
    assert_eq!(n1(&store.current()), Some(vec!["a/p2".to_owned()]));
}

#[test]
fn indexes_can_be_chosen_after_loading() {
    let t0 = Instant::now();
    let mut store = Store::default();
    store.replace([pod("a", "p1", 1, "n1"), cm("a", "c", 2, &[])], 10, t0);
    assert!(store.current().indexes().get("spec.nodeName").is_none());
    let store = store.with_indexes(POD_FIELDS);
    // A configmap has no node name: it reads as "", as a selector reads it.
    assert_eq!(
        entries(store.current().indexes(), "spec.nodeName"),
        [entry("", &["a/c"]), entry("n1", &["a/p1"])]
    );
    assert_eq!(indexed_value(&pod("a", "p", 1, ""), "spec.nodeName"), "");
    assert_eq!(indexed_value(&cm("a", "c", 1, &[]), "status.phase"), "");
}
