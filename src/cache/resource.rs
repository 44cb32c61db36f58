//! One live cache per (resource, wire encoding): the store behind a lock, the reflector task
//! that fills it, the RV it has reached (for not-older-than waits), and its metrics. [`Caches`]
//! starts them on first use and stops the ones nobody has read for a while.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::index;
use super::object::CachedObject;
pub use super::object::Encoding;
use super::store::{Change, Snapshot, SnapshotError, Store, StoreLimits};

use crate::serve::metrics::Metrics;
use crate::serve::resources::ResourceInfo;
use crate::upstream::reflector::Reflector;
use crate::upstream::Upstream;

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
    metrics: Metrics,
    label: String,
    last_used: Mutex<Instant>,
    reflector: Mutex<Option<JoinHandle<()>>>,
    /// Named in the configuration: never stopped for idleness.
    pinned: AtomicBool,
    /// Cleared when an upstream object had to be skipped (see `mark_incomplete`).
    complete: AtomicBool,
    /// This cache's gauge series, resolved once: `publish` runs on every upstream event, under
    /// the store's write lock.
    gauges: Gauges,
}

struct Gauges {
    objects: prometheus::IntGauge,
    bytes: prometheus::IntGauge,
    resource_version: prometheus::IntGauge,
    updated: prometheus::IntGauge,
}

impl ResourceCache {
    fn new(
        info: Arc<ResourceInfo>,
        encoding: Encoding,
        limits: StoreLimits,
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
        };
        ResourceCache {
            info,
            encoding,
            store: RwLock::new(store),
            rv_tx: watch::channel(0).0,
            synced: AtomicBool::new(false),
            metrics,
            label,
            last_used: Mutex::new(Instant::now()),
            reflector: Mutex::new(None),
            pinned: AtomicBool::new(false),
            complete: AtomicBool::new(true),
            gauges,
        }
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

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    // ---- the reflector's side ----

    /// A list item as the upstream sent it (JSON item form, or a bare protobuf message).
    pub fn object_from_item(&self, bytes: Bytes) -> Result<CachedObject, String> {
        match self.encoding {
            Encoding::Json => {
                CachedObject::from_json_item(&self.info.group, &self.info.resource, bytes)
            }
            Encoding::Protobuf => {
                CachedObject::from_protobuf_message(&self.info.group, &self.info.resource, bytes)
            }
        }
        .map_err(|e| e.to_string())
    }

    /// A watch event's object (full JSON object, or a bare protobuf message).
    pub fn object_from_event(&self, bytes: Bytes) -> Result<CachedObject, String> {
        match self.encoding {
            Encoding::Json => CachedObject::from_json_object(
                &self.info.group,
                &self.info.resource,
                bytes,
                !self.info.is_builtin(),
            ),
            Encoding::Protobuf => {
                CachedObject::from_protobuf_message(&self.info.group, &self.info.resource, bytes)
            }
        }
        .map_err(|e| e.to_string())
    }

    /// The resourceVersion of a BOOKMARK's object.
    pub fn object_resource_version(&self, bytes: &[u8]) -> Result<u64, String> {
        let rv = match self.encoding {
            Encoding::Json => crate::wire::meta::object_meta_json(bytes)
                .map(|m| m.resource_version.into_owned())
                .map_err(|e| e.to_string())?,
            Encoding::Protobuf => crate::wire::proto::object_meta(bytes)
                .map(|m| m.resource_version.into_owned())
                .map_err(|e| e.to_string())?,
        };
        rv.parse().map_err(|_| format!("resourceVersion {rv:?} is not a number"))
    }

    /// Loads a complete state (a relist). The cache answers from now on, unless the load
    /// skipped something (the caller then calls `mark_incomplete`).
    pub fn replace(&self, objects: Vec<CachedObject>, rv: u64) -> Vec<Change> {
        let changes = {
            let mut store = self.write();
            let changes = store.replace(objects, rv, std::time::Instant::now());
            self.publish(&store);
            changes
        };
        self.complete.store(true, Ordering::Release);
        self.synced.store(true, Ordering::Release);
        changes
    }

    pub fn apply(&self, kind: EventKind, obj: CachedObject) -> Option<Change> {
        let mut store = self.write();
        let change = match kind {
            EventKind::Added => Change::Added(Arc::new(obj)),
            EventKind::Modified => Change::Modified(Arc::new(obj)),
            EventKind::Deleted => Change::Deleted(Arc::new(obj)),
        };
        // An event not newer than the cache (a replay after a reconnect) changes nothing.
        let applied = store.apply(change, std::time::Instant::now()).ok().map(|a| a.change);
        self.publish(&store);
        applied
    }

    pub fn bookmark(&self, rv: u64) {
        let mut store = self.write();
        store.bookmark(rv, std::time::Instant::now());
        self.publish(&store);
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
        self.synced.store(false, Ordering::Release);
        self.metrics
            .skipped_objects
            .with_label_values(&[&self.label, self.encoding.as_str()])
            .inc();
    }

    /// Whether no object has been skipped since the last complete load began.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// A streaming list is starting: skips from now on count against it.
    pub fn begin_load(&self) {
        self.complete.store(true, Ordering::Release);
    }

    pub fn metrics_relist(&self) {
        self.metrics.relists.with_label_values(&[&self.label, self.encoding.as_str()]).inc();
    }

    pub fn metrics_upstream_call(&self, verb: &str) {
        self.metrics
            .upstream_calls
            .with_label_values(&[&self.label, self.encoding.as_str(), verb])
            .inc();
    }
}

/// Tunables of the caches (see `config`).
#[derive(Debug, Clone)]
pub struct CachesConfig {
    pub limits: StoreLimits,
    /// Caches started at start-up (`pods`, `apps/v1/deployments`, `pods:protobuf`).
    pub preload: Vec<String>,
    /// A cache nobody read for this long is stopped (its memory and upstream watch freed).
    pub idle_timeout: Duration,
}

type CacheKey = (String, String, String, Encoding);

/// Every live cache, keyed by (group, version, resource, encoding).
pub struct Caches {
    upstream: Arc<Upstream>,
    metrics: Metrics,
    config: CachesConfig,
    map: Mutex<HashMap<CacheKey, Arc<ResourceCache>>>,
}

impl Caches {
    pub fn new(upstream: Arc<Upstream>, metrics: Metrics, config: CachesConfig) -> Arc<Self> {
        Arc::new(Caches { upstream, metrics, config, map: Mutex::new(HashMap::new()) })
    }

    /// The cache for a resource in an encoding, started (list+watch upstream) if it is not
    /// running yet. Only one is ever started per key, whatever the number of callers.
    pub fn get_or_start(&self, info: &Arc<ResourceInfo>, encoding: Encoding) -> Arc<ResourceCache> {
        let key = (info.group.clone(), info.version.clone(), info.resource.clone(), encoding);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&key) {
            c.touch();
            return c.clone();
        }
        let cache = Arc::new(ResourceCache::new(
            info.clone(),
            encoding,
            self.config.limits,
            self.metrics.clone(),
        ));
        let task = tokio::spawn(Reflector::new(self.upstream.clone(), cache.clone()).run());
        *cache.reflector.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        tracing::info!(resource = %cache.describe(), "cache started");
        map.insert(key, cache.clone());
        cache
    }

    /// Stops caches idle longer than the configured timeout. Run periodically.
    pub fn reap_idle(&self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, c| {
            let keep = c.pinned.load(Ordering::Acquire) || c.idle_for() < self.config.idle_timeout;
            if !keep {
                c.stop();
                tracing::info!(resource = %c.describe(), "idle cache stopped");
            }
            keep
        });
    }

    /// Stops every cache (shutdown).
    pub fn stop_all(&self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        for c in map.values() {
            c.stop();
        }
        map.clear();
    }

    /// Pinned caches not synced yet, plus configured ones not even started (by spec).
    pub fn unsynced_pinned(&self, specs: &[String]) -> Vec<String> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let pinned: Vec<_> = map.values().filter(|c| c.pinned.load(Ordering::Acquire)).collect();
        let mut pending: Vec<String> =
            pinned.iter().filter(|c| !c.is_synced()).map(|c| c.describe()).collect();
        if pinned.len() < specs.len() {
            pending.push(format!("{} configured cache(s) not started", specs.len() - pinned.len()));
        }
        pending
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ResourceCache {
    fn stop(&self) {
        if let Some(h) = self.reflector.lock().unwrap_or_else(|p| p.into_inner()).take() {
            h.abort();
        }
        let l = [self.label.as_str(), self.encoding.as_str()];
        let _ = self.metrics.cache_objects.remove_label_values(&l);
        let _ = self.metrics.cache_bytes.remove_label_values(&l);
        let _ = self.metrics.cache_resource_version.remove_label_values(&l);
        let _ = self.metrics.cache_updated.remove_label_values(&l);
    }
}
