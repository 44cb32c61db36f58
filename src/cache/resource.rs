//! One cache's state per (resource, wire encoding), behind its locks: the store, the RV it has
//! reached (readers wait on it), load epochs, the fan-out to watchers, and its metric series.
//! The live layer (`upstream::caches`, `upstream::feed`) feeds it; it does no I/O and starts no
//! tasks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::fanout::{Closed, FanOut, Filter, Queue, WatchConfig};
use super::frames::Encoder;
use super::history::{Event, EventType, TooOld};
use super::index;
use super::object::CachedObject;
pub use super::object::Encoding;
use super::store::{Applied, Change, Snapshot, SnapshotError, Store, StoreLimits};

use super::metrics::CacheMetrics as Metrics;
use crate::wire::resource::ResourceInfo;

/// A watch event's kind, as the reflector hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

pub struct ResourceCache {
    info: Arc<ResourceInfo>,
    encoding: Encoding,
    store: RwLock<Store>,
    /// The RV the store has reached; not-older-than readers wait on it.
    rv_tx: watch::Sender<u64>,
    synced: AtomicBool,
    /// `synced`, for readers waiting on a cold cache's first sync.
    synced_tx: watch::Sender<bool>,
    /// Bumped whenever the store's state may stop following from the one before it (a load
    /// begins or ends, an object is skipped): a freshness proof begun in one epoch is not applied
    /// in another (see [`ResourceCache::mark_progress`]).
    epoch: AtomicU64,
    /// The load (list or streaming list) under way, if any, and when its request was sent.
    loading: Mutex<Option<std::time::Instant>>,
    /// When the request of the load the state comes from was sent: that state is consistent
    /// for every read that arrived before then (the upstream answers a list with
    /// resourceVersion unset at its current RV).
    loaded_from: Mutex<Option<std::time::Instant>>,

    metrics: Metrics,
    label: String,
    last_used: Mutex<Instant>,
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

struct Gauges {
    objects: prometheus::IntGauge,
    bytes: prometheus::IntGauge,
    resource_version: prometheus::IntGauge,
    updated: prometheus::IntGauge,
    watchers: prometheus::IntGauge,
    events_received: prometheus::IntCounter,
    frames_dispatched: prometheus::IntCounter,
    ended_slow: prometheus::IntCounter,
    ended_reset: prometheus::IntCounter,
    history_events: prometheus::IntGauge,
    history_bytes: prometheus::IntGauge,
    history_oldest: prometheus::IntGauge,
    pub(crate) bytes_sent: prometheus::IntCounter,
    pub(crate) delivery: prometheus::Histogram,
}

/// Where a new watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// The cache's current state as ADDED events, then its changes.
    State,
    /// Changes from now on.
    Now,
    /// Changes strictly after this RV, replayed from the history first.
    After(u64),
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
        let l = [label.as_str(), encoding.as_str()];
        let gauges = Gauges {
            objects: metrics.cache_objects.with_label_values(&l),
            bytes: metrics.cache_bytes.with_label_values(&l),
            resource_version: metrics.cache_resource_version.with_label_values(&l),
            updated: metrics.cache_updated.with_label_values(&l),
            watchers: metrics.watch.watchers.with_label_values(&l),
            events_received: metrics.watch.events_received.with_label_values(&l),
            frames_dispatched: metrics.watch.frames_dispatched.with_label_values(&l),
            ended_slow: metrics.watch.watchers_ended.with_label_values(&[&label, l[1], "slow"]),
            ended_reset: metrics.watch.watchers_ended.with_label_values(&[&label, l[1], "reset"]),
            history_events: metrics.watch.history_events.with_label_values(&l),
            history_bytes: metrics.watch.history_bytes.with_label_values(&l),
            history_oldest: metrics.watch.history_oldest.with_label_values(&l),
            bytes_sent: metrics.watch.bytes_sent.with_label_values(&l),
            delivery: metrics.watch.delivery.with_label_values(&l),
        };
        let encoder =
            Arc::new(Encoder::new(encoding, &info.api_version(), &info.kind, info.is_builtin()));
        ResourceCache {
            info,
            encoding,
            store: RwLock::new(store),
            rv_tx: watch::channel(0).0,
            synced: AtomicBool::new(false),
            synced_tx: watch::channel(false).0,
            epoch: AtomicU64::new(0),
            loading: Mutex::new(None),
            loaded_from: Mutex::new(None),

            metrics,
            label,
            last_used: Mutex::new(Instant::now()),
            pinned: AtomicBool::new(false),
            complete: AtomicBool::new(true),
            gauges,
            fanout: Mutex::new(FanOut::new(encoder.clone(), &watch_config)),
            encoder,
            dispatched: AtomicU64::new(0),
            watch_config,
        }
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
        format!("{} ({})", self.label, self.encoding.as_str())
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    pub fn collection_path(&self) -> String {
        self.info.collection_path()
    }

    /// Synced: a complete list has been loaded; before that every request passes through.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn resource_version(&self) -> u64 {
        *self.rv_tx.borrow()
    }

    pub fn current(&self) -> Snapshot {
        self.read().current()
    }

    pub fn at(&self, rv: u64) -> Result<Snapshot, SnapshotError> {
        self.read().at(rv, std::time::Instant::now())
    }

    /// Waits until the cache has synced (a cold cache's first load), at most `timeout`; whether
    /// it is synced. Every reader of a cold cache shares its one upstream list this way.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        if self.is_synced() {
            return true;
        }
        let mut rx = self.synced_tx.subscribe();
        let wait = async move { rx.wait_for(|s| *s).await.is_ok() };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false) && self.is_synced()
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
                .is_some_and(|at| at >= arrived)
    }

    /// The epoch and RV a freshness probe starts from, or `None` while the cache is not synced
    /// or a load is under way (its state is about to be replaced).
    pub fn probe_start(&self) -> Option<(u64, u64)> {
        let store = self.read();
        let loading = self.loading.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        (self.is_synced() && !loading)
            .then(|| (self.epoch.load(Ordering::Acquire), store.resource_version()))
    }

    /// A freshness probe's conclusion: the upstream had no event of this resource in
    /// `(events_through, rv]`. Once the cache holds every event up to `events_through` (the
    /// probe saw them too), it is at `rv`, as a BOOKMARK at `rv` on its own watch would have
    /// told it. Refused (false) when the cache is not there yet, or its state changed epoch
    /// since the probe began (a relist: the probe's view no longer follows from it).
    pub fn mark_progress(&self, epoch: u64, events_through: u64, rv: u64) -> bool {
        let mut store = self.write();
        let loading = self.loading.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        if loading
            || !self.is_synced()
            || self.epoch.load(Ordering::Acquire) != epoch
            || store.resource_version() < events_through
        {
            return false;
        }
        store.bookmark(rv, std::time::Instant::now());
        self.publish(&store);
        let fan = self.fanout();
        drop(store);
        self.dispatched.fetch_max(rv, Ordering::AcqRel);
        drop(fan);
        true
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

    // ---- what the upstream said (the live layer's `upstream::feed::apply`) ----

    /// Loads a complete state (a relist). The cache answers from now on, unless the load
    /// skipped something (the caller then calls `mark_incomplete`). Watchers receive the
    /// differences to the previous state as events (see [`relist_events`]).
    pub fn replace(&self, objects: Vec<CachedObject>, rv: u64) {
        let was_whole = self.is_synced() && self.is_complete();
        let mut store = self.write();
        let old_rv = store.resource_version();
        let changes = store.replace(objects, rv, std::time::Instant::now());
        self.publish(&store);
        let mut fan = self.fanout();
        drop(store);
        match relist_events(&self.encoder, changes, old_rv, rv).filter(|_| was_whole) {
            Some(events) => {
                self.gauges.events_received.inc_by(events.len() as u64);
                for event in events {
                    self.dispatch(&mut fan, event);
                }
            }
            None => {
                // A first load, or one after the cache lost track: nothing to resume from
                // before it, and nobody watching from the cache.
                let open = fan.len() as u64;
                fan.close_all(Closed::Reset);
                self.gauges.ended_reset.inc_by(open);
                fan.history.reset(rv);
            }
        }
        self.dispatched.store(rv, Ordering::Release);
        self.publish_history(&fan);
        drop(fan);
        self.complete.store(true, Ordering::Release);
        let requested = self.loading.lock().unwrap_or_else(|p| p.into_inner()).take();
        *self.loaded_from.lock().unwrap_or_else(|p| p.into_inner()) = requested;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.set_synced(true);
    }

    fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Release);
        self.synced_tx.send_replace(synced);
    }

    /// A load (paged list or streaming list) is being requested at `requested`: objects skipped
    /// from now on count against it, proofs begun before it do not apply after it, and its
    /// state will be consistent for reads that arrived before `requested`.
    pub fn load_started(&self, requested: std::time::Instant) {
        self.complete.store(true, Ordering::Release);
        *self.loading.lock().unwrap_or_else(|p| p.into_inner()) = Some(requested);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// A load failed before it replaced the state.
    pub fn load_failed(&self) {
        self.loading.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn apply(&self, kind: EventKind, obj: CachedObject) {
        let mut store = self.write();
        let change = match kind {
            EventKind::Added => Change::Added(Arc::new(obj)),
            EventKind::Modified => Change::Modified(Arc::new(obj)),
            EventKind::Deleted => Change::Deleted(Arc::new(obj)),
        };
        // An event not newer than the cache (a replay after a reconnect) changes nothing.
        let applied = store.apply(change, std::time::Instant::now()).ok();
        self.publish(&store);
        let Some(Applied { change, previous }) = applied else { return };
        let mut fan = self.fanout();
        drop(store);
        let rv = change.object().resource_version;
        let (kind, object) = match change {
            Change::Added(o) => (EventType::Added, o),
            Change::Modified(o) => (EventType::Modified, o),
            Change::Deleted(o) => (EventType::Deleted, o),
        };
        self.gauges.events_received.inc();
        // A deletion of an object the cache never held is seen by nobody (the watch cache's
        // `PrevObject` is nil), but the RV still moves.
        if kind != EventType::Deleted || previous.is_some() {
            let event = Event::new(rv, kind, object, previous, std::time::Instant::now());
            self.dispatch(&mut fan, event);
        }
        self.dispatched.store(rv, Ordering::Release);
        self.publish_history(&fan);
    }

    pub fn bookmark(&self, rv: u64) {
        let mut store = self.write();
        store.bookmark(rv, std::time::Instant::now());
        self.publish(&store);
        let fan = self.fanout();
        drop(store);
        self.dispatched.fetch_max(rv, Ordering::AcqRel);
        drop(fan);
    }

    fn dispatch(&self, fan: &mut FanOut, event: Event) {
        let done = fan.publish(event);
        self.gauges.frames_dispatched.inc_by(done.frames);
        self.gauges.ended_slow.inc_by(done.slow);
    }

    fn publish_history(&self, fan: &FanOut) {
        let g = &self.gauges;
        g.history_events.set(fan.history.len() as i64);
        g.history_bytes.set(fan.history.bytes() as i64);
        g.history_oldest.set(i64::try_from(fan.history.start()).unwrap_or(-1));
        g.watchers.set(fan.len() as i64);
    }

    // ---- the watchers' side ----

    /// Registers a watch, atomically with the state or history it starts from, so that it
    /// misses no event and sees none twice. `Err` when `from` is older than the history.
    pub fn register_watch(
        &self,
        from: WatchFrom,
        filter: Filter,
        metadata: bool,
    ) -> Result<Registration, TooOld> {
        self.touch();
        let store = self.read();
        let mut fan = self.fanout();
        let current = store.resource_version();
        let (initial, after, replay) = match from {
            WatchFrom::State => (Some(store.current()), current, None),
            WatchFrom::Now => (None, current, None),
            // An RV the cache has not reached yet: the events up to it are the client's
            // already; later ones are sent (the watch cache's `getAllEventsSinceLocked`).
            WatchFrom::After(rv) => (None, rv.max(current), Some(fan.history.position_after(rv)?)),
        };
        drop(store);
        let (id, queue) = fan.add(filter, metadata, after, replay, self.watch_config.queue_frames);
        self.publish_history(&fan);
        let position = match from {
            WatchFrom::After(rv) => rv,
            _ => after,
        };
        Ok(Registration { id, queue, initial, position })
    }

    /// Forgets a watch whose stream ended.
    pub fn unregister_watch(&self, id: u64) {
        let mut fan = self.fanout();
        fan.remove(id);
        self.publish_history(&fan);
    }

    /// The RV every event has been queued up to (see `dispatched`).
    pub fn dispatched_rv(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    pub fn watch_config(&self) -> &WatchConfig {
        &self.watch_config
    }

    /// Encodes this cache's watch frames.
    pub fn encoder(&self) -> Arc<Encoder> {
        self.encoder.clone()
    }

    /// Records bytes handed to a downstream connection, and the delivery delay of an event.
    pub fn observe_sent(&self, bytes: usize, received: Option<std::time::Instant>) {
        self.gauges.bytes_sent.inc_by(bytes as u64);
        if let Some(t) = received {
            self.gauges.delivery.observe(t.elapsed().as_secs_f64());
        }
    }

    /// Ends watchers that fell behind for too long. Run periodically.
    pub fn end_slow_watchers(&self) {
        let mut fan = self.fanout();
        let ended = fan.end_slow(std::time::Instant::now(), self.watch_config.slow_after);
        self.gauges.ended_slow.inc_by(ended);
        self.publish_history(&fan);
    }

    /// Whether downstream watches are open on this cache.
    pub fn has_watchers(&self) -> bool {
        !self.fanout().is_empty()
    }

    fn publish(&self, store: &Store) {
        let rv = store.resource_version();
        self.rv_tx.send_if_modified(|cur| {
            let changed = *cur != rv;
            *cur = rv;
            changed
        });
        let g = &self.gauges;
        g.objects.set(store.len() as i64);
        g.bytes.set(store.bytes() as i64);
        g.resource_version.set(rv as i64);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        g.updated.set(now as i64);
    }

    /// An object could not be indexed: the cache is not whole and must not answer until a
    /// relist loads everything.
    pub fn mark_incomplete(&self) {
        self.complete.store(false, Ordering::Release);
        self.set_synced(false);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        // Watchers would miss that object's events: end them (their clients resume through
        // the upstream while the cache is not whole), and resume nothing from before.
        let mut fan = self.fanout();
        let open = fan.len() as u64;
        fan.close_all(Closed::Reset);
        self.gauges.ended_reset.inc_by(open);
        fan.history.invalidate();
        self.metrics
            .skipped_objects
            .with_label_values(&[&self.label, self.encoding.as_str()])
            .inc();
    }

    /// Whether no object has been skipped since the last complete load began.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }
}

impl ResourceCache {
    /// Ends every watcher (the cache is being stopped) and removes its metric series.
    pub fn close(&self) {
        self.fanout().close_all(Closed::Stopped);
        let l = [self.label.as_str(), self.encoding.as_str()];
        let w = &self.metrics.watch;
        let _ = w.watchers.remove_label_values(&l);
        let _ = w.history_events.remove_label_values(&l);
        let _ = w.history_bytes.remove_label_values(&l);
        let _ = w.history_oldest.remove_label_values(&l);
        let _ = self.metrics.cache_objects.remove_label_values(&l);
        let _ = self.metrics.cache_bytes.remove_label_values(&l);
        let _ = self.metrics.cache_resource_version.remove_label_values(&l);
        let _ = self.metrics.cache_updated.remove_label_values(&l);
    }
}

/// A relist's differences as watch events that take a watcher from the cache's previous state
/// (at `old_rv`) to the list's (at `list_rv`), in RV order: ADDED and MODIFIED at their objects'
/// own RVs (all after `old_rv`: the cache had every change up to it), then DELETED for vanished
/// objects, carrying their last state at the list's RV (their deletions' RVs are unknown; the
/// list's is the first at which they are known to be gone). `None` when the differences do not
/// fit that order — the cache was not at `old_rv` after all — and watchers must be reset.
fn relist_events(
    encoder: &Encoder,
    changes: Vec<Applied>,
    old_rv: u64,
    list_rv: u64,
) -> Option<Vec<Event>> {
    let now = std::time::Instant::now();
    let mut events = Vec::with_capacity(changes.len());
    let mut deleted = Vec::new();
    for Applied { change, previous } in changes {
        match change {
            Change::Added(o) | Change::Modified(o)
                if o.resource_version <= old_rv || o.resource_version > list_rv =>
            {
                tracing::warn!(key = %o.key, rv = o.resource_version, old_rv, list_rv, "relist found a change outside the gap it closes; resetting watchers");
                return None;
            }
            Change::Added(o) => {
                events.push(Event::new(o.resource_version, EventType::Added, o, previous, now))
            }
            Change::Modified(o) => {
                events.push(Event::new(o.resource_version, EventType::Modified, o, previous, now))
            }
            Change::Deleted(o) => {
                let body = encoder.with_resource_version(&o.body, list_rv).ok()?;
                let gone = CachedObject {
                    body: bytes::Bytes::from(body),
                    resource_version: list_rv,
                    ..(*o).clone()
                };
                deleted.push(Event::new(
                    list_rv,
                    EventType::Deleted,
                    Arc::new(gone),
                    previous,
                    now,
                ));
            }
        }
    }
    events.sort_by_key(|e| e.rv);
    events.extend(deleted);
    Some(events)
}
