//! The store and `select` against simple models: a `BTreeMap` per resourceVersion, and a list
//! filtered naively over it. Objects are pods, so that lists read the indexes by node and by
//! name; every list is also taken from the same state without indexes (the key-range walk).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use proptest::prelude::*;

use super::index::Indexes;
use super::object::CachedObject;
use super::select::{select, Page, Query};
use super::store::{Change, Snapshot, SnapshotError, Store};
use super::testutil::labeled_pod;
use crate::wire::continue_token;
use crate::wire::selector::{FieldSelector, LabelSelector};

const NAMESPACES: [&str; 4] = ["a", "a-b", "ab", "b"];
const NAMES: [&str; 4] = ["x", "x-1", "y", "z"];
const APPS: [&str; 3] = ["web", "db", ""];
const NODES: [&str; 3] = ["n1", "n2", ""];
const INDEXED: &[&str] = &["metadata.name", "spec.nodeName"];
/// The apiserver's index of pods, as a list at the latest state gives it.
const LATEST: &[&str] = &["spec.nodeName"];

/// What the model knows of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Obj {
    ns: &'static str,
    name: &'static str,
    rv: u64,
    node: &'static str,
    labels: BTreeMap<String, String>,
}

type State = BTreeMap<String, Obj>;

/// An object as compared: key, resourceVersion, labels.
type View = (String, u64, Vec<(String, String)>);

fn build(
    ns: &'static str,
    name: &'static str,
    rv: u64,
    app: &str,
    node: &'static str,
) -> (Obj, Arc<CachedObject>) {
    let labels: Vec<(&str, &str)> = if app.is_empty() { vec![] } else { vec![("app", app)] };
    let model_labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    (Obj { ns, name, rv, node, labels: model_labels }, labeled_pod(ns, name, rv, node, &labels))
}

fn view(o: &CachedObject) -> View {
    (o.key.to_string(), o.resource_version, o.labels().to_vec())
}

fn model_view(key: &str, o: &Obj) -> View {
    (key.to_owned(), o.rv, o.labels.clone().into_iter().collect())
}

#[derive(Debug, Clone)]
enum Op {
    /// kind 0 = ADDED, 1 = MODIFIED, 2 = DELETED; `rv_step` 0 makes a stale event.
    Event {
        kind: u8,
        ns: usize,
        name: usize,
        app: usize,
        node: usize,
        rv_step: u64,
    },
    Relist {
        objects: Vec<(usize, usize, usize, usize)>,
        rv_step: u64,
    },
    Bookmark {
        rv_step: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0..4usize, 0..4usize, 0..3usize, 0..3usize, 0u64..3).prop_map(
            |(kind, ns, name, app, node, rv_step)| Op::Event { kind, ns, name, app, node, rv_step }
        ),
        // A list is never at an RV the cache already holds a different state for.
        1 => (proptest::collection::vec((0..4usize, 0..4usize, 0..3usize, 0..3usize), 0..10),
              1u64..4)
            .prop_map(|(objects, rv_step)| Op::Relist { objects, rv_step }),
        1 => (0u64..3).prop_map(|rv_step| Op::Bookmark { rv_step }),
    ]
}

/// The store and its model: every state since the last relist, by the RV it began at.
struct Harness {
    store: Store,
    rv: u64,
    since_relist: Vec<(u64, State)>,
}

impl Harness {
    fn new() -> Self {
        let store = Store::default().with_indexes(INDEXED);
        Self { store, rv: 0, since_relist: vec![(0, State::new())] }
    }

    fn state(&self) -> State {
        self.since_relist.last().map(|(_, s)| s.clone()).unwrap_or_default()
    }

    fn run(&mut self, op: &Op) {
        let now = Instant::now();
        match *op {
            Op::Event { kind, ns, name, app, node, rv_step } => {
                let rv = self.rv + rv_step;
                let (obj, cached) = build(NAMESPACES[ns], NAMES[name], rv, APPS[app], NODES[node]);
                let change = match kind {
                    0 => Change::Added(cached),
                    1 => Change::Modified(cached),
                    _ => Change::Deleted(cached),
                };
                let result = self.store.apply(change, now);
                if rv_step == 0 {
                    assert!(result.is_err());
                    return;
                }
                let key = CachedObject::key_for(obj.ns, obj.name);
                let mut state = self.state();
                let previous = if kind == 2 { state.remove(&key) } else { state.insert(key, obj) };
                assert_eq!(
                    result.unwrap().previous.map(|p| p.resource_version),
                    previous.map(|p| p.rv)
                );
                self.rv = rv;
                self.since_relist.push((rv, state));
            }
            Op::Relist { ref objects, rv_step } => {
                let rv = self.rv + rv_step;
                let built: Vec<_> = objects
                    .iter()
                    .map(|&(ns, name, app, node)| {
                        build(NAMESPACES[ns], NAMES[name], rv, APPS[app], NODES[node])
                    })
                    .collect();
                let before = self.state();
                let mut state = State::new();
                for (obj, _) in &built {
                    state.insert(CachedObject::key_for(obj.ns, obj.name), obj.clone());
                }
                let changes = self.store.replace(built.into_iter().map(|(_, c)| c), rv, now);
                let mut expected = Vec::new();
                for key in
                    before.keys().chain(state.keys()).collect::<std::collections::BTreeSet<_>>()
                {
                    match (before.get(key), state.get(key)) {
                        (None, Some(o)) => expected.push(("ADDED", model_view(key, o))),
                        (Some(o), None) => expected.push(("DELETED", model_view(key, o))),
                        (Some(a), Some(b)) if a != b => {
                            expected.push(("MODIFIED", model_view(key, b)))
                        }
                        _ => {}
                    }
                }
                let got: Vec<_> = changes
                    .iter()
                    .map(|a| (a.change.event_type(), view(a.change.object())))
                    .collect();
                assert_eq!(got, expected);
                self.rv = rv;
                self.since_relist = vec![(rv, state)];
            }
            Op::Bookmark { rv_step } => {
                self.store.bookmark(self.rv + rv_step, now);
                self.rv += rv_step;
            }
        }
    }

    /// The model's state at `rv`, or the error the store must give.
    fn at(&self, rv: u64) -> Result<State, SnapshotError> {
        if rv > self.rv {
            return Err(SnapshotError::TooNew { current: self.rv });
        }
        let oldest = self.since_relist.first().map_or(0, |(r, _)| *r);
        self.since_relist
            .iter()
            .rev()
            .find(|(began, _)| *began <= rv)
            .map(|(_, s)| s.clone())
            .ok_or(SnapshotError::TooOld { oldest })
    }
}

fn state_view(state: &State) -> Vec<View> {
    state.iter().map(|(k, o)| model_view(k, o)).collect()
}

/// A selectable field of a model pod.
fn field_of(o: &Obj, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(o.name.to_owned()),
        "metadata.namespace" => Some(o.ns.to_owned()),
        "spec.nodeName" => Some(o.node.to_owned()),
        _ => None,
    }
}

/// The indexes built afresh from a state's objects.
fn rebuilt(snapshot: &Snapshot) -> Indexes {
    let mut indexes = Indexes::new(INDEXED);
    for o in snapshot.items().values() {
        indexes.update(None, Some(o));
    }
    indexes
}

/// A page as compared with the model's.
fn outcome(page: Page) -> (Vec<String>, Option<String>, Option<i64>) {
    let keys = page.items.iter().map(|o| o.key.to_string()).collect();
    (keys, page.continue_token, page.remaining_item_count)
}

/// The list the apiserver's rules give, computed naively over the model.
fn naive(state: &State, rv: u64, q: &Query<'_>) -> (Vec<String>, Option<String>, Option<i64>) {
    let matches = |o: &Obj| {
        q.label.is_none_or(|l| l.matches(&o.labels))
            && q.field.is_none_or(|f| f.matches(|name| field_of(o, name)))
    };
    let name = q.field.and_then(|f| f.exact_value("metadata.name"));
    if let (None, Some(name), Some(ns)) = (q.start, name, q.namespace) {
        let key = CachedObject::key_for(ns, name);
        let hit = state.get(&key).filter(|o| matches(o)).map(|_| key);
        return (hit.into_iter().collect(), None, None);
    }
    let prefix = q.namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let from = format!("{prefix}{}", q.start.map_or("", |s| &s[1..]));
    let scoped: Vec<(&String, &Obj)> = state
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) && k.as_str() >= from.as_str())
        .collect();
    let matching: Vec<_> = scoped.iter().filter(|(_, o)| matches(o)).collect();
    // Served from the apiserver's index, the range holds only that index entry's objects.
    let pinned =
        q.upstream_indexes.iter().find_map(|&f| Some((f, q.field?.exact_value(f)?.to_owned())));
    let in_range = |o: &Obj| {
        pinned.as_ref().is_none_or(|(f, value)| field_of(o, f).unwrap_or_default() == *value)
    };
    let limit = q.limit.unwrap_or(usize::MAX);
    let page: Vec<_> = matching.iter().take(limit).collect();
    let unfiltered = q.label.is_none_or(|l| l.is_empty()) && q.field.is_none_or(|f| f.is_empty());
    let last = page.last().map(|(k, _)| (*k).clone());
    let has_more = page.len() == limit
        && last.as_ref().is_some_and(|l| scoped.iter().any(|(k, o)| *k > l && in_range(o)));
    let token = last.as_ref().filter(|_| has_more).map(|_| {
        let (_, o) = page[page.len() - 1];
        let start = continue_token::start_key(Some(o.ns), o.name, q.namespace.is_some());
        continue_token::encode(rv as i64, &start)
    });
    let remaining = (unfiltered && has_more).then(|| (scoped.len() - limit) as i64);
    (page.iter().map(|(k, _)| (*k).clone()).collect(), token, remaining)
}

/// Namespace, label selector, field selector, limit, start key, and whether the list is at
/// the latest state (where the apiserver reads its index).
type QueryParts = (Option<usize>, usize, usize, Option<usize>, Option<usize>, bool);

fn query_parts() -> impl Strategy<Value = QueryParts> {
    (
        proptest::option::of(0..4usize),
        0..LABELS.len(),
        0..FIELDS.len(),
        proptest::option::of(1..4usize),
        proptest::option::of(0..16usize),
        any::<bool>(),
    )
}

const LABELS: [&str; 4] = ["", "app=web", "app!=web", "!app"];
const FIELDS: [&str; 10] = [
    "",
    "metadata.name=x",
    "metadata.namespace=a",
    "metadata.name!=y",
    "spec.nodeName=n1",
    "spec.nodeName=",
    "spec.nodeName!=n1",
    "spec.nodeName=n2,metadata.name!=x",
    "metadata.name=y,spec.nodeName=n1",
    "metadata.namespace=ab,spec.nodeName==n2",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn store_follows_the_model(ops in proptest::collection::vec(op(), 1..40), probes in proptest::collection::vec(0u64..120, 8)) {
        let mut h = Harness::new();
        for op in &ops {
            h.run(op);
            let current = h.store.current();
            prop_assert_eq!(current.resource_version(), h.rv);
            let got: Vec<_> = current.items().values().map(|o| view(o)).collect();
            prop_assert_eq!(got, state_view(&h.state()));
            let bytes: usize = current.items().values().map(|o| o.body.len()).sum();
            prop_assert_eq!(h.store.bytes(), bytes);
            prop_assert_eq!(current.indexes(), &rebuilt(&current));
        }
        for rv in probes {
            let at = h.store.at(rv, Instant::now());
            // A past state carries the indexes of its own objects.
            if let Ok(s) = &at {
                prop_assert_eq!(s.indexes(), &rebuilt(s));
            }
            let got = at.map(|s| s.items().values().map(|o| view(o)).collect::<Vec<_>>());
            prop_assert_eq!(got, h.at(rv).map(|s| state_view(&s)));
        }
    }

    #[test]
    fn select_equals_the_naive_list(
        ops in proptest::collection::vec(op(), 1..30),
        (ns, label, field, limit, start, latest) in query_parts(),
        probe in 0u64..60,
    ) {
        let mut h = Harness::new();
        for op in &ops {
            h.run(op);
        }
        let label = LabelSelector::parse(LABELS[label]).unwrap();
        let field = FieldSelector::parse(FIELDS[field]).unwrap();
        let namespace = ns.map(|i| NAMESPACES[i]);
        // A start key after any object of the scope (relative to its prefix).
        let start = start.map(|i| {
            let name = NAMES[i % 4];
            match namespace {
                Some(_) => format!("/{name}\0"),
                None => format!("/{}/{name}{}", NAMESPACES[i / 4], if i % 2 == 0 { "\0" } else { "" }),
            }
        });
        let q = Query {
            namespace,
            namespaced: true,
            label: Some(&label),
            field: Some(&field),
            limit,
            start: start.as_deref(),
            upstream_indexes: if latest { LATEST } else { &[] },
        };
        // The current state and a past one, through the indexes and by walking the key range.
        let mut states = vec![(h.store.current(), h.state())];
        if let (Ok(past), Ok(model)) = (h.store.at(probe, Instant::now()), h.at(probe)) {
            states.push((past, model));
        }
        for (snapshot, model) in states {
            let expected = naive(&model, snapshot.resource_version(), &q);
            let page = select(&snapshot, &q);
            let pinned = INDEXED.iter().any(|f| field.exact_value(f).is_some());
            let single_key = namespace.is_some()
                && start.is_none()
                && field.exact_value("metadata.name").is_some();
            prop_assert_eq!(page.index.is_some(), pinned && !single_key);
            prop_assert_eq!(outcome(page), expected.clone());
            let bare = Snapshot::new(snapshot.resource_version(), snapshot.items().clone());
            let page = select(&bare, &q);
            prop_assert_eq!(page.index, None);
            prop_assert_eq!(outcome(page), expected);
        }
    }

    #[test]
    fn paging_while_the_store_changes_lists_one_state(
        setup in proptest::collection::vec(op(), 1..20),
        during in proptest::collection::vec(op(), 0..20),
        limit in 1..4usize,
        (ns, label, field, _, _, latest) in query_parts(),
    ) {
        let mut h = Harness::new();
        for op in &setup {
            h.run(op);
        }
        let label = LabelSelector::parse(LABELS[label]).unwrap();
        let field = FieldSelector::parse(FIELDS[field]).unwrap();
        let namespace = ns.map(|i| NAMESPACES[i]);
        let q = Query {
            namespace,
            namespaced: true,
            label: Some(&label),
            field: Some(&field),
            limit: Some(limit),
            ..Query::default()
        };
        let first = h.store.current();
        let expected = naive(&h.state(), first.resource_version(), &Query { limit: None, ..q }).0;
        let mut listed: Vec<String> = Vec::new();
        // The first page may be of the latest state, read from the apiserver's index; the next
        // ones are at the token's RV: ending early there must not lose an object.
        let upstream_indexes = if latest { LATEST } else { &[] };
        let mut page = select(&first, &Query { upstream_indexes, ..q });
        let mut during = during.iter();
        let mut relisted = false;
        loop {
            listed.extend(page.items.iter().map(|o| o.key.to_string()));
            let Some(token) = page.continue_token else { break };
            let token = continue_token::decode(&token).unwrap();
            prop_assert_eq!(token.rv as u64, first.resource_version());
            if let Some(op) = during.next() {
                relisted |= matches!(op, Op::Relist { .. });
                h.run(op);
            }
            // Only a relist in between drops the first page's state (the apiserver then falls
            // back to etcd, or answers 410).
            let Ok(snapshot) = h.store.at(token.rv as u64, Instant::now()) else {
                prop_assert!(relisted);
                return Ok(());
            };
            page = select(&snapshot, &Query { start: Some(&token.start), ..q });
        }
        prop_assert_eq!(listed, expected);
    }
}
