//! The caches that are running: each one's state (`cache::resource::ResourceCache`), the
//! reflector task that feeds it from the upstream, the sweeper that ends slow watchers, and
//! the freshness proofs of its reads. [`Caches`] starts them (one per resource, encoding and
//! scope, whatever the number of callers) and stops the ones nobody has read for a while. This
//! is the live layer between the pure state (`cache`) and the serving side.
//!
//! **What a cache may cost.** kubeplex exists to take load off the apiserver, so a cache is only
//! started where it costs the upstream no more than its readers would directly (docs/design.md §7).
//! A cache of scope S (a namespace, label and field selectors: `cache::Scope`) costs one list of
//! S and every event of S for as long as it runs; a reader of scope R costs, directly, its own
//! list of R and, while it watches, the events of R. Hence:
//! 1. a read within a running cache's scope is served from it: no further upstream cost;
//! 2. otherwise a cache is started with exactly the read's scope, never a wider one: it costs
//!    what this first reader would directly, and every later reader of that scope is saved (a
//!    node's pods by `spec.nodeName`, not every pod of the cluster);
//! 3. a read of one named object (a get, or a list or watch by `metadata.name=`) never starts a
//!    cache: a cache of one object saves nothing until a second reader of it comes, and a wider
//!    one would cost more than the reader. It is served by a running cache that holds it (a
//!    configured `nodes?fieldSelector=metadata.name=NODE`), else passed through;
//! 4. configured caches (`caches:`) are the operator's choice, scope included. Declared scopes
//!    (`cacheScopes:`) are too, but cost nothing until read: the first read within one — a
//!    named one too, the kubelet's of its own Node — starts its cache, which then serves every
//!    read it contains (a node's kubelet and kube-proxy, whose selectors differ, share one
//!    cache of services). Started by its first reader, it costs what that reader would
//!    directly, and needs no freshness proof for it.
//!
//! A list read alone (no watch after it) is the one reader that costs less directly than the
//! cache it starts, by the cache's events until it is stopped for idleness (`cacheIdleTimeout`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::disk::{DiskConfig, DiskStates, StandBy};
use super::feed::{self, Feed};
pub use super::freshness::FreshnessConfig;
use super::freshness::{Clock, Freshness};
use super::metrics::UpstreamMetrics;
use super::mirror::Mirror;
use super::reflector::fed::Feeder;
use super::reflector::{FirstLoad, Reflector};
use crate::cache::fanout::WatchConfig;
use crate::cache::metrics::CacheMetrics;
use crate::cache::persist::DiskState;
use crate::cache::resource::ResourceCache;
use crate::cache::store::StoreLimits;
use crate::cache::{Encoding, Scope};
use crate::upstream::Upstream;
use crate::wire::resource::ResourceInfo;
use crate::wire::selector::field::FieldSelector;

/// Tunables of the caches (see `config`).
#[derive(Debug, Clone)]
pub struct CachesConfig {
    pub limits: StoreLimits,
    /// Caches started at start-up (`pods`, `apps/v1/deployments`, `pods:protobuf`).
    pub preload: Vec<String>,
    /// Scopes declared for caches started by reads (`cacheScopes`): a read within one starts
    /// the cache of that scope, rather than one of its own, the first time it is read (same
    /// spec syntax as `preload`; see "What a cache may cost").
    pub scopes: Vec<String>,
    /// A cache nobody read for this long is stopped (its memory and upstream watch freed).
    pub idle_timeout: Duration,
    pub watch: WatchConfig,
    /// How reads wait for a cold cache and prove a warm one fresh.
    pub freshness: FreshnessConfig,
    /// How long a group-version's discovery answer is used before it is refreshed (it stays
    /// in use while the refresh fails: `live::discovery`). Default
    /// `live::discovery::DISCOVERY_TTL`.
    pub discovery_ttl: Duration,
    /// Caches' states on local disk, for restarts during outages (`live::disk`).
    pub disk: DiskConfig,
    /// At most this many bytes of objects in all caches together (`None`: no limit); see
    /// [`budget`].
    pub memory_budget: Option<usize>,
    /// Caches of namespaced resources list and watch this namespace only, and answer only
    /// reads within it (a sidecar whose ServiceAccount has a Role there, not a ClusterRole);
    /// other reads of those resources pass through. `None`: cluster-wide.
    pub namespace: Option<String>,
}

mod budget;
mod lookup;
mod maintenance;
mod refusal;
mod rendered;
mod spec;

pub use refusal::RefusedStatus;
pub use spec::CacheSpec;

type CacheKey = (String, String, String, Encoding, Scope);

/// At most this many caches of one resource and encoding are started by reads (each scope its
/// own): clients choosing selectors cannot make kubeplex hold watches without bound. Past it,
/// reads of new scopes pass through (costing the upstream what they would directly).
pub const MAX_SCOPES_PER_RESOURCE: usize = 64;

fn key_of(info: &ResourceInfo, encoding: Encoding, scope: Scope) -> CacheKey {
    (info.group.clone(), info.version.clone(), info.resource.clone(), encoding, scope)
}

/// See `cache::resource::STALE_AFTER`.
const UPSTREAM_QUIET: Duration = crate::cache::resource::STALE_AFTER;

/// A running cache: its state, the freshness proofs of its reads, and the tasks that feed it
/// (the reflector) and keep it healthy (the slow-watcher sweeper). Dereferences to the state.
pub struct Live {
    pub cache: Arc<ResourceCache>,
    pub freshness: Arc<Freshness>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// For a cache started by a read that feeds its first load ([`FirstLoad::Fed`]): what that
    /// read sends its answer to, until it takes it ([`Live::take_feeder`]).
    feeder: Mutex<Option<Feeder>>,
    /// The caches of the same resource and scope in the other encoding it feeds (`live::mirror`).
    mirror: Arc<Mirror>,
    /// Asks the reflector that feeds it for a reload (its freshness proofs' last resort).
    reload: tokio::sync::watch::Sender<u64>,
    /// For a cache fed by another encoding's (`live::mirror`): that cache's key.
    source: Option<CacheKey>,
}

impl std::ops::Deref for Live {
    type Target = ResourceCache;

    fn deref(&self) -> &ResourceCache {
        &self.cache
    }
}

impl Live {
    /// What the answer to the read that started this cache feeds its first load with, once:
    /// `None` if the cache does not wait for one, or another read took it.
    pub fn take_feeder(&self) -> Option<Feeder> {
        self.feeder.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The encoding it is rendered from, when another encoding's cache feeds it
    /// (`live::mirror`).
    pub fn rendered_from(&self) -> Option<Encoding> {
        self.source.as_ref().map(|k| k.3)
    }

    /// Aborts its tasks and ends its watchers; `others`: how many caches of the same resource
    /// and encoding still run.
    fn stop(&self, others: usize) {
        self.freeze();
        self.cache.close(others);
    }

    /// Aborts its tasks (its reflector first): its state no longer changes, its watchers go on.
    fn freeze(&self) {
        for task in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}

/// Every live cache, keyed by (group, version, resource, encoding).
pub struct Caches {
    upstream: Arc<Upstream>,
    metrics: CacheMetrics,
    upstream_metrics: UpstreamMetrics,
    config: CachesConfig,
    map: Mutex<HashMap<CacheKey, Arc<Live>>>,
    /// The state directory, when configured.
    disk: Option<Arc<DiskStates>>,
    /// States read from disk at start-up, each for its cache's first load (taken when the
    /// cache starts).
    stashed: Mutex<HashMap<CacheKey, DiskState>>,
    /// Caches refused by the memory budget, until they may be tried again.
    refused: Mutex<HashMap<CacheKey, refusal::Refusal>>,
    /// Itself, for the feeds of its caches (the budget's check at each load).
    me: Weak<Caches>,
    /// Discovery, told when a cache finds its resource no longer served ([`Caches::follow`]).
    discovery: std::sync::OnceLock<crate::live::discovery::Resources>,
    /// The upstream's current RV, shared by every cache's freshness proofs.
    clock: Arc<Clock>,
    /// `config.scopes`, read: each spec and its scope across namespaces.
    declared: Vec<(CacheSpec, Scope)>,
    /// Resources (group, version, resource) whose caches in an encoding keep a list+watch of
    /// their own: a cache rendered from the other encoding's met an object the schema cannot
    /// render exactly (`live::mirror`).
    own_watch: Mutex<HashSet<(String, String, String, Encoding)>>,
    /// The node whose own pods' and Node's caches load as that node, and the upstream that
    /// acts as it ([`Caches::act_as_node`]).
    as_node: std::sync::OnceLock<(String, Arc<Upstream>)>,
}

impl Caches {
    /// Loads the caches of `node`'s own pods (`spec.nodeName=NODE`) and Node
    /// (`metadata.name=NODE`) as `system:node:NODE` (`Upstream::acting_as`: the
    /// associated-node form of constrained impersonation), their list, watch and freshness
    /// proofs alike: a node tier whose credential is bound to its node then needs no read of
    /// every pod or Node, and the upstream authorizes those reads as the node's own. Set once,
    /// before any cache starts.
    pub fn act_as_node(&self, node: &str) {
        if let Some(upstream) = self.upstream.acting_as(&format!("system:node:{node}")) {
            let _ = self.as_node.set((node.to_string(), Arc::new(upstream)));
        }
    }

    /// The upstream a cache of `info` within `scope` loads through: acting as the node when
    /// the scope is that node's own pods or Node ([`Caches::act_as_node`]).
    fn upstream_for(&self, info: &ResourceInfo, scope: &Scope) -> Arc<Upstream> {
        let Some((node, acting)) = self.as_node.get() else { return self.upstream.clone() };
        let field = match (info.group.as_str(), info.resource.as_str()) {
            ("", "pods") => "spec.nodeName",
            ("", "nodes") => "metadata.name",
            _ => return self.upstream.clone(),
        };
        let own = scope
            .field_selector()
            .and_then(|s| FieldSelector::parse(&s).ok())
            .is_some_and(|s| s.exact_value(field) == Some(node.as_str()));
        if own {
            acting.clone()
        } else {
            self.upstream.clone()
        }
    }

    /// An empty cache of `info` in `encoding` for `scope`, with this set's limits and metrics
    /// (a cache of its own or a rendered one alike).
    fn new_cache(
        &self,
        info: &Arc<ResourceInfo>,
        encoding: Encoding,
        scope: Scope,
    ) -> Arc<ResourceCache> {
        Arc::new(
            ResourceCache::new(
                info.clone(),
                encoding,
                self.config.limits,
                self.config.watch,
                self.metrics.clone(),
            )
            .scoped(scope),
        )
    }

    pub fn new(
        upstream: Arc<Upstream>,
        metrics: CacheMetrics,
        upstream_metrics: UpstreamMetrics,
        config: CachesConfig,
    ) -> Arc<Self> {
        Caches::with_disk(upstream, metrics, upstream_metrics, config, None)
    }

    /// [`Caches::new`] with a state directory.
    pub fn with_disk(
        upstream: Arc<Upstream>,
        metrics: CacheMetrics,
        upstream_metrics: UpstreamMetrics,
        config: CachesConfig,
        disk: Option<Arc<DiskStates>>,
    ) -> Arc<Self> {
        metrics.budget_bytes.set(config.memory_budget.unwrap_or(0) as i64);
        let declared = config
            .scopes
            .iter()
            .filter_map(|s| CacheSpec::parse(s).ok())
            .map(|spec| {
                let scope = Scope::parse(
                    &spec.group,
                    &spec.resource,
                    None,
                    spec.label_selector.as_deref(),
                    spec.field_selector.as_deref(),
                )
                .unwrap_or_default();
                (spec, scope)
            })
            .collect();
        Arc::new_cyclic(|me| Caches {
            upstream,
            metrics,
            upstream_metrics,
            config,
            map: Mutex::new(HashMap::new()),
            disk,
            stashed: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            me: me.clone(),
            discovery: std::sync::OnceLock::new(),
            clock: Clock::new(),
            declared,
            own_watch: Mutex::new(HashSet::new()),
            as_node: std::sync::OnceLock::new(),
        })
    }

    /// The state directory, when configured.
    pub fn disk(&self) -> Option<&Arc<DiskStates>> {
        self.disk.as_ref()
    }

    /// Keeps states read from disk for their caches' first loads.
    pub fn stash(&self, states: Vec<DiskState>) {
        let mut stashed = self.stashed.lock().unwrap_or_else(|p| p.into_inner());
        for state in states {
            let key = key_of(&state.info, state.encoding, state.scope.clone());
            stashed.insert(key, state);
        }
    }

    /// Every running cache's state (for writing them to disk).
    pub fn running(&self) -> Vec<Arc<ResourceCache>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.values().map(|live| live.cache.clone()).collect()
    }

    /// How many caches in `map` are of `key`'s resource and encoding, whatever their scope.
    fn same_resource(map: &HashMap<CacheKey, Arc<Live>>, key: &CacheKey) -> usize {
        map.keys().filter(|k| (&k.0, &k.1, &k.2, k.3) == (&key.0, &key.1, &key.2, key.3)).count()
    }

    /// The cache of a resource in an encoding and scope, started (list+watch upstream) if it
    /// is not running yet. Only one is ever started per key, whatever the number of callers.
    /// `None` while the memory budget refuses it: its reads pass through.
    pub fn get_or_start(
        &self,
        info: &Arc<ResourceInfo>,
        encoding: Encoding,
        scope: Scope,
    ) -> Option<Arc<Live>> {
        self.start(info, encoding, scope, FirstLoad::Stream)
    }

    /// [`Caches::get_or_start`], loading first as `first` says.
    fn start(
        &self,
        info: &Arc<ResourceInfo>,
        encoding: Encoding,
        scope: Scope,
        first: FirstLoad,
    ) -> Option<Arc<Live>> {
        let key = key_of(info, encoding, scope.clone());
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&key) {
            c.touch();
            return Some(c.clone());
        }
        if self.is_refused(&key) {
            return None;
        }
        if let Some((live, attach)) = self.start_rendered(info, encoding, &scope, &mut map) {
            // Attached once the map is free: the source's feed may need it (the budget's
            // check of a load) while its mirror is locked.
            drop(map);
            attach.run(&live);
            return Some(live);
        }
        let upstream = self.upstream_for(info, &scope);
        let cache = self.new_cache(info, encoding, scope);
        let calls = self.upstream_metrics.for_cache(cache.label(), encoding.as_str());
        let (reload, reloads) = tokio::sync::watch::channel(0);
        let freshness = Arc::new(Freshness::new(
            upstream.clone(),
            Arc::downgrade(&cache),
            self.config.freshness,
            calls.clone(),
            self.clock.clone(),
            reload.clone(),
        ));
        // The reflector's events are applied to the cache as they are read (`live::feed`);
        // with a state directory, a state read from disk stands by for the first load.
        // A recent one (a restart) is resumed from instead (`live::reflector::resume`).
        let fed = cache.clone();
        let mut resume = None;
        let apply: Box<dyn Fn(Feed) + Send + Sync> = match &self.disk {
            Some(disk) => {
                let state = self.stashed.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                let recent = state.as_ref().is_some_and(super::disk::resumable);
                let standby: StandBy = Arc::new(Mutex::new(state));
                if recent {
                    resume = Some(standby.clone());
                }
                Box::new(disk.feed(fed, standby))
            }
            None => Box::new(move |event| feed::apply(&fed, event)),
        };
        // Each load is weighed against the memory budget before it is applied; then the caches
        // of the other encoding rendered from this one are fed (`live::mirror`).
        let mirror = Arc::new(Mirror::default());
        let feed = mirror.sink(self.weighed(key.clone(), cache.clone(), apply));
        let reflector = Reflector::new(upstream, info.clone(), encoding, calls, feed)
            .within(cache.collection_path(), cache.selector_query())
            .first_load(first)
            .reloaded_by(reloads);
        let reflector = match resume {
            Some(standby) => reflector.resume_from(standby),
            None => reflector,
        };
        // Its first load from the answer to the read that started it (`reflector::fed`).
        let (reflector, feeder) = match first {
            FirstLoad::Fed { .. } => {
                let (feeder, fed_by) = tokio::sync::oneshot::channel();
                (reflector.fed_by(fed_by), Some(feeder))
            }
            _ => (reflector, None),
        };
        let reflector = tokio::spawn(reflector.run());
        let sweeper = self.sweeper(&cache);
        tracing::info!(resource = %cache.describe(), "cache started");
        let tasks = Mutex::new(vec![reflector, sweeper]);
        let feeder = Mutex::new(feeder);
        let live = Arc::new(Live { cache, freshness, tasks, feeder, mirror, reload, source: None });
        map.insert(key, live.clone());
        Some(live)
    }

    /// The task that ends `cache`'s slow watchers.
    fn sweeper(&self, cache: &Arc<ResourceCache>) -> JoinHandle<()> {
        let cache = Arc::downgrade(cache);
        let every = (self.config.watch.slow_after / 4)
            .clamp(std::time::Duration::from_millis(50), std::time::Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                match cache.upgrade() {
                    Some(c) => c.end_slow_watchers(),
                    None => return,
                }
            }
        })
    }

    /// The namespace the caches of namespaced resources are limited to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.config.namespace.as_deref()
    }

    /// How reads wait for these caches.
    pub fn freshness_config(&self) -> FreshnessConfig {
        self.config.freshness
    }

    /// Stops caches idle longer than the configured timeout. Run periodically.
    pub fn reap_idle(&self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let idle: Vec<CacheKey> = map
            .iter()
            .filter(|(_, c)| {
                // A cache that has not heard from the upstream for a while may be all there
                // is of that resource during an outage: it is kept until the upstream is back.
                let cut_off = c.upstream_silent_for() > UPSTREAM_QUIET;
                !(c.is_pinned()
                    || c.idle_for() < self.config.idle_timeout
                    || c.has_watchers()
                    || c.mirror.has_twins()
                    || cut_off)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in idle {
            if let Some(c) = map.remove(&key) {
                c.stop(Self::same_resource(&map, &key));
                tracing::info!(resource = %c.describe(), "idle cache stopped");
            }
        }
    }

    /// Stops every cache's reflector, so that what is written to disk at shutdown is each
    /// cache's last state, at the RV its watchers' last bookmark carries
    /// ([`Caches::stop_all`]).
    pub fn freeze_all(&self) {
        for c in self.map.lock().unwrap_or_else(|p| p.into_inner()).values() {
            c.freeze();
        }
    }

    /// Stops every cache (shutdown).
    /// Tells `discovery` when a cache finds its resource no longer served (a CRD deleted):
    /// what it knows of that group-version is asked for again.
    pub fn follow(&self, discovery: crate::live::discovery::Resources) {
        let _ = self.discovery.set(discovery);
    }

    pub fn stop_all(&self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        for c in map.values() {
            c.stop(0);
        }
        map.clear();
    }

    /// Pinned caches not synced yet, plus configured ones not even started (by spec).
    pub fn unsynced_pinned(&self, specs: &[String]) -> Vec<String> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let pinned: Vec<_> = map.values().filter(|c| c.is_pinned()).collect();
        let mut pending: Vec<String> =
            pinned.iter().filter(|c| !c.is_synced()).map(|c| c.describe()).collect();
        // A configured cache the memory budget refused is not waited for.
        if pinned.len() + self.refused_pinned() < specs.len() {
            pending.push(format!("{} configured cache(s) not started", specs.len() - pinned.len()));
        }
        pending
    }

    /// Every running cache at a glance, by resource.
    pub fn status(&self) -> Vec<crate::cache::resource::CacheStatus> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = map
            .values()
            .map(|c| crate::cache::resource::CacheStatus {
                rendered_from: c.rendered_from().map(Encoding::as_str),
                ..c.status()
            })
            .collect();
        drop(map);
        all.sort_by(|a, b| {
            let key = |s: &crate::cache::resource::CacheStatus| {
                (
                    s.resource.clone(),
                    s.encoding,
                    s.namespace.clone(),
                    s.label_selector.clone(),
                    s.field_selector.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        all
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
