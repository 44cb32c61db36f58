//! The fake apiserver's storage: what etcd plus the watch cache give kube-apiserver.
//!
//! - One global resourceVersion counter, bumped by every write of any resource (etcd revision).
//! - Per resource, point-in-time snapshots (persistent `imbl::OrdMap`s, so a snapshot costs
//!   O(1)) kept for recent revisions, so exact-RV lists and every page of a paginated list are
//!   served at one revision; compaction forgets old ones (410 on a token or RV older than that).
//! - Per resource, a bounded history of events for watch resume, and a bounded broadcast
//!   channel that live watchers read; registering a watcher happens under the store lock, so no
//!   event can fall between the replayed history and the live stream.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use imbl::OrdMap;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::kinds::Kind;

/// Capacity of each resource's live broadcast channel. A watcher that falls this far behind is
/// ended (the apiserver also terminates watchers it cannot feed), and its client resumes.
const LIVE_CHANNEL_CAPACITY: usize = 8192;

/// One stored object: the canonical JSON (with kind and apiVersion first) and, for kinds with a
/// protobuf encoding, the bare protobuf message, both produced once at write time.
#[derive(Debug)]
pub struct Obj {
    /// The etcd-style key below the resource prefix: `ns/name`, or `name` when cluster-scoped.
    /// Lists are ordered by this string (so `a-b/x` sorts before `a/x`, as in etcd).
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub rv: u64,
    pub value: Value,
    pub json: Bytes,
    pub proto: Option<Bytes>,
}

impl Obj {
    pub fn labels(&self) -> Option<&serde_json::Map<String, Value>> {
        self.value.get("metadata")?.get("labels")?.as_object()
    }
}

/// Builds the store key for an object.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A change to one object. For DELETED, `obj` is the last state with the deletion's RV.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub obj: Arc<Obj>,
    /// The state before the change (for selector transitions on filtered watches).
    pub prev: Option<Arc<Obj>>,
}

/// What live watchers receive, in commit order.
#[derive(Debug, Clone)]
pub enum Live {
    Event(Arc<Event>),
    /// The store has reached this RV with nothing further for this resource; carried on the
    /// same channel as events so a bookmark can never overtake an event.
    Progress(u64),
}

pub type Items = OrdMap<String, Arc<Obj>>;

struct ResourceState {
    items: Items,
    /// Items as of each recent revision that changed this resource.
    snapshots: BTreeMap<u64, Items>,
    /// Lowest RV whose state is still known (compaction or trimming moved it up).
    known_from: u64,
    history: VecDeque<Arc<Event>>,
    /// Watches from an RV below this cannot be served (events after it were trimmed).
    history_from: u64,
    live: broadcast::Sender<Live>,
    /// The RV this resource's watch cache has reached: its last event, or etcd's progress.
    cache_rv: u64,
}

impl ResourceState {
    fn new() -> Self {
        ResourceState {
            items: OrdMap::new(),
            snapshots: BTreeMap::new(),
            known_from: 0,
            history: VecDeque::new(),
            history_from: 0,
            live: broadcast::channel(LIVE_CHANNEL_CAPACITY).0,
            cache_rv: 0,
        }
    }
}

/// Limits on what the store remembers.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Events kept per resource for watch resume.
    pub history_events: usize,
    /// Snapshots kept per resource for exact-RV lists and continue tokens.
    pub snapshots: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { history_events: 10_000, snapshots: 10_000 }
    }
}

struct Inner {
    rv: u64,
    resources: HashMap<String, ResourceState>,
    retention: Retention,
    /// When each recent write happened, oldest first (see [`Store::rv_as_of`]).
    timeline: VecDeque<(std::time::Instant, u64)>,
}

/// How long the write timeline reaches back: more than any informer lag modelled with it.
const TIMELINE: Duration = Duration::from_secs(10);

/// Why a point-in-time read could not be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotError {
    /// Older than compaction: 410.
    TooOld,
    /// Newer than the current revision.
    TooNew { current: u64 },
}

/// Where a watch starts.
pub enum WatchStart {
    /// Replay of events strictly after the requested RV.
    Resume(Vec<Arc<Event>>),
    /// The full state at `rv` (synthetic ADDED / initial events).
    State { rv: u64, items: Items },
}

pub struct Store {
    inner: Mutex<Inner>,
    /// Publishes the current RV; readers waiting for "not older than N" subscribe.
    rv_tx: watch::Sender<u64>,
}

impl Store {
    pub fn new(retention: Retention) -> Self {
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                resources: HashMap::new(),
                retention,
                timeline: VecDeque::new(),
            }),
            rv_tx: watch::channel(1).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would already be a bug; keep serving with the state.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Waits until the store has reached `rv`, up to `timeout`. Returns the RV reached.
    pub async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> Result<u64, u64> {
        let mut rx = self.rv_tx.subscribe();
        let wait = async move { rx.wait_for(|cur| *cur >= rv).await.map(|cur| *cur) };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(cur)) => Ok(cur),
            _ => Err(self.current_rv()),
        }
    }

    pub fn get(&self, kind: &Kind, namespace: &str, name: &str) -> Option<Arc<Obj>> {
        let inner = self.lock();
        inner.resources.get(&kind.key)?.items.get(&object_key(namespace, name)).cloned()
    }

    /// The state of a resource at `at` (or now), with the RV it is at.
    pub fn snapshot(&self, kind: &Kind, at: Option<u64>) -> Result<(u64, Items), SnapshotError> {
        let inner = self.lock();
        let current = inner.rv;
        let Some(state) = inner.resources.get(&kind.key) else {
            return match at {
                Some(rv) if rv > current => Err(SnapshotError::TooNew { current }),
                Some(rv) => Ok((rv, OrdMap::new())),
                None => Ok((current, OrdMap::new())),
            };
        };
        match at {
            None => Ok((current, state.items.clone())),
            Some(rv) if rv > current => Err(SnapshotError::TooNew { current }),
            Some(rv) if rv < state.known_from => Err(SnapshotError::TooOld),
            Some(rv) => {
                let items = state
                    .snapshots
                    .range(..=rv)
                    .next_back()
                    .map(|(_, items)| items.clone())
                    .unwrap_or_default();
                Ok((rv, items))
            }
        }
    }

    /// Applies one write under the store lock. `change` sees the current object (if any) and the
    /// RV the write will get, and returns the new object (or `None` to delete), or an error.
    pub fn write<E>(
        &self,
        kind: &Kind,
        key: &str,
        change: impl FnOnce(Option<&Arc<Obj>>, u64) -> Result<Option<Obj>, E>,
    ) -> Result<Option<Arc<Event>>, E> {
        let mut inner = self.lock();
        let next_rv = inner.rv + 1;
        let retention = inner.retention;
        let state = inner.resources.entry(kind.key.clone()).or_insert_with(ResourceState::new);
        let prev = state.items.get(key).cloned();
        let new = change(prev.as_ref(), next_rv)?;
        let event = match (new, prev) {
            (Some(obj), prev) => {
                let obj = Arc::new(obj);
                state.items.insert(key.to_string(), obj.clone());
                let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
                Event { rv: next_rv, kind, obj, prev }
            }
            (None, Some(prev)) => {
                state.items.remove(key);
                Event { rv: next_rv, kind: EventType::Deleted, obj: prev.clone(), prev: Some(prev) }
            }
            // Deleting what is not there changes nothing.
            (None, None) => return Ok(None),
        };
        let event = Arc::new(event);
        state.snapshots.insert(next_rv, state.items.clone());
        while state.snapshots.len() > retention.snapshots {
            if let Some((&oldest, _)) = state.snapshots.iter().next() {
                state.snapshots.remove(&oldest);
                state.known_from = state.snapshots.keys().next().copied().unwrap_or(next_rv);
            }
        }
        state.history.push_back(event.clone());
        while state.history.len() > retention.history_events {
            if let Some(old) = state.history.pop_front() {
                state.history_from = old.rv;
            }
        }
        // No receivers is fine: nobody is watching this resource.
        state.cache_rv = state.cache_rv.max(event.rv);
        let _ = state.live.send(Live::Event(event.clone()));
        inner.rv = next_rv;
        let now = std::time::Instant::now();
        inner.timeline.push_back((now, next_rv));
        while inner.timeline.front().is_some_and(|(at, _)| now.duration_since(*at) > TIMELINE) {
            inner.timeline.pop_front();
        }
        self.rv_tx.send_replace(next_rv);
        Ok(Some(event))
    }

    /// The RV the store was at, at `at` (within the last [`TIMELINE`]): what an informer that
    /// lags the store by `now - at` has seen. Writes before [`Store::settle`] count as long
    /// past.
    pub fn rv_as_of(&self, at: std::time::Instant) -> u64 {
        let inner = self.lock();
        let mut rv = match inner.timeline.front() {
            Some((_, first)) => first - 1,
            None => inner.rv,
        };
        for (when, written) in &inner.timeline {
            if *when > at {
                break;
            }
            rv = *written;
        }
        rv
    }

    /// Makes every write so far long past (a seeded cluster existed before the server
    /// started).
    pub fn settle(&self) {
        self.lock().timeline.clear();
    }

    /// Registers a watcher. `from`: `Some(rv)` resumes after rv (410 when too old, reported as
    /// `Err(oldest)`); `None` starts from the full current state.
    pub fn watch(
        &self,
        kind: &Kind,
        from: Option<u64>,
    ) -> Result<(WatchStart, broadcast::Receiver<Live>), u64> {
        let mut inner = self.lock();
        let current = inner.rv;
        let state = inner.resources.entry(kind.key.clone()).or_insert_with(ResourceState::new);
        let rx = state.live.subscribe();
        match from {
            None => Ok((WatchStart::State { rv: current, items: state.items.clone() }, rx)),
            Some(rv) => {
                let oldest = state.history_from.max(state.known_from);
                if rv < oldest {
                    return Err(oldest);
                }
                let events = state.history.iter().filter(|e| e.rv > rv).cloned().collect();
                Ok((WatchStart::Resume(events), rx))
            }
        }
    }

    /// Forgets all history and snapshots before the current revision, like an etcd compaction
    /// followed by the watch cache dropping its window: older watch RVs and continue tokens
    /// then get 410.
    pub fn compact(&self) -> u64 {
        let mut inner = self.lock();
        let rv = inner.rv;
        for state in inner.resources.values_mut() {
            state.history.clear();
            state.history_from = rv;
            state.known_from = rv;
            state.snapshots.clear();
            state.snapshots.insert(rv, state.items.clone());
        }
        rv
    }

    /// Tells one resource's watch cache that etcd is at the current RV: what the apiserver's
    /// cacher learns when it asks etcd for progress to serve a consistent read of that resource
    /// (a list or a WatchList with resourceVersion unset). Its next bookmarks carry this RV.
    pub fn publish_progress_of(&self, kind: &Kind) {
        let mut inner = self.lock();
        let rv = inner.rv;
        let state = inner.resources.entry(kind.key.clone()).or_insert_with(ResourceState::new);
        state.cache_rv = state.cache_rv.max(rv);
        let _ = state.live.send(Live::Progress(rv));
    }

    /// Tells every live watcher that the store has reached the current RV (etcd's periodic
    /// progress notification).
    pub fn publish_progress(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        for state in inner.resources.values_mut() {
            state.cache_rv = state.cache_rv.max(rv);
            let _ = state.live.send(Live::Progress(rv));
        }
    }

    /// The RV a resource's watch cache has reached (its bookmarks carry it).
    pub fn cache_rv(&self, kind: &Kind) -> u64 {
        self.lock().resources.get(&kind.key).map_or(0, |s| s.cache_rv)
    }

    /// Ends every live watch (fault injection): their receivers see the channel closed.
    pub fn drop_watchers(&self) {
        let mut inner = self.lock();
        for state in inner.resources.values_mut() {
            state.live = broadcast::channel(LIVE_CHANNEL_CAPACITY).0;
        }
    }

    /// Ends the open watches of one kind only.
    pub fn drop_watchers_of(&self, kind: &Kind) {
        if let Some(state) = self.lock().resources.get_mut(&kind.key) {
            state.live = broadcast::channel(LIVE_CHANNEL_CAPACITY).0;
        }
    }

    /// Number of objects of a kind (for tests and metrics).
    pub fn count(&self, kind: &Kind) -> usize {
        self.lock().resources.get(&kind.key).map_or(0, |s| s.items.len())
    }
}
