//! Proving a cache fresh enough for a consistent read, through the apiserver's public API
//! (docs/design.md §5).
//!
//! A consistent read (resourceVersion unset: `kubectl get`, client-go's WatchList informers)
//! must see every write that completed before it arrived. The cache learns the upstream's
//! progress only from its own watch — events, and bookmarks about once a minute — so on a quiet
//! resource its RV lags the cluster's and it cannot tell whether it is current. The proof, from
//! facts measured on kube-apiserver 1.36 (`fixtures/bookmark-probe-timing.json`):
//!
//! 1. **The upstream's current RV R**: a LIST with `limit=1` and resourceVersion unset is a
//!    consistent read; its `metadata.resourceVersion` is etcd's current revision, and afterwards
//!    the apiserver's own watch cache of that resource has reached R. RVs are the cluster's, so
//!    one such list is shared by every read that arrived before it was sent, of whichever cache
//!    ([`Clock`]: one is in flight at a time, the next one gathers everyone waiting meanwhile).
//! 2. **The cache reaching R**: when the cache's own watch brings it to R (a busy resource) the
//!    proof is done. Otherwise a **probe**: a WATCH from the cache's RV C with
//!    `allowWatchBookmarks=true&timeoutSeconds=3` gets every event of the resource in (C, R′]
//!    and then a BOOKMARK at the watch cache's RV R′ ≥ R, 2 s before its deadline on the
//!    apiserver's 1 s bookmark tick (1–2 s in; `timeoutSeconds=2` would get none). Once the cache
//!    holds the last event the probe saw (its own watch delivers the same events), no event of
//!    the resource lies between it and R′: the cache is at R′ ([`ResourceCache::mark_progress`]).
//!    One probe runs per cache at a time, shared by every read waiting on it. A probe reads
//!    metadata only (`PartialObjectMetadata`), so it costs the upstream a few bytes per event.
//!    The bookmark carries the probed resource's watch-cache RV, which reaches R only once the
//!    apiserver has asked etcd for that resource's progress: when R came from a list of another
//!    resource, a list of this one comes first ([`Clock::progress`]; one per resource, shared by
//!    all its caches, and none when a list of it already reached R).
//!
//! **A metadata list, for a read of about all of a small quiet cache** (the kubelet's watch of
//! each ConfigMap and Secret its pods use, a node's watch of its Node, another tier's `limit=1`
//! current-RV list of a small resource; [`listing`]: the cache's objects come to at most the
//! read's own and 16 KiB, the slack a reload is allowed): one consistent list of the cache's
//! scope, metadata only, answered at once and shared by the reads that join it before it is
//! sent ([`Freshness::consistent_listed`]); once the cache holds every
//! listed object at its listed RV and nothing the list lacks, its state is the upstream's at
//! the list's RV, where the read is answered (a watch starts there; a list is served at it).
//! A not-older-than read past the cache's RV (an RV from another resource) is proven the same
//! way where its listing is as cheap ([`listing`]): the list is a consistent read, its RV at
//! least the read's, and no probe waits for a bookmark. A pool tier gets such reads from every node as pods land and as node tiers start: a reload
//! per read would send the whole cache as events each time, a probe would hold each ~1.5 s,
//! passing them through costs one request each. A busy cache is proven by the clock's list
//! first, which the reads of every other cache share.
//!
//! **A reload instead of a probe, for a small cache a read covers**: when a consistent watch of
//! a quiet cache whose objects are small and mostly the read's own (a node's own pods, its
//! Node, the services kube-proxy watches) would need a probe, the cache is reloaded instead —
//! one streaming list, the very request the reader would make directly, answered at once —
//! rather than a list of its resource and a probe (two requests, ~1.5 s). Every consistent read
//! that arrived before the reload was requested shares it; watchers of the cache get its
//! differences as a relist's events.
//!
//! A read that cannot be proven within its budget passes through (always correct).
//!
//! The serving side asks for a proof of consistent lists, consistent watches and WatchLists
//! ([`Freshness::prove`], the one call it makes for them), and of not-older-than reads past
//! the cache's RV, and decides how long a read waits for it. A consistent *get* passes
//! through: it costs the upstream one small request either way (the proof's `limit=1` list, or
//! the get itself), and the get is faster.
//!
//! - [`cost`]: what each proof of a read ([`ConsistentRead`]) may cost — no more than the read
//!   directly — by which [`Freshness::prove`] chooses: a metadata list, a reload, a probe;
//! - this file: each proof ([`Freshness`]: a load since it arrived, the cache's own watch, a
//!   reload, a metadata list, a probe) and the waits between them;
//! - [`lists`]: the consistent lists the proofs send (the current RV's `limit=1` list, a
//!   cache's metadata list), read as [`metadata_list`] says; [`probe`]: the bookmark probe;
//! - [`clock`]: the upstream's current RV, shared by every cache's proofs; [`gather`]: one
//!   request at a time, shared by the reads that come before it is sent;
//! - [`outcome`]: what a proof concluded ([`Proven`], [`NotProven`]); [`config`]: how long
//!   reads wait ([`FreshnessConfig`]).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

mod clock;
mod config;
mod cost;
mod gather;
mod lists;
mod metadata_list;
mod outcome;
mod probe;

pub use clock::Clock;
pub use config::FreshnessConfig;
pub use cost::{listing, ConsistentRead, Listing};
use gather::Gathered;
use metadata_list::Listed;
pub use outcome::{NotProven, Proof, Proven};

use super::metrics::CallCounters;
use crate::cache::resource::ResourceCache;
use crate::upstream::Upstream;

/// How long the cache's own watch is given to reach R before a probe is started: on a busy
/// resource the events up to R are already on their way.
const WATCH_GRACE: Duration = Duration::from_millis(50);
/// A cache whose watch brought this many events within this long (20 a second, one per
/// [`WATCH_GRACE`]) is busy: its own watch, rather than a metadata list of its own, likely
/// brings it to the clock's RV in a moment ([`Freshness::consistent_listed`]).
const BUSY: (Duration, usize) = (Duration::from_millis(250), 5);

/// A result every waiter of one single-flight operation gets: `None` while it runs.
type Shared<T> = watch::Receiver<Option<T>>;

/// The freshness proofs of one cache.
pub struct Freshness {
    upstream: Arc<Upstream>,
    cache: Weak<ResourceCache>,
    config: FreshnessConfig,
    /// Its upstream calls, counted by verb (`proof_list`, `proof_watch`).
    calls: CallCounters,
    /// The upstream's current RV, shared with every other cache's proofs.
    clock: Arc<Clock>,
    /// `group/resource`: whose watch cache at the apiserver a list of this cache moves.
    resource: String,
    /// Bumped to ask the cache's reflector for a reload (`Reflector::reloaded_by`).
    reload: watch::Sender<u64>,
    /// The probe under way; its result says whether it moved the cache.
    probe: Mutex<Option<Shared<bool>>>,
    /// The highest RV a probe has moved the cache to (set before the cache moves, so a reader
    /// woken by the move can tell who moved it).
    probed_to: AtomicU64,
    /// The metadata lists of the cache (or of one namespace of it): one in flight at a time,
    /// shared by the reads that join it before it is sent, and the last one's answer
    /// ([`Freshness::listed`]).
    listings: Arc<Listings>,
    /// The metadata lists of one namespace each, for a cache too large to list whole for a
    /// read of a namespace of few objects ([`Freshness::listed`]): shared by the reads of that
    /// namespace only, so that they never widen to the whole cache, and sent when their
    /// gathering ends even while the one before is in flight (`Gathered::overlapping`: a pool
    /// proving 20 nodes' kubelets' watches in one namespace one list at a time made each wait
    /// ~0.9 s). Bounded; one idle for a minute is dropped.
    namespace_listings: moka::sync::Cache<String, Arc<Listings>>,
}

/// A cache's metadata lists: one in flight, shared by the reads that join it, each saying the
/// namespace it reads (`None`: all).
type Listings = Gathered<Arc<Listed>, Option<String>>;

/// Namespaces whose metadata lists are kept apart at once, at most (`namespace_listings`).
const NAMESPACE_LISTINGS: u64 = 4096;

impl Freshness {
    pub fn new(
        upstream: Arc<Upstream>,
        cache: Weak<ResourceCache>,
        config: FreshnessConfig,
        calls: CallCounters,
        clock: Arc<Clock>,
        reload: watch::Sender<u64>,
    ) -> Self {
        let resource = cache
            .upgrade()
            .map(|c| format!("{}/{}", c.info().group, c.info().resource))
            .unwrap_or_default();
        Freshness {
            upstream,
            cache,
            config,
            calls,
            clock,
            resource,
            reload,
            probe: Mutex::new(None),
            probed_to: AtomicU64::new(0),
            listings: Arc::default(),
            namespace_listings: moka::sync::Cache::builder()
                .max_capacity(NAMESPACE_LISTINGS)
                .time_to_idle(Duration::from_secs(60))
                .build(),
        }
    }

    /// Its metadata lists are `source`'s, shared: a cache rendered from `source`
    /// (`live::mirror`) has its scope and follows it at its RVs, and a metadata list is of the
    /// scope, whatever the encoding — so the reads of both that come together are proven by one
    /// list, not one per encoding (measured at a pool with JSON and protobuf readers of every
    /// endpoint slice: 165 and 163 proof lists per replica at 1,000 node tiers' start).
    pub fn sharing_lists_of(mut self, source: &Freshness) -> Self {
        self.listings = source.listings.clone();
        self.namespace_listings = source.namespace_listings.clone();
        self
    }

    /// Proves `read` by `deadline`: that the cache holds the upstream's state as of its arrival;
    /// how, and the metadata list it was proven by if it was. For a read of about all of a
    /// small cache, or of its namespace in it (a kubelet's watch of one ConfigMap in a
    /// namespace of few, a node's list or watch of its Node or pods, the services kube-proxy
    /// reads, another tier's `limit=1` current-RV list: [`listing`]), a metadata list of that,
    /// which costs the upstream no more than the read would directly; else the cache's own
    /// proof — for a list, a probe only where the scope is large enough to be worth one
    /// (`probeMinListBytes`: a small list passes through rather than wait for it); for a
    /// watch, a reload for a small cache the watch mostly covers.
    pub async fn prove(
        self: &Arc<Self>,
        cache: &ResourceCache,
        read: &ConsistentRead<'_>,
        deadline: Instant,
    ) -> Result<(Proven, Option<Listing>), NotProven> {
        let (filter, arrived) = (read.filter, read.arrived);
        let namespace = filter.namespace.as_deref();
        if let Some(listing) = cost::listing(cache, read.namespaced, filter, read.limit) {
            let narrow = listing == Listing::Namespace;
            let proven =
                self.consistent_listed(cache, namespace, narrow, arrived, deadline).await?;
            return Ok((proven, Some(listing)));
        }
        let proven = if read.watch {
            let reload = || cost::reload_covers(cache, read.namespaced, filter);
            self.consistent(cache, arrived, deadline, || true, reload).await?
        } else {
            let min_bytes = self.config.probe_min_list_bytes;
            let worth_it = || cost::scope_bytes(&cache.current(), namespace) >= min_bytes;
            self.consistent(cache, arrived, deadline, worth_it, || false).await?
        };
        Ok((proven, None))
    }

    /// The budget of a proof.
    pub fn budget(&self) -> Duration {
        self.config.consistent_wait
    }

    /// Waits until the cache holds a state at least as new as the upstream's when the read
    /// arrived (at `arrived`); how that was shown, or why not by `deadline`. `probe_worth_it`
    /// is asked, only when a probe of its own would be needed, whether the read is worth one;
    /// `reload_worth_it`, first, whether a reload would cost no more than the read directly.
    pub async fn consistent(
        self: &Arc<Self>,
        cache: &ResourceCache,
        arrived: std::time::Instant,
        deadline: Instant,
        probe_worth_it: impl FnOnce() -> bool,
        reload_worth_it: impl FnOnce() -> bool,
    ) -> Result<Proven, NotProven> {
        if cache.loaded_since(arrived) {
            return Ok(Proven::loaded());
        }
        let current = match tokio::time::timeout_at(deadline, self.current_rv(arrived)).await {
            Ok(Some(rv)) => rv,
            // Its list failed: because the upstream is overloaded (a read passed on would add
            // to it), or for another reason.
            Ok(None) if self.overloaded_recently() => return Err(NotProven::Overloaded),
            _ => return Err(NotProven::Timeout),
        };
        // A load requested while the list was in flight may have answered already.
        if cache.loaded_since(arrived) {
            return Ok(Proven::loaded());
        }
        let at = |proof| Proven::at(proof, current);
        if let Some(proof) = self.by_watch(cache, current, deadline).await {
            return Ok(at(proof));
        }
        if reload_worth_it() {
            // The reloaded state is what the read is answered at.
            let reloaded = |proof| Proven { proof, ..Proven::loaded() };
            return self.reload(cache, arrived, deadline).await.map(reloaded);
        }
        self.probe_until(cache, current, deadline, probe_worth_it).await.map(at)
    }

    /// [`Freshness::consistent`] by a metadata list of the cache ([`Freshness::listed`]), for a
    /// read of about all of a small cache — the kubelet's watch of each ConfigMap and Secret its
    /// pods use, a node's watch of its Node, another tier's `limit=1` list: one small request,
    /// answered at once, shared by the reads that come with it, instead of a reload of the
    /// cache per read (each of its objects as an event), a bookmark probe (~1.5 s) or a pass
    /// through per read. When a shared list sent since the read arrived already shows the cache
    /// current, no request; a busy cache tries the clock's shared list first. `namespace`: the
    /// one the read is of, if any (a list of that namespace is enough, when no read of another
    /// joins it). `narrow`: the list is of that namespace whatever other reads want, shared
    /// only with the reads of that namespace (a cache too large to list whole for the read).
    pub async fn consistent_listed(
        self: &Arc<Self>,
        cache: &ResourceCache,
        namespace: Option<&str>,
        narrow: bool,
        arrived: std::time::Instant,
        deadline: Instant,
    ) -> Result<Proven, NotProven> {
        // An empty namespace is every one.
        let namespace = namespace.filter(|ns| !ns.is_empty());
        if cache.loaded_since(arrived) {
            return Ok(Proven::loaded());
        }
        if let Some(rv) = self.clock.sent_since(arrived) {
            if cache.resource_version() >= rv {
                return Ok(Proven::at(Proof::Cache, rv));
            }
        }
        // A cache its upstream keeps busy reaches the current RV through its own watch in a
        // moment: the clock's list, shared with the reads of every other cache, is then the
        // whole proof. The metadata list is one per cache, for a quiet one.
        let recently = std::time::Instant::now().checked_sub(BUSY.0);
        if recently.is_some_and(|t| cache.events_received_since(t, BUSY.1) >= BUSY.1) {
            let current = tokio::time::timeout_at(deadline, self.current_rv(arrived)).await;
            if let Ok(Some(rv)) = current {
                if let Some(proof) = self.by_watch(cache, rv, deadline).await {
                    return Ok(Proven::at(proof, rv));
                }
            }
        }
        self.listed(cache, namespace, narrow, arrived, deadline).await
    }

    /// The cache shown to hold the upstream's state as of `arrived` by one consistent list of
    /// its whole scope, metadata only, sent after the read arrived and shared by every read
    /// that joins it before it is sent ([`gather::GATHER`]): once the cache holds each listed
    /// object at its listed RV and nothing else, its state is the upstream's at the list's RV R
    /// ([`Proven::cache_at`]). The cache is not moved to R: an object created and deleted
    /// between the two, whose events are still on their way, would be lost to its other
    /// watchers; the read alone starts at R. One request, answered at once, and no object
    /// bodies — where a reload would send each object as an event, and a probe take ~1.5 s.
    async fn listed(
        self: &Arc<Self>,
        cache: &ResourceCache,
        namespace: Option<&str>,
        narrow: bool,
        arrived: std::time::Instant,
        deadline: Instant,
    ) -> Result<Proven, NotProven> {
        let list = self.metadata_list(namespace, narrow, arrived);
        let listed = match tokio::time::timeout_at(deadline, list).await {
            Ok(Some(listed)) => listed,
            // Its list failed: because the upstream is overloaded, or for another reason.
            Ok(None) if self.overloaded_recently() => return Err(NotProven::Overloaded),
            _ => return Err(NotProven::Timeout),
        };
        let mut moved = cache.watch_rv();
        loop {
            if cache.loaded_since(arrived) {
                return Ok(Proven::loaded());
            }
            if cache.resource_version() >= listed.rv {
                return Ok(Proven::at(Proof::Listed, listed.rv));
            }
            // Synced and not loading: a state a proof may speak of.
            if cache.probe_start().is_some() {
                let snap = cache.current();
                if listed.held_by(&snap) {
                    let cache_at = Some(snap.resource_version());
                    return Ok(Proven { proof: Proof::Listed, at: Some(listed.rv), cache_at });
                }
            }
            if tokio::time::timeout_at(deadline, moved.changed()).await.is_err() {
                return Err(NotProven::Timeout);
            }
        }
    }

    /// A metadata list sent at or after `arrived` that shows what a read of `namespace` needs
    /// ([`Gathered::get_for`]): of that namespace when every read that joins it is of that one
    /// (a kubelet's watch of a ConfigMap: its namespace's few, not the cluster's), else of the
    /// cache's scope. Its RV is the clock's newest sample too.
    async fn metadata_list(
        self: &Arc<Self>,
        namespace: Option<&str>,
        narrow: bool,
        arrived: std::time::Instant,
    ) -> Option<Arc<Listed>> {
        let listings = match namespace.filter(|_| narrow) {
            Some(ns) => {
                self.namespace_listings.get_with_by_ref(ns, || Arc::new(Gathered::overlapping()))
            }
            None => self.listings.clone(),
        };
        let this = self.clone();
        let fetch = move |sent,
                          needs: Vec<Option<String>>|
              -> futures_util::future::BoxFuture<'static, Option<Arc<Listed>>> {
            Box::pin(async move {
                let one = needs.first().cloned().flatten();
                let namespace = one.filter(|ns| needs.iter().all(|n| n.as_ref() == Some(ns)));
                let listed = this.fetch_metadata_list(namespace).await.map(Arc::new);
                if let Some(l) = &listed {
                    this.clock.sampled(&this.resource, sent, l.rv);
                }
                listed
            })
        };
        let needs = namespace.map(str::to_string);
        listings.get_for(arrived, needs, |l| l.covers(namespace), fetch).await
    }

    /// The cache reloaded by a load requested since the read arrived: asked for unless one is
    /// under way, and shared by every read that arrived before it was requested.
    async fn reload(
        &self,
        cache: &ResourceCache,
        arrived: std::time::Instant,
        deadline: Instant,
    ) -> Result<Proof, NotProven> {
        if !cache.loading_since(arrived) {
            self.reload.send_modify(|n| *n += 1);
        }
        match cache.wait_loaded_since(arrived, deadline).await {
            true => Ok(Proof::Reload),
            false => Err(NotProven::Timeout),
        }
    }

    /// Whether the cache is at `rv` already, or its own watch brings it there within a moment.
    async fn by_watch(&self, cache: &ResourceCache, rv: u64, deadline: Instant) -> Option<Proof> {
        if cache.resource_version() >= rv {
            return Some(Proof::Cache);
        }
        let grace = deadline.saturating_duration_since(Instant::now()).min(WATCH_GRACE);
        cache.wait_for(rv, grace).await.ok().map(|_| Proof::Watch)
    }

    /// The upstream's current RV, from a consistent `limit=1` list sent after this call (of
    /// this cache's resource, or shared with another's: [`Clock::current_rv`]).
    pub async fn current_rv(self: &Arc<Self>, arrived: std::time::Instant) -> Option<u64> {
        self.clock.current_rv(&self.resource, arrived, self.fetch()).await
    }

    /// Waits until the cache has reached `rv` for a not-older-than read, as the apiserver's
    /// watch cache waits until `deadline`: through its own watch, or — when the upstream is
    /// already past `rv` (an RV taken from another resource, on a quiet one) — through a probe.
    /// An `rv` the upstream has not reached either is waited for to the end.
    pub async fn not_older_than(
        self: &Arc<Self>,
        cache: &ResourceCache,
        rv: u64,
        deadline: Instant,
    ) -> Result<Proof, NotProven> {
        if let Some(proof) = self.by_watch(cache, rv, deadline).await {
            return Ok(proof);
        }
        if !self.budget().is_zero() {
            let proof_deadline = deadline.min(Instant::now() + self.budget());
            let now = std::time::Instant::now();
            let current = tokio::time::timeout_at(proof_deadline, self.current_rv(now)).await;
            if matches!(current, Ok(Some(current)) if current >= rv) {
                if let Ok(proof) = self.probe_until(cache, rv, proof_deadline, || true).await {
                    return Ok(proof);
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        cache.wait_for(rv, left).await.map(|_| Proof::Watch).map_err(|_| NotProven::Timeout)
    }
}

#[cfg(test)]
mod tests;
