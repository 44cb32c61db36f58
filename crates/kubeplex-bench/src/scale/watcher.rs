//! One emulated client's watch, as client-go ≥ 1.35 keeps it: a WatchList (a consistent read
//! of the scope as ADDED events, ended by the initial-events-end bookmark), then the stream,
//! resumed from the last resourceVersion when the server ends it, started over after 410
//! Expired or a cut before the initial events ended. Protobuf, as the kubelet and kube-proxy
//! read.
//!
//! It keeps what a user would check: the scope's objects and their resourceVersions (compared
//! with the apiserver's at the end), events out of resourceVersion order or repeated, and the
//! time from the writer's stamp on an object to the event that brings it.
//!
//! A node tier's watch (through the pool) follows kubeplex's reflector instead where they
//! differ: it goes where its node's [`Link`] points, resumes there from its newest RV when the
//! link moves, and after 410 loads the state *not older than* that RV rather than a consistent
//! one (`live::reflector`: a pool that just restarted has no history from it, and answers such
//! a load from its cache without a freshness proof).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::cluster::STAMP;
use super::link::Link;
use crate::hist::Histogram;
use crate::informer::{Backoff, Informer, Start, Stream, ACCEPT_PROTOBUF};

/// Requests one watcher sends in a run, at most.
const MAX_REQUESTS: u64 = 1_000;

/// What the watch's objects are checked against at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Pods with `spec.nodeName=NODE`.
    NodePods(String),
    /// The Node `NODE` (`metadata.name=NODE`).
    Node(String),
    /// Everything the path (collection and selectors) lists.
    Whole(String),
}

/// One watch of one client.
pub struct WatchSpec {
    /// Counted under this name (the agent and what it reads).
    pub class: &'static str,
    pub collection: &'static str,
    pub selectors: Vec<(&'static str, String)>,
    pub scope: Scope,
    /// `Impersonate-*` headers: a node tier passing its agent's watch on.
    pub impersonate: Vec<(&'static str, String)>,
    pub user_agent: &'static str,
    /// A node tier's watch (through the pool): after 410, a load not older than its RV.
    pub node_tier: bool,
    /// Protobuf (the kubelet, kube-proxy, a node tier's caches for them), else JSON.
    pub protobuf: bool,
}

impl WatchSpec {
    fn informer(&self) -> Informer {
        Informer {
            collection: self.collection.to_string(),
            selectors: self.selectors.clone(),
            protobuf: self.protobuf,
            start: Start::WatchList,
            user_agent: self.user_agent,
        }
    }
}

/// Counts shared by every watcher of one class.
#[derive(Default)]
pub struct ClassStats {
    pub watchers: AtomicU64,
    pub synced: AtomicU64,
    pub requests: AtomicU64,
    /// Events read after the initial state (ADDED, MODIFIED, DELETED).
    pub events: AtomicU64,
    pub initial_events: AtomicU64,
    pub errors: AtomicU64,
    /// Answered 403.
    pub refused: AtomicU64,
    /// Failed requests by status code, or `transport` (no answer), or `stream` (cut short).
    pub failures: Mutex<BTreeMap<String, u64>>,
    /// Started over (410 Expired, or cut before its initial events ended).
    pub restarts: AtomicU64,
    /// Events whose resourceVersion was not above the last one the stream showed.
    pub out_of_order: AtomicU64,
    /// The run's start → the first initial-events-end bookmark.
    pub sync_time: Mutex<Histogram>,
    /// The writer's stamp → the event that brought it.
    pub delivery: Mutex<Histogram>,
    /// The same since a soak's sampler last took them (`scale::soak`).
    pub recent: Mutex<Histogram>,
}

impl ClassStats {
    fn failed(&self, why: &str) {
        *self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(why.to_string())
            .or_default() += 1;
    }
}

/// A watcher's objects: `namespace/name` → resourceVersion.
#[derive(Default)]
pub struct View {
    pub synced: bool,
    pub items: BTreeMap<String, u64>,
    /// The newest resourceVersion the watch saw (events and bookmarks).
    pub rv: u64,
    /// The writer's stamp last seen on each object: a later event carrying the same stamp
    /// (another change of the object) is no delivery — nor after the watch resumed.
    pub stamps: HashMap<String, u64>,
}

/// What a kubelet's watch of its pods tells its status manager, by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSeen {
    /// In the watch's first initial state: bound before the kubelet started.
    Existing(String),
    /// Added after it.
    Added(String),
    Deleted(String),
}

/// Runs the watch until the caller drops it, from `resume` if given (a watcher whose `view`
/// already holds the state at that RV: an agent reconnecting), else with a WatchList. What it
/// sees of the objects goes to `pods` (a kubelet learning of its pods), if given: those of its
/// first initial state, then each added and each deleted.
pub async fn run(
    link: Arc<Link>,
    spec: WatchSpec,
    stats: Arc<ClassStats>,
    view: Arc<Mutex<View>>,
    since: Instant,
    pods: Option<mpsc::Sender<PodSeen>>,
    resume: Option<u64>,
) {
    stats.watchers.fetch_add(1, Ordering::Relaxed);
    let mut moves = link.moves();
    let informer = spec.informer();
    let accept = if spec.protobuf { ACCEPT_PROTOBUF } else { "application/json" };
    let headers: Vec<(&str, &str)> = [("Accept", accept), ("User-Agent", spec.user_agent)]
        .into_iter()
        .chain(spec.impersonate.iter().map(|(k, v)| (*k, v.as_str())))
        .collect();
    // client-go draws each watch's timeout from [5, 10) minutes.
    let timeout = rand::random_range(300..600u64).to_string();
    let mut first_sync = true;
    if resume.is_some() {
        first_sync = false;
        stats.synced.fetch_add(1, Ordering::Relaxed);
    }
    let mut from: Option<u64> = resume;
    // After 410, a node tier's load not older than its last RV.
    let mut not_older_than: Option<u64> = None;
    // client-go's reflector backoff (an emulated agent retrying faster than the real one — a
    // flat 800 ms, before — makes an apiserver that throttles watches look worse directly).
    let mut backoff = Backoff::new();
    // Transport failures in a row (no answer from either upstream).
    let mut unreachable = 0u32;
    for _ in 0..MAX_REQUESTS {
        let from_s = from.map(|rv| rv.to_string());
        let floor = not_older_than.take().filter(|rv| *rv > 0).map(|rv| rv.to_string());
        let path = match (&from_s, &floor) {
            (None, Some(rv)) => informer.path(&[
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", rv),
                ("resourceVersionMatch", "NotOlderThan"),
                ("sendInitialEvents", "true"),
                ("timeoutSeconds", &timeout),
                ("watch", "true"),
            ]),
            (None, None) => informer.path(&[
                ("allowWatchBookmarks", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("sendInitialEvents", "true"),
                ("timeoutSeconds", &timeout),
                ("watch", "true"),
            ]),
            (Some(rv), _) => informer.path(&[
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", rv),
                ("timeoutSeconds", &timeout),
                ("watch", "true"),
            ]),
        };
        stats.requests.fetch_add(1, Ordering::Relaxed);
        moves.borrow_and_update();
        let (upstream, target) = link.current();
        let resp = match target.send(Method::GET, &path, &headers, None).await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.failed(r.status().as_str());
                if r.status() == StatusCode::FORBIDDEN {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                }
                if r.status() == StatusCode::GONE {
                    if spec.node_tier {
                        not_older_than = from.or(Some(last_seen(&view)));
                    }
                    from = None;
                }
                tokio::time::sleep(backoff.wait()).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(error = %e, path, "watch failed");
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.failed("transport");
                // The first failure in a row moves to the other replica at once, as a node
                // tier fails over; every further one backs off (without it, a node that could
                // reach neither replica went back and forth as fast as connections failed:
                // 7.2 million failed watches at N = 1,000 with Cilium).
                unreachable += 1;
                if !(link.failed(upstream) && unreachable == 1) {
                    tokio::time::sleep(backoff.wait()).await;
                }
                continue;
            }
        };
        unreachable = 0;
        let mut stream = Stream::new(resp.into_body(), spec.protobuf);
        // A WatchList's initial state, until its bookmark.
        let mut initial: Option<BTreeMap<String, u64>> = from.is_none().then(BTreeMap::new);
        let mut last = from.unwrap_or(0);
        let mut expired = false;
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                // The node tier moved to another upstream: the watch resumes there.
                _ = moves.changed() => break,
            };
            let event = match next {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, path, "watch stream broke");
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    stats.failed("stream");
                    break;
                }
            };
            let rv = event.rv.as_deref().and_then(|r| r.parse::<u64>().ok());
            match event.kind.as_str() {
                "ERROR" => {
                    expired = true;
                    break;
                }
                "BOOKMARK" => {
                    if let Some(rv) = rv {
                        last = last.max(rv);
                    }
                    if initial.is_none() {
                        lock_view(&view).rv = last;
                    }
                    if event.initial_end {
                        if let Some(items) = initial.take() {
                            let first = std::mem::take(&mut first_sync);
                            if let (true, Some(tx)) = (first, &pods) {
                                for key in items.keys() {
                                    let _ = tx.try_send(PodSeen::Existing(key.clone()));
                                }
                            }
                            let mut v = lock_view(&view);
                            v.items = items;
                            v.synced = true;
                            v.rv = last;
                            if first {
                                stats.synced.fetch_add(1, Ordering::Relaxed);
                                lock(&stats.sync_time).record(since.elapsed());
                            }
                        }
                    }
                    continue;
                }
                _ => {}
            }
            let rv = rv.unwrap_or(0);
            if let Some(items) = initial.as_mut() {
                stats.initial_events.fetch_add(1, Ordering::Relaxed);
                // A stamp already in the state is no delivery (a later change without a new
                // stamp carries it along).
                if let Some(stamp) = stamp_of(&event.object) {
                    lock_view(&view).stamps.insert(event.key.clone(), stamp);
                }
                items.insert(event.key, rv);
                last = last.max(rv);
                continue;
            }
            stats.events.fetch_add(1, Ordering::Relaxed);
            if rv <= last {
                stats.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
            last = last.max(rv);
            let mut v = lock_view(&view);
            if let Some(stamp) = stamp_of(&event.object) {
                if v.stamps.insert(event.key.clone(), stamp) != Some(stamp) {
                    let took = since_stamp(stamp);
                    lock(&stats.delivery).record(took);
                    lock(&stats.recent).record(took);
                }
            }
            v.rv = last;
            if event.kind == "DELETED" {
                let was = v.items.remove(&event.key).is_some();
                drop(v);
                if let (true, Some(tx)) = (was, &pods) {
                    let _ = tx.try_send(PodSeen::Deleted(event.key));
                }
            } else {
                let new = v.items.insert(event.key.clone(), rv).is_none();
                drop(v);
                if let (true, Some(tx)) = (new, &pods) {
                    let _ = tx.try_send(PodSeen::Added(event.key));
                }
            }
        }
        if expired || initial.is_some() {
            // 410 Expired, or cut before its initial state ended: start over.
            stats.restarts.fetch_add(1, Ordering::Relaxed);
            if spec.node_tier && expired {
                not_older_than = Some(last);
            }
            from = None;
            tokio::time::sleep(backoff.wait()).await;
        } else {
            from = Some(last);
        }
    }
}

fn lock_view(v: &Mutex<View>) -> std::sync::MutexGuard<'_, View> {
    v.lock().unwrap_or_else(|p| p.into_inner())
}

fn last_seen(v: &Mutex<View>) -> u64 {
    lock_view(v).rv
}

fn lock(h: &Mutex<Histogram>) -> std::sync::MutexGuard<'_, Histogram> {
    h.lock().unwrap_or_else(|p| p.into_inner())
}

/// Now in Unix microseconds.
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn since_stamp(stamp: u64) -> Duration {
    Duration::from_micros(now_micros().saturating_sub(stamp))
}

/// The writer's stamp in an object's bytes, JSON or protobuf: the annotation's key, then (past
/// the JSON quotes and colon, or protobuf's tag and length) its digits.
pub fn stamp_of(object: &[u8]) -> Option<u64> {
    let key = STAMP.as_bytes();
    let at = object.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &object[at..];
    let start = rest.iter().take(4).position(u8::is_ascii_digit)?;
    let digits: &[u8] = &rest[start..];
    let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len()).min(20);
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}
