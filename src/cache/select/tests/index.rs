//! `select` through the indexes: the objects read, and the token rule of each kind of list.

use std::time::Instant;

use super::super::*;
use crate::cache::store::{Change, Snapshot, Store};
use crate::cache::testutil::{cm, keys, labeled_pod, pod};
use crate::wire::continue_token::decode;

const POD_INDEXES: &[&str] = &["metadata.name", "spec.nodeName"];
/// What the serving side passes for a pods list at the latest state.
const LATEST: &[&str] = &["spec.nodeName"];

fn store_of(objects: Vec<Arc<CachedObject>>, rv: u64) -> Store {
    let mut store = Store::default().with_indexes(POD_INDEXES);
    store.replace(objects, rv, Instant::now());
    store
}

/// The same state without indexes: `select` walks its key range.
fn unindexed(snapshot: &Snapshot) -> Snapshot {
    Snapshot::new(snapshot.resource_version(), snapshot.items().clone())
}

fn pods_selector(s: &str) -> FieldSelector {
    cacheable_field_selector(Encoding::Json, "", "pods", &FieldSelector::parse(s).unwrap()).unwrap()
}

fn token_start(page: &Page) -> Option<String> {
    page.continue_token.as_deref().map(|t| decode(t).unwrap().start)
}

fn four_pods() -> Store {
    store_of(
        vec![
            pod("a", "p1", 1, "n1"),
            pod("a", "p2", 2, "n2"),
            pod("a", "p3", 3, "n1"),
            labeled_pod("b", "p4", 4, "n2", &[("app", "web")]),
        ],
        9,
    )
}

#[test]
fn a_node_list_reads_only_that_nodes_pods() {
    let snap = four_pods().current();
    let list = |selector: &str, namespace, label: Option<&LabelSelector>| {
        let field = pods_selector(selector);
        let q =
            Query { namespace, namespaced: true, label, field: Some(&field), ..Query::default() };
        let (page, scanned) = (select(&snap, &q), select(&unindexed(&snap), &q));
        assert_eq!(page.items, scanned.items, "{selector}");
        assert_eq!(scanned.index, None);
        (keys(&page.items), page.index, page.fetched, scanned.fetched)
    };
    let node = Some("spec.nodeName");
    assert_eq!(
        list("spec.nodeName=n1", None, None),
        (vec!["a/p1".into(), "a/p3".into()], node, 2, 4)
    );
    // The old alias is converted first, so it reads the index too.
    assert_eq!(list("spec.host=n2", None, None).1, node);
    assert_eq!(list("spec.nodeName=n2", Some("b"), None), (vec!["b/p4".into()], node, 1, 1));
    assert_eq!(list("spec.nodeName=n9", None, None), (vec![], node, 0, 4));
    let web = LabelSelector::parse("app=web").unwrap();
    assert_eq!(list("spec.nodeName=n2", None, Some(&web)), (vec!["b/p4".into()], node, 2, 4));
    // The other terms still apply to what the index gives.
    assert_eq!(list("spec.nodeName=n1,metadata.name!=p1", None, None).0, ["a/p3"]);
    assert_eq!(list("spec.nodeName=n1,spec.nodeName=n2", None, None).0, Vec::<String>::new());
    // Only `=` pins a value.
    assert_eq!(
        list("spec.nodeName!=n1", None, None),
        (vec!["a/p2".into(), "b/p4".into()], None, 4, 4)
    );
}

#[test]
fn the_token_rule_follows_the_apiservers_index_only_at_the_latest_state() {
    let snap = four_pods().current();
    let field = pods_selector("spec.nodeName=n1");
    let exact = Query { namespaced: true, field: Some(&field), limit: Some(2), ..Query::default() };
    let latest = Query { upstream_indexes: LATEST, ..exact };
    for snap in [snap.clone(), unindexed(&snap)] {
        // Both n1 pods fill the page. In the key range "a/p4" follows: a token, and an empty
        // next page. In the apiserver's index entry for n1 nothing follows: no token.
        let page = select(&snap, &exact);
        assert_eq!(
            (keys(&page.items), token_start(&page)),
            (vec!["a/p1".into(), "a/p3".into()], Some("/a/p3\0".into()))
        );
        let page = select(&snap, &latest);
        assert_eq!(
            (keys(&page.items), page.continue_token),
            (vec!["a/p1".into(), "a/p3".into()], None)
        );
        assert_eq!(page.remaining_item_count, None);

        // A page of one: another n1 pod follows either way.
        let page = select(&snap, &Query { limit: Some(1), ..latest });
        assert_eq!(
            (keys(&page.items), token_start(&page)),
            (vec!["a/p1".into()], Some("/a/p1\0".into()))
        );
        // The next pages are continued, at an exact RV: the key range again.
        let start = token_start(&page).unwrap();
        let q = Query { limit: Some(1), start: Some(&start), ..exact };
        let page = select(&snap, &q);
        assert_eq!(
            (keys(&page.items), token_start(&page)),
            (vec!["a/p3".into()], Some("/a/p3\0".into()))
        );
        let q = Query { start: Some("/a/p3\0"), ..q };
        let page = select(&snap, &q);
        assert_eq!((page.items.len(), page.continue_token), (0, None));
    }
    // Pinning a field the apiserver does not index keeps the key range as the range.
    let name = pods_selector("metadata.name=p1");
    let q = Query {
        namespaced: true,
        field: Some(&name),
        limit: Some(1),
        upstream_indexes: LATEST,
        ..Query::default()
    };
    let page = select(&snap, &q);
    assert_eq!((keys(&page.items), page.index), (vec!["a/p1".into()], Some("metadata.name")));
    assert_eq!(token_start(&page), Some("/a/p1\0".into()));
}

#[test]
fn a_name_across_namespaces_reads_the_name_index() {
    let store = store_of(
        vec![
            cm("a", "x", 1, &[]),
            cm("b", "x", 2, &[]),
            cm("b", "y", 3, &[]),
            cm("c", "x", 4, &[]),
        ],
        9,
    );
    let snap = store.current();
    let x = FieldSelector::parse("metadata.name=x").unwrap();
    let q = Query { namespaced: true, field: Some(&x), limit: Some(2), ..Query::default() };
    let page = select(&snap, &q);
    assert_eq!(
        (keys(&page.items), page.index, page.fetched),
        (vec!["a/x".into(), "b/x".into()], Some("metadata.name"), 2)
    );
    assert_eq!(token_start(&page), Some("/b/x\0".into()));
    assert_eq!(select(&unindexed(&snap), &q), Page { fetched: 2, index: None, ..page });
    let page = select(&snap, &Query { start: Some("/b/x\0"), ..q });
    assert_eq!((keys(&page.items), page.continue_token), (vec!["c/x".into()], None));
    // Two pinned indexed fields: the smaller entry is read.
    let field = pods_selector("metadata.name=p4,spec.nodeName=n2");
    let q = Query { namespaced: true, field: Some(&field), ..Query::default() };
    let page = select(&four_pods().current(), &q);
    assert_eq!(
        (keys(&page.items), page.index, page.fetched),
        (vec!["b/p4".into()], Some("metadata.name"), 1)
    );
}

#[test]
fn a_snapshot_answers_from_its_own_index_after_changes() {
    let t0 = Instant::now();
    let mut store = four_pods();
    let before = store.current();
    store.apply(Change::Modified(pod("a", "p1", 10, "n2")), t0).unwrap();
    store.apply(Change::Added(pod("a", "p0", 11, "n1")), t0).unwrap();
    store.apply(Change::Deleted(pod("a", "p3", 12, "n1")), t0).unwrap();
    let field = pods_selector("spec.nodeName=n1");
    let q = Query {
        namespaced: true,
        field: Some(&field),
        upstream_indexes: LATEST,
        ..Query::default()
    };
    assert_eq!(keys(&select(&before, &q).items), ["a/p1", "a/p3"]);
    assert_eq!(keys(&select(&store.at(9, t0).unwrap(), &q).items), ["a/p1", "a/p3"]);
    assert_eq!(keys(&select(&store.at(11, t0).unwrap(), &q).items), ["a/p0", "a/p3"]);
    assert_eq!(keys(&select(&store.current(), &q).items), ["a/p0"]);
}

/// Lists of one node's pods in 10k pods on 100 nodes, through the index and by walking the
/// range. Run: `cargo nextest run --run-ignored only --no-capture index_against_scan`.
#[test]
#[ignore]
fn index_against_scan() {
    let (nodes, per_node) = (100, 100);
    let objects = (0..nodes * per_node)
        .map(|i| {
            pod(
                &format!("ns-{}", i % 10),
                &format!("pod-{i:05}"),
                1,
                &format!("node-{}", i % nodes),
            )
        })
        .collect();
    let t = Instant::now();
    let mut store = store_of(objects, 2);
    let loaded = t.elapsed();
    let snap = store.current();
    let bare = unindexed(&snap);
    let selectors: Vec<_> =
        (0..nodes).map(|n| pods_selector(&format!("spec.nodeName=node-{n}"))).collect();
    let run = |snap: &Snapshot, rounds: usize| {
        let (mut fetched, t) = (0, Instant::now());
        for _ in 0..rounds {
            for field in &selectors {
                let q = Query {
                    namespaced: true,
                    field: Some(field),
                    upstream_indexes: LATEST,
                    ..Query::default()
                };
                let page = select(snap, &q);
                assert_eq!(page.items.len(), per_node);
                fetched += page.fetched;
            }
        }
        (fetched / rounds, t.elapsed() / (rounds * nodes) as u32)
    };
    let (index_fetched, index_time) = run(&snap, 5);
    let (scan_fetched, scan_time) = run(&bare, 1);
    // Index upkeep: 1000 pods rescheduled to another node, and 1000 status updates.
    let mut plain = Store::default().with_indexes(&[]);
    plain.replace(snap.items().values().cloned(), 2, Instant::now());
    // A thousand pods each go to the next node; the same pods again then change nothing indexed.
    let batch = |first_rv: u64| -> Vec<_> {
        (0..1000)
            .map(|i| {
                let node = format!("node-{}", (i + 1) % nodes);
                pod(&format!("ns-{}", i % 10), &format!("pod-{i:05}"), first_rv + i as u64, &node)
            })
            .collect()
    };
    let (moved, updated) = (batch(3), batch(1003));
    let apply = |store: &mut Store, batch: &[Arc<CachedObject>]| {
        let t = Instant::now();
        for p in batch {
            store.apply(Change::Modified(Arc::clone(p)), t).unwrap();
        }
        t.elapsed() / 1000
    };
    let moves = (apply(&mut store, &moved), apply(&mut plain, &moved));
    let updates = (apply(&mut store, &updated), apply(&mut plain, &updated));
    println!("10k pods on 100 nodes, one node's pods per list (relist with indexes: {loaded:?})");
    println!("  index: {index_fetched:>7} objects read for 100 lists, {index_time:?} per list");
    println!("  scan:  {scan_fetched:>7} objects read for 100 lists, {scan_time:?} per list");
    println!(
        "  per event, indexed vs not: node change {:?} vs {:?}, status update {:?} vs {:?}",
        moves.0, moves.1, updates.0, updates.1
    );
    assert_eq!((index_fetched, scan_fetched), (nodes * per_node, nodes * nodes * per_node));
    assert!(index_time < scan_time, "{index_time:?} vs {scan_time:?}");
}
