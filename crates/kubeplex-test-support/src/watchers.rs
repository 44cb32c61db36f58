//! Shared by the watch tests (`proxy_watch`, `kube_rs_watch`, `proxy_kubectl_watch`): small
//! pods, a churn driver and a fault schedule for the fake apiserver, the state a client should
//! converge to, and a client that lists and watches as client-go's reflector does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kubeplex_sim::Sim;
use rand::Rng;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::stack::Stack;
use crate::{get, Resp};

pub const JSON: &str = "application/json";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Namespaces the churn writes pods in (both exist in every seeded cluster of 2+ namespaces).
pub const CHURN_NAMESPACES: [&str; 2] = ["team-0", "team-1"];
/// Pod names the churn picks from, so names are deleted and created again.
const CHURN_NAMES: usize = 40;
/// Pods of each churn namespace before the churn starts.
const CHURN_SEEDED: usize = 24;

/// A scheduled, running pod of a few hundred bytes (a thousand watchers of seeded 3 KB pods
/// would mostly measure copying).
pub fn small_pod(ns: &str, name: &str, phase: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "churn", "phase": phase}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "registry.example/app:1"}]},
        "status": {"phase": "Running"}})
}

fn churn_pod(ns: &str, i: usize) -> Value {
    let phase = if i % 2 == 0 { "a" } else { "b" };
    small_pod(ns, &format!("churn-{i}"), phase, &format!("node-{}", i % 3))
}

/// Creates the pods the churn starts from.
pub fn seed_churn_pods(sim: &Sim) {
    for ns in CHURN_NAMESPACES {
        for i in 0..CHURN_SEEDED {
            sim.create(churn_pod(ns, i)).expect("seed churn pod");
        }
    }
}

/// One random write: create a missing pod, or change an annotation, toggle the `phase` label
/// (label-selected watchers see it enter or leave), or delete an existing one.
fn churn_step(sim: &Sim, n: usize) {
    let (ns, i, roll) = {
        let mut rng = rand::rng();
        (
            CHURN_NAMESPACES[rng.random_range(0..CHURN_NAMESPACES.len())],
            rng.random_range(0..CHURN_NAMES),
            rng.random_range(0..100u32),
        )
    };
    let name = format!("churn-{i}");
    let Some(current) = sim.get("", "pods", ns, &name) else {
        sim.create(churn_pod(ns, i)).expect("churn create");
        return;
    };
    match roll {
        0..40 => {
            sim.modify("", "pods", ns, &name, |v| {
                v["metadata"]["annotations"] = json!({"churn": n.to_string()});
            })
            .expect("churn annotate");
        }
        40..75 => {
            let flipped = if current.pointer("/metadata/labels/phase") == Some(&json!("a")) {
                "b"
            } else {
                "a"
            };
            sim.modify("", "pods", ns, &name, |v| {
                v["metadata"]["labels"]["phase"] = json!(flipped)
            })
            .expect("churn relabel");
        }
        _ => sim.delete("", "pods", ns, &name).expect("churn delete"),
    }
}

/// Writes churn every `period` for `duration`; the task returns the number of writes.
pub fn spawn_churn(stack: Arc<Stack>, duration: Duration, period: Duration) -> JoinHandle<usize> {
    tokio::spawn(async move {
        let until = Instant::now() + duration;
        let mut tick = tokio::time::interval(period);
        // On a loaded machine fewer writes happen, never a burst of catch-up writes.
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut n = 0;
        while Instant::now() < until {
            tick.tick().await;
            n += 1;
            churn_step(&stack.sim, n);
        }
        n
    })
}

/// What the fake apiserver does to open watches.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Every watch stream ends; clients resume from their last resourceVersion.
    DropWatches,
    /// History is compacted, then every watch ends: a client (or kubeplex's reflector) that
    /// resumes from before now gets 410 Expired and must list again.
    CompactAndDrop,
}

/// Injects each fault at its offset from now.
pub fn spawn_faults(stack: Arc<Stack>, plan: Vec<(Duration, Fault)>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        for (at, fault) in plan {
            tokio::time::sleep_until(start + at).await;
            match fault {
                Fault::DropWatches => stack.sim.drop_watches(),
                Fault::CompactAndDrop => {
                    stack.sim.compact();
                    stack.sim.drop_watches();
                }
            }
        }
    })
}

/// `namespace/name` of an object (or a watch event's object).
pub fn key_of(v: &Value) -> String {
    let o = v.get("object").unwrap_or(v);
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

/// `namespace/name` → resourceVersion of a JSON list's items.
pub fn items_of(list: &Value) -> BTreeMap<String, String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|o| {
                    let rv = o.pointer("/metadata/resourceVersion").and_then(Value::as_str);
                    (key_of(o), rv.unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A list that must succeed.
pub async fn list_ok(addr: &str, path: &str) -> Resp {
    let r = get(addr, path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", String::from_utf8_lossy(&r.body));
    r
}

/// The apiserver's own current answer to `path` (a collection with its selectors), as
/// `namespace/name` → resourceVersion: what every client's view must converge to.
pub async fn apiserver_state(stack: &Stack, path: &str) -> BTreeMap<String, String> {
    items_of(&list_ok(&stack.upstream(), path).await.json())
}

/// Fails early, with the fix, when this process may not open `needed` files: every watcher is
/// a socket, and while watches pass through, each costs four (client, kubeplex's accepted one,
/// kubeplex's upstream one, the fake apiserver's accepted one). Raise it with `ulimit -n`.
pub fn assert_open_files_limit(needed: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|s| s.parse::<u64>().ok());
    if let Some(soft) = soft {
        assert!(
            soft >= needed,
            "open files limit {soft} < {needed}: run `ulimit -n {needed}` first"
        );
    }
}

/// Comma-joined non-empty query parameters.
pub fn query(parts: &[&str]) -> String {
    parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join("&")
}

/// Waits, polling every 100 ms up to `limit`, until `f` holds; returns whether it did.
pub async fn eventually<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + limit;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What informers came to once the writes stopped ([`settle`]).
pub struct Settled {
    /// Every informer came to hold exactly the apiserver's state within the limit.
    pub converged: bool,
    /// Broken watch rules (the first few per informer) and views that differ.
    pub problems: Vec<String>,
    /// One line per informer: objects, events, bookmarks, sessions, rewatches, relists.
    pub report: Vec<String>,
}

/// Waits (up to `limit`) until every informer holds the apiserver's current state for its
/// collection and selectors, and reports what each saw.
pub async fn settle(stack: &Stack, informers: &[Arc<Informer>], limit: Duration) -> Settled {
    let mut want = Vec::new();
    for i in informers {
        want.push(apiserver_state(stack, &format!("{}?{}", i.collection, i.selectors)).await);
    }
    let converged = eventually(limit, || async {
        informers
            .iter()
            .zip(&want)
            .all(|(i, w)| i.seen.lock().map(|s| &s.objects == w).unwrap_or(false))
    })
    .await;
    let (mut problems, mut report) = (Vec::new(), Vec::new());
    for (i, w) in informers.iter().zip(&want) {
        let s = i.seen.lock().unwrap_or_else(|p| p.into_inner());
        report.push(format!(
            "{}?{}: {} objects, {} events, {} bookmarks, {} sessions, {} rewatches, {} relists, \
             {} refused lists",
            i.collection,
            i.selectors,
            s.objects.len(),
            s.events,
            s.bookmarks,
            s.sessions,
            s.rewatches,
            s.relists,
            s.list_failures
        ));
        problems.extend(s.violations.iter().take(5).cloned());
        if &s.objects != w {
            problems.push(format!(
                "{}?{} differs: {}",
                i.collection,
                i.selectors,
                diff(&s.objects, w)
            ));
        }
    }
    Settled { converged, problems, report }
}

/// The differences between a client's view and the apiserver's, for failure messages.
pub fn diff(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("missing {k}@{v}")),
            Some(g) if g != v => out.push(format!("{k}: has {g}, apiserver {v}")),
            Some(_) => {}
        }
    }
    out.extend(
        got.iter().filter(|(k, _)| !want.contains_key(*k)).map(|(k, v)| format!("extra {k}@{v}")),
    );
    out.join("; ")
}

// ---- a client that lists and watches as client-go's reflector does, checking every event ----

/// What one [`Informer`] saw; shared with the test while it runs.
#[derive(Debug, Default)]
pub struct Seen {
    /// `namespace/name` → resourceVersion, kept from lists and events.
    pub objects: BTreeMap<String, String>,
    /// Broken watch rules, as messages (empty when the streams were right).
    pub violations: Vec<String>,
    /// Watch requests made.
    pub sessions: usize,
    /// Streams that ended and were resumed from the last resourceVersion seen.
    pub rewatches: usize,
    /// 410s (ERROR event or status) answered by listing again.
    pub relists: usize,
    /// Lists refused (retried after 100 ms).
    pub list_failures: usize,
    pub events: usize,
    pub bookmarks: usize,
}

/// A watcher of one collection with selectors, behaving as a real client does: list at
/// `resourceVersion=0`, watch from the list's RV with bookmarks, resume from the newest RV
/// seen (event or bookmark) when a stream ends, list again (RV unset, as client-go does after
/// a 410) on 410 Gone. It checks the stream as it goes: within a stream no event twice and no
/// resourceVersion going backwards; every event after the RV the stream started from; ADDED
/// only for an object it does not hold, MODIFIED and DELETED only for one it does.
pub struct Informer {
    pub addr: String,
    /// Collection path, e.g. `/api/v1/namespaces/team-0/pods`.
    pub collection: String,
    /// Selector query parameters, e.g. `labelSelector=phase%3Da` (may be empty).
    pub selectors: String,
    pub seen: Arc<std::sync::Mutex<Seen>>,
}

/// Longest an informer runs, whatever happens (every loop of a test is bounded).
const INFORMER_LIMIT: Duration = Duration::from_secs(120);

impl Informer {
    pub fn new(addr: &str, collection: &str, selectors: &str) -> Informer {
        Informer {
            addr: addr.to_string(),
            collection: collection.to_string(),
            selectors: selectors.to_string(),
            seen: Arc::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn violation(&self, msg: String) {
        self.seen().violations.push(format!("{}?{}: {msg}", self.collection, self.selectors));
    }

    /// Runs until `stop` turns true.
    pub async fn run(&self, stop: tokio::sync::watch::Receiver<bool>) {
        let until = Instant::now() + INFORMER_LIMIT;
        let mut rv: Option<u64> = None;
        let mut listed_before = false;
        while !*stop.borrow() && Instant::now() < until {
            let from = match rv {
                Some(rv) => rv,
                None => match self.list(listed_before).await {
                    Some(list_rv) => {
                        listed_before = true;
                        list_rv
                    }
                    None => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            rv = self.watch_from(from, &stop).await;
        }
    }

    /// Lists into the object map; returns the list's resourceVersion.
    async fn list(&self, relist: bool) -> Option<u64> {
        let rv = if relist { "" } else { "resourceVersion=0" };
        let path = format!("{}?{}", self.collection, query(&[&self.selectors, rv]));
        let r = get(&self.addr, &path).await;
        if r.status != 200 {
            // A relist racing kubeplex's own relist may be refused briefly; retried.
            self.seen().list_failures += 1;
            return None;
        }
        let list = r.json();
        let list_rv = list.pointer("/metadata/resourceVersion").and_then(Value::as_str)?;
        let list_rv = list_rv.parse().ok()?;
        let mut seen = self.seen();
        seen.objects = items_of(&list);
        if relist {
            seen.relists += 1;
        }
        Some(list_rv)
    }

    /// One watch session from `from`; returns where to resume (`None`: list again).
    async fn watch_from(
        &self,
        from: u64,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Option<u64> {
        let params = format!("watch=1&allowWatchBookmarks=true&resourceVersion={from}");
        let path = format!("{}?{}", self.collection, query(&[&params, &self.selectors]));
        let mut w = crate::watch(&self.addr, &path, JSON).await;
        self.seen().sessions += 1;
        match w.status {
            200 => {}
            410 => return None,
            s => {
                if !matches!(s, 429 | 500..=599) {
                    self.violation(format!("watch from {from} answered {s}"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Some(from);
            }
        }
        let mut last = from;
        let mut in_session = std::collections::HashSet::new();
        while !*stop.borrow() {
            let Some(line) = w.next_line_within(Duration::from_millis(250)).await else {
                if w.ends_within(Duration::ZERO).await {
                    self.seen().rewatches += 1;
                    return Some(last);
                }
                continue;
            };
            let e: Value = match serde_json::from_slice(&line) {
                Ok(e) => e,
                Err(err) => {
                    self.violation(format!("watch line is not JSON ({err})"));
                    return Some(last);
                }
            };
            let (kind, name, rv_s) = crate::ev(&e);
            let Ok(rv) = rv_s.parse::<u64>() else {
                if kind == "ERROR" {
                    if e.pointer("/object/code") == Some(&json!(410)) {
                        return None;
                    }
                    self.violation(format!("ERROR event {e}"));
                    return Some(last);
                }
                self.violation(format!("{kind} {name} without a resourceVersion"));
                return Some(last);
            };
            if kind == "BOOKMARK" {
                if rv < last {
                    self.violation(format!("bookmark {rv} after {last} (from {from})"));
                }
                last = last.max(rv);
                self.seen().bookmarks += 1;
                continue;
            }
            let key = key_of(&e);
            if !in_session.insert((kind.clone(), key.clone(), rv)) {
                self.violation(format!("{kind} {key}@{rv} twice in one stream"));
            }
            if rv <= last {
                self.violation(format!("{kind} {key}@{rv} after {last} (from {from})"));
            }
            last = last.max(rv);
            self.apply(&kind, key, rv_s);
        }
        Some(last)
    }

    fn apply(&self, kind: &str, key: String, rv: String) {
        let mut seen = self.seen();
        seen.events += 1;
        let held = seen.objects.get(&key).cloned();
        let broken = match (kind, held) {
            ("ADDED", None) => None,
            ("ADDED", Some(old)) => Some(format!("ADDED {key}@{rv} already held at {old}")),
            ("MODIFIED" | "DELETED", None) => Some(format!("{kind} {key}@{rv} never added")),
            ("MODIFIED" | "DELETED", Some(_)) => None,
            _ => Some(format!("unexpected event type {kind} for {key}")),
        };
        if kind == "DELETED" {
            seen.objects.remove(&key);
        } else {
            seen.objects.insert(key.clone(), rv);
        }
        drop(seen);
        if let Some(msg) = broken {
            self.violation(msg);
        }
    }
}
