//! One cache's state per (resource, wire encoding), behind its locks: the store, the RV it has
//! reached (readers wait on it), load epochs, the fan-out to watchers, and its metric series.
//! The live layer (`live::caches`, `live::feed`) feeds it; it does no I/O and starts no
//! tasks.
//!
//! - this file: the state, its reads (snapshots, waits for an RV or the first sync), idleness;
//! - [`feed`]: applying what the upstream said — loads, events, bookmarks, freshness marks,
//!   lost objects — and the load epochs that keep proofs honest;
//! - [`watchers`]: registering watches atomically with their starting point, and dispatch;
//! - [`gauges`]: the cache's metric series, resolved once; [`status`]: what `/debug/caches`
//!   shows of it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use self::gauges::Gauges;
pub use self::status::CacheStatus;
use super::clock::unix_now;
use super::fanout::{FanOut, Queue, WatchConfig};
use super::frames::Encoder;
use super::history::Seen;
use super::index;
use super::metrics::CacheMetrics as Metrics;
use super::object::CachedObject;
pub use super::object::Encoding;
use super::scope::Scope;
use super::store::{Snapshot, SnapshotError, Store, StoreLimits};
use crate::wire::resource::ResourceInfo;

mod feed;
#[cfg(test)]
mod follow_tests;
mod gauges;
mod status;
#[cfg(test)]
mod tests;
mod watchers;

/// A watch event's kind, as the reflector hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// How current a cache's view is ([`ResourceCache::view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Its watch of the apiserver has run without a gap since then.
    Live(std::time::Instant),
    /// Its watch runs on a tier above kubeplex: only that tier can tell how current it is.
    ViaTier,
    /// Its watch failed, a load is under way, or the upstream has been silent too long.
    Gap,
}

/// A load of the cache's state, as requested.
#[derive(Debug, Clone, Copy)]
struct Load {
    requested: std::time::Instant,
    /// Asked for the upstream's current state (resourceVersion unset), not any state.
    consistent: bool,
}

impl Load {
    /// Whether its state is consistent for a read that arrived at `arrived`.
    fn consistent_for(self, arrived: std::time::Instant) -> bool {
        self.consistent && self.requested >= arrived
    }
}

/// A cache's load state, as a cache fed by it takes it over ([`ResourceCache::load_marks`]).
#[derive(Debug, Clone, Copy)]
pub struct LoadMarks {
    loaded_from: Option<Load>,
    loading: Option<Load>,
    /// Since when it has watched without a gap, and through what ([`ResourceCache::view`]).
    watching_since: Option<std::time::Instant>,
    via_tier: bool,
}

pub struct ResourceCache {
    info: Arc<ResourceInfo>,
    /// Where it lists and watches: the cluster-wide collection, or one namespace's
    /// ([`ResourceCache::scoped`]).
    collection: String,
    /// What part of the resource it holds: its list and watch are scoped to it, and it answers
    /// only reads within it.
    scope: Scope,
    encoding: Encoding,
    store: RwLock<Store>,
    /// The RV the store has reached; not-older-than readers wait on it.
    rv_tx: watch::Sender<u64>,
    synced: AtomicBool,
    /// `synced`, for readers waiting on a cold cache's first sync.
    synced_tx: watch::Sender<bool>,
    /// Loads that failed while the cache had never synced: readers waiting for a cold cache
    /// are woken by a failure (the upstream unreachable or refusing) and pass through at once.
    cold_failures: watch::Sender<u64>,
    /// Bumped whenever the store's state may stop following from the one before it (a load
    /// begins or ends, an object is skipped): a freshness proof begun in one epoch is not applied
    /// in another (see [`ResourceCache::mark_progress`]).
    epoch: AtomicU64,
    /// The load (list or streaming list) under way, if any, and when its request was sent.
    loading: Mutex<Option<Load>>,
    /// The load the state comes from: when it was requested, that state is consistent for
    /// every read that arrived before then (the upstream answers a list with resourceVersion
    /// unset at its current RV) — unless it asked for any state (`resourceVersion=0`).
    loaded_from: Mutex<Option<Load>>,
    /// Bumped whenever a load ends, applied or failed: readers waiting for a load wake.
    loads: watch::Sender<u64>,

    metrics: Metrics,
    label: String,
    last_used: Mutex<Instant>,
    /// When the upstream was last heard from (set with every store change and bookmark).
    heard: Mutex<Instant>,
    /// Since when the upstream's watch has run without a gap — no failed watch, no load —
    /// while it does; `None` during a gap ([`ResourceCache::live_since`]).
    watching_since: Mutex<Option<std::time::Instant>>,
    /// The watch runs on a tier above kubeplex (a pool), not on the apiserver itself.
    via_tier: AtomicBool,
    /// Set while the state is one read back from disk (`restore`): when it was written, Unix
    /// seconds. Cleared by the first load from the upstream.
    from_disk: Mutex<Option<u64>>,
    /// Named in the configuration: never stopped for idleness.
    pinned: AtomicBool,
    /// Cleared when an upstream object had to be skipped (see `mark_incomplete`).
    complete: AtomicBool,
    /// This cache's gauge series, resolved once: `publish` runs on every upstream event, under
    /// the store's write lock.
    gauges: Gauges,
    /// Downstream watchers and the event history. Lock order: store, then fan-out.
    fanout: Mutex<FanOut>,
    /// The RV up to which every event has been queued to the watchers that see it: a watcher
    /// with nothing queued may be told it is at this RV (BOOKMARK).
    dispatched: AtomicU64,
    watch_config: WatchConfig,
    /// Encodes this resource's watch frames (shared with the fan-out and every watch body).
    encoder: Arc<Encoder>,
}

/// Longer than the upstream stays silent while it is reachable: its watches carry a BOOKMARK at
/// least every minute (kube-apiserver 1.36), and the reflector re-watches every 5 minutes. A
/// cache silent for longer is stale: its watch is down, and it serves its last state.
pub const STALE_AFTER: Duration = Duration::from_secs(150);

/// How recently the upstream must have been heard from on a cache for a grant to be derived
/// from its view (`auth::node_rules`, `auth::service_account`): two of kube-apiserver 1.36's bookmark periods and a tick. The apiserver
/// sends each watch a BOOKMARK once a minute while the resource's RV moves (on a 1 s tick;
/// docs/design.md §5), so a watch that missed two has stopped carrying what the apiserver sends —
/// or watches a resource so quiet that its RV has not moved (no pod changed anywhere): its
/// reads are then reviewed until the next event. (A connection that died is found sooner: the
/// upstream's HTTP/2 pings end its watch, a gap.)
pub const HEARD_WITHIN: Duration = Duration::from_secs(121);

/// Where a new watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// The cache's current state as ADDED events, then its changes.
    State,
    /// Changes from now on.
    Now,
    /// Changes strictly after this RV, replayed from the history first.
    After(u64),
    /// The state as it was at this RV as ADDED events, then the changes after it (the history
    /// replayed); the current state when that state or its history is no longer kept.
    StateAt(u64),
    /// The cache's state, which a proof showed to be the upstream's at `rv` while the cache was
    /// at `cache_at` (behind it): if the cache is still there, that state, then the changes
    /// after `rv` — the events up to `rv`, which change nothing the state shows, are not sent,
    /// as the apiserver's watch started at `rv` would not send them; else the current state.
    StateAhead { rv: u64, cache_at: u64 },
}

/// A watch registered with a cache: its queue, and the state to send first (for
/// [`WatchFrom::State`]).
pub struct Registration {
    pub id: u64,
    pub queue: Arc<Queue>,
    pub initial: Option<Snapshot>,
    /// The RV the watch starts at (the state's, or the one resumed from).
    pub position: u64,
}

impl ResourceCache {
    pub fn new(
        info: Arc<ResourceInfo>,
        encoding: Encoding,
        limits: StoreLimits,
        watch_config: WatchConfig,
        metrics: Metrics,
    ) -> Self {
        let label = format!("{}/{}", info.label(), info.version);
        let indexed = index::indexed_fields(encoding, &info.group, &info.resource);
        let store = Store::new(limits).with_indexes(&indexed);
        let gauges = Gauges::new(&metrics, &label, encoding);
        let encoder =
            Arc::new(Encoder::new(encoding, &info.api_version(), &info.kind, info.is_builtin()));
        ResourceCache {
            collection: info.collection_path(),
            scope: Scope::everything(),
            info,
            encoding,
            store: RwLock::new(store),
            rv_tx: watch::channel(0).0,
            synced: AtomicBool::new(false),
            synced_tx: watch::channel(false).0,
            cold_failures: watch::channel(0).0,
            epoch: AtomicU64::new(0),
            loading: Mutex::new(None),
            loaded_from: Mutex::new(None),
            loads: watch::channel(0).0,

            metrics,
            label,
            last_used: Mutex::new(Instant::now()),
            heard: Mutex::new(Instant::now()),
            watching_since: Mutex::new(None),
            via_tier: AtomicBool::new(false),
            from_disk: Mutex::new(None),
            pinned: AtomicBool::new(false),
            complete: AtomicBool::new(true),
            gauges,
            fanout: Mutex::new(FanOut::new(encoder.clone(), &watch_config)),
            encoder,
            dispatched: AtomicU64::new(0),
            watch_config,
        }
    }

    /// When the newest object that entered `selection` (an ADDED as a watcher of it would see
    /// it) at or after `since` and passes `wanted` was received, if any: e.g. when a pod was
    /// last bound to a node.
    pub fn entered_since(
        &self,
        since: std::time::Instant,
        selection: impl Fn(&CachedObject) -> bool,
        wanted: impl Fn(&CachedObject) -> bool,
    ) -> Option<std::time::Instant> {
        let fan = self.fanout();
        let newest = fan
            .history
            .received_since(since)
            .find(|e| wanted(&e.object) && e.seen_by(&selection) == Some(Seen::Added));
        newest.map(|e| e.received)
    }

    /// Whether the object at `key` now in the cache has passed `selection` since `since` at the
    /// latest, as far as the cache can tell: it passes it now, the cache's events since `since`
    /// are all kept with no load among them ([`History::complete_since`]), and none of them
    /// brought it into `selection` (an ADDED as a watcher of it would see it). A pod bound to a
    /// node since before `since`, say. `false` when the cache cannot tell.
    ///
    /// [`History::complete_since`]: super::history::History::complete_since
    pub fn held_since(
        &self,
        key: &str,
        since: std::time::Instant,
        selection: impl Fn(&CachedObject) -> bool,
    ) -> bool {
        // The object first: one that enters after this look is caught by the history below.
        let Some(object) = self.current().get(key).cloned() else { return false };
        if !self.is_synced() || !selection(&object) {
            return false;
        }
        let fan = self.fanout();
        fan.history.complete_since(since)
            && !fan
                .history
                .received_since(since)
                .any(|e| e.object.key.as_str() == key && e.seen_by(&selection) == Some(Seen::Added))
    }

    /// How many events the upstream's watch brought at or after `since`, counted up to `most`
    /// (a load or a bookmark is no event).
    pub fn events_received_since(&self, since: std::time::Instant, most: usize) -> usize {
        self.fanout().history.received_since(since).take(most).count()
    }

    fn fanout(&self) -> std::sync::MutexGuard<'_, FanOut> {
        self.fanout.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        self.store.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Store> {
        self.store.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn info(&self) -> &ResourceInfo {
        &self.info
    }

    /// The cache's metric label (`resource/version`, with its group).
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn describe(&self) -> String {
        if self.scope == Scope::everything() {
            format!("{} ({})", self.label, self.encoding.as_str())
        } else {
            format!("{} ({}, {})", self.label, self.encoding.as_str(), self.scope)
        }
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Limits the cache to `scope`: it lists and watches that namespace's collection (a
    /// namespace is ignored for a cluster-scoped resource) with its selectors, and answers only
    /// reads within it.
    pub fn scoped(mut self, scope: Scope) -> Self {
        if let (Some(ns), true) = (scope.namespace(), self.info.namespaced) {
            self.collection = self.info.namespaced_collection_path(ns);
        }
        self.scope = scope;
        self
    }

    /// What part of the resource the cache holds.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Where the cache lists and watches upstream.
    pub fn collection_path(&self) -> String {
        self.collection.clone()
    }

    /// The scope's selectors, to append to a list's or watch's query of
    /// [`ResourceCache::collection_path`] (`&labelSelector=…&fieldSelector=…`; empty without).
    pub fn selector_query(&self) -> String {
        self.scope.query()
    }

    /// Synced: a complete list has been loaded; before that every request passes through.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn resource_version(&self) -> u64 {
        *self.rv_tx.borrow()
    }

    /// Objects held.
    pub fn object_count(&self) -> usize {
        self.read().len()
    }

    /// Bytes of object data held (what the memory budget counts).
    pub fn bytes(&self) -> usize {
        self.read().bytes()
    }

    pub fn current(&self) -> Snapshot {
        self.read().current()
    }

    pub fn at(&self, rv: u64) -> Result<Snapshot, SnapshotError> {
        self.read().at(rv, std::time::Instant::now())
    }

    /// Waits until the cache has synced (a cold cache's first load), at most `timeout`; whether
    /// it is synced. Every reader of a cold cache shares its one upstream list this way.
    /// A failed first load ends the wait early (see [`ResourceCache::failing_cold`]).
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        if self.is_synced() {
            return true;
        }
        let mut synced = self.synced_tx.subscribe();
        let mut failed = self.cold_failures.subscribe();
        failed.mark_unchanged();
        let wait = async move {
            tokio::select! {
                _ = synced.wait_for(|s| *s) => {}
                _ = failed.changed() => {}
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.is_synced()
    }

    /// Never synced, and its last load failed: the upstream is unreachable or refuses it (or
    /// the memory budget did). Its readers pass through at once rather than wait for a load
    /// that is not coming soon.
    pub fn failing_cold(&self) -> bool {
        !self.is_synced() && !self.has_loaded() && *self.cold_failures.borrow() > 0
    }

    /// Whether a load ever completed: a cache that is not synced now although it was (an object
    /// it could not index) is not cold, and waiting for it would only delay the passthrough.
    pub fn has_loaded(&self) -> bool {
        self.loaded_from.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Whether the state comes from a load requested at or after `arrived`: then it is at
    /// least as new as the upstream was when a read arrived at `arrived` (a consistent answer
    /// for it, with no further proof).
    pub fn loaded_since(&self, arrived: std::time::Instant) -> bool {
        self.is_synced()
            && self
                .loaded_from
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|load| load.consistent_for(arrived))
    }

    /// Whether a load requested at or after `arrived` is under way.
    pub fn loading_since(&self, arrived: std::time::Instant) -> bool {
        self.loading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|load| load.consistent_for(arrived))
    }

    /// Waits until the state comes from a load requested at or after `arrived`
    /// ([`ResourceCache::loaded_since`]), until `deadline`; false when it did not (the load
    /// failed, or none came in time).
    pub async fn wait_loaded_since(&self, arrived: std::time::Instant, deadline: Instant) -> bool {
        let mut loads = self.loads.subscribe();
        loop {
            if self.loaded_since(arrived) {
                return true;
            }
            if tokio::time::timeout_at(deadline, loads.changed()).await.is_err() {
                return self.loaded_since(arrived);
            }
        }
    }

    /// The epoch and RV a freshness probe starts from, or `None` while the cache is not synced
    /// or a load is under way (its state is about to be replaced).
    pub fn probe_start(&self) -> Option<(u64, u64)> {
        let store = self.read();
        let loading = self.loading.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        (self.is_synced() && !loading)
            .then(|| (self.epoch.load(Ordering::Acquire), store.resource_version()))
    }

    /// Changes whenever the cache's RV does (a change, a bookmark, a load).
    pub fn watch_rv(&self) -> watch::Receiver<u64> {
        self.rv_tx.subscribe()
    }

    /// Waits until the cache has reached `rv`; `Err(current)` after `timeout`.
    pub async fn wait_for(&self, rv: u64, timeout: Duration) -> Result<u64, u64> {
        let mut rx = self.rv_tx.subscribe();
        let wait = async move { rx.wait_for(|cur| *cur >= rv).await.map(|v| *v) };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(v)) => Ok(v),
            _ => Err(self.resource_version()),
        }
    }

    /// Keeps this cache running whether or not it is read.
    pub fn pin(&self) {
        self.pinned.store(true, Ordering::Release);
    }

    /// Named in the configuration: never stopped for idleness.
    pub fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Acquire)
    }

    /// Records a read: the cache is not idle.
    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// How long since the last read.
    pub fn idle_for(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    /// How long since the upstream was last heard from (an event, a bookmark, a load); since
    /// the cache started if never.
    pub fn upstream_silent_for(&self) -> Duration {
        let heard = self.heard.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        // A state from disk was last heard from when it was written.
        match self.disk_state_written() {
            Some(at) => heard.max(Duration::from_secs(unix_now().saturating_sub(at))),
            None => heard,
        }
    }

    /// Whether the upstream has been silent for longer than [`STALE_AFTER`] (or the state came
    /// from disk): the cache serves its last state.
    pub fn is_stale(&self) -> bool {
        self.disk_state_written().is_some() || self.upstream_silent_for() > STALE_AFTER
    }

    /// How current the cache's view is, for a grant derived from what it shows
    /// (`auth::node_rules`): [`View::Live`] since when its watch of the apiserver has run
    /// without a gap — no failed, refused or throttled watch, no load (a relist replaces what
    /// the cache knew) — while the upstream was heard from (an event, a bookmark, a watch
    /// answered) within `heard_within`; [`View::ViaTier`] when that watch runs on a tier above
    /// kubeplex (a pool), whose own watch may be in a gap this cache cannot see;
    /// [`View::Gap`] otherwise — a gap, a state read back from disk, an upstream silent for
    /// longer.
    pub fn view(&self, heard_within: Duration) -> View {
        if self.disk_state_written().is_some() || self.upstream_silent_for() > heard_within {
            return View::Gap;
        }
        match *self.watching_since.lock().unwrap_or_else(|p| p.into_inner()) {
            None => View::Gap,
            Some(_) if self.via_tier.load(Ordering::Acquire) => View::ViaTier,
            Some(since) => View::Live(since),
        }
    }

    /// When the state read back from disk was written (Unix seconds), while it is what the
    /// cache serves.
    pub fn disk_state_written(&self) -> Option<u64> {
        *self.from_disk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cache at a glance, for operators (`/debug/caches`).
    pub fn status(&self) -> CacheStatus {
        let (objects, bytes, resource_version) = {
            let store = self.read();
            (store.len(), store.bytes(), store.resource_version())
        };
        let fan = self.fanout();
        let disk = self.disk_state_written();
        CacheStatus {
            resource: self.label.clone(),
            encoding: self.encoding.as_str(),
            namespace: self.scope.namespace().map(str::to_string),
            label_selector: self.scope.label_selector(),
            field_selector: self.scope.field_selector(),
            synced: self.is_synced(),
            complete: self.is_complete(),
            pinned: self.is_pinned(),
            objects,
            bytes,
            resource_version,
            seconds_since_upstream: self.upstream_silent_for().as_secs(),
            stale: self.is_stale(),
            watching: disk.is_none()
                && self.watching_since.lock().unwrap_or_else(|p| p.into_inner()).is_some(),
            seconds_since_read: self.idle_for().as_secs(),
            watchers: fan.len(),
            waiting_reads: self.synced_tx.receiver_count() + self.rv_tx.receiver_count(),
            history_events: fan.history.len(),
            history_bytes: fan.history.bytes(),
            history_from: fan.history.start(),
            state_from: if disk.is_some() { "disk" } else { "upstream" },
            disk_state_age_seconds: disk.map(|at| unix_now().saturating_sub(at)),
            rendered_from: None,
        }
    }

    /// The store moved: readers waiting for an RV are woken, and the gauges follow.
    fn publish(&self, store: &Store) {
        *self.heard.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let rv = store.resource_version();
        self.rv_tx.send_if_modified(|cur| {
            let changed = *cur != rv;
            *cur = rv;
            changed
        });
        self.gauges.publish(store);
    }

    /// Ends every watcher (the cache is being stopped) and takes its share out of its metric
    /// series; `others`: how many other caches of the same resource and encoding still run
    /// (the series are removed with the last one).
    pub fn close(&self, others: usize) {
        // Through the store's lock first, as every change takes it before the fan-out's: a
        // change the store already shows (and the state written to disk holds) is dispatched
        // before its watchers stop, so their last bookmark is at that state's RV. Then under
        // the fan-out's lock, as every dispatch: each event up to it is queued.
        let store = self.write();
        let mut fan = self.fanout();
        drop(store);
        let rv = self.dispatched.load(std::sync::atomic::Ordering::Acquire);
        fan.stop_all(rv);
        drop(fan);
        self.gauges.remove(&self.metrics, &self.label, self.encoding, others);
    }
}
