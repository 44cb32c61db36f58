//! Waiting for a cache instead of passing a read through: a cold cache's first sync, and the
//! freshness proof of consistent and not-older-than reads (see `live::freshness`). Each
//! wait is bounded (`FreshnessConfig`) and counted in `kubeplex_cache_sync_*` and
//! `kubeplex_freshness_*`.

use std::time::Duration;

use tokio::time::Instant;

use crate::cache::fanout::Filter;
use crate::cache::resource::ResourceCache;
use crate::cache::select::{self, Query};
use crate::cache::store::Snapshot;
use crate::live::caches::Live;
use crate::live::freshness::{NotProven, Proof, Proven};
use crate::serve::state::ProxyState;

/// A reload proves a cache of at most this many bytes of objects (`live::freshness`).
pub const RELOAD_MAX_BYTES: usize = 1 << 20;
/// What a reload may cost beyond the read's own objects, whatever they come to.
const RELOAD_SLACK_BYTES: usize = 16 << 10;

/// Whether reloading `cache` to prove a consistent watch costs the upstream no more than that
/// watch would directly: the cache is small, and the read selects about all of it (a reload is
/// one streaming list of the cache's scope; the read, directly, one of its own).
pub fn reload_covers(cache: &ResourceCache, namespaced: bool, filter: &Filter) -> bool {
    let total = cache.bytes();
    total <= RELOAD_MAX_BYTES && {
        let mine = read_bytes(&cache.current(), namespaced, filter, None);
        total <= mine + mine / 4 + RELOAD_SLACK_BYTES
    }
}

/// What a metadata list proving a read lists ([`listing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// The cache, or the read's namespace of it when no read of another namespace joins the
    /// list: the cache is small, and a list shared by the reads of several namespaces is one
    /// request where they would each make one.
    Cache,
    /// The read's namespace only, never widened by the reads of other namespaces: the cache is
    /// not small (a pool's cache of every ConfigMap), its namespace is.
    Namespace,
}

/// How a metadata list (`Freshness::consistent_listed`) may prove the read — a watch, or a list
/// of at most `limit` objects — at a cost to the upstream no more than the read's directly, by
/// the slack a reload is allowed: the listed objects' metadata come to at most their bytes, and
/// those to at most the read's own and [`RELOAD_SLACK_BYTES`]. Listed are the cache's objects
/// ([`Listing::Cache`]), or those of the read's namespace ([`Listing::Namespace`]: a kubelet's
/// watch of one ConfigMap at a pool that holds every ConfigMap of the cluster). `None`: neither
/// is small enough. Unlike a reload it sends no object as an event, and unlike the current-RV
/// list and probe of [`consistent`] it is one request, answered at once, that is its own
/// current-RV sample.
pub fn listing(
    cache: &ResourceCache,
    namespaced: bool,
    filter: &Filter,
    limit: Option<usize>,
) -> Option<Listing> {
    let covers = |listed: usize, mine: usize| listed <= mine + RELOAD_SLACK_BYTES;
    let total = cache.bytes();
    let snap = cache.current();
    let mine = || read_bytes(&snap, namespaced, filter, limit);
    if total <= RELOAD_MAX_BYTES && covers(total, mine()) {
        return Some(Listing::Cache);
    }
    // Narrower than the cache only where it holds every namespace (`fetch_metadata_list`).
    let namespace = filter.namespace.as_deref().filter(|ns| !ns.is_empty())?;
    let every_namespace = namespaced && cache.scope().namespace().is_none();
    (every_namespace && covers(scope_bytes(&snap, Some(namespace)), mine()))
        .then_some(Listing::Namespace)
}

/// The bytes of the objects `filter` selects in `snap` (the first `limit` of them).
fn read_bytes(snap: &Snapshot, namespaced: bool, filter: &Filter, limit: Option<usize>) -> usize {
    let query = Query {
        namespace: filter.namespace.as_deref(),
        namespaced,
        label: filter.label.as_ref(),
        field: filter.field.as_ref(),
        ..Query::default()
    };
    let selected = select::select(snap, &query).items;
    selected.iter().take(limit.unwrap_or(usize::MAX)).map(|o| o.body.len()).sum()
}

/// The bytes of the objects a list of `namespace` (all namespaces: `None`) would read: what
/// decides whether a consistent list is worth a bookmark probe. The probe costs the upstream a
/// one-item list and a 3 s watch and the client ~1.5 s; passing a list through costs the
/// apiserver its serialization (tens of MB/s: a 10,000-pod list takes it 2–3 s) and the client
/// milliseconds when it is small. Measured against the fake apiserver (debug build): a 12-item
/// list passed through in 1–4 ms; proven by probe in 1.6–1.95 s; served from an already-current
/// cache in 1–7 ms.
pub fn scope_bytes(snap: &Snapshot, namespace: Option<&str>) -> usize {
    let items = snap.items();
    match namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => {
            let prefix = format!("{ns}/");
            items
                .range::<_, str>((
                    std::ops::Bound::Included(prefix.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(_, o)| o.body.len())
                .sum()
        }
        None => items.values().map(|o| o.body.len()).sum(),
    }
}

/// The apiserver's wait for a not-older-than RV before its 504 "Too large resource version".
pub const NOT_OLDER_THAN_WAIT: Duration = Duration::from_secs(3);

/// Whether the cache has synced, waiting (bounded) for a cold cache's first load: every read
/// of a cold cache shares its one upstream list rather than each passing through.
pub async fn synced(state: &ProxyState, cache: &ResourceCache) -> bool {
    if cache.is_synced() {
        return true;
    }
    if cache.has_loaded() {
        // Not cold: unsynced because it lost track (see `ResourceCache::mark_incomplete`) until
        // a clean relist; its reads pass through meanwhile.
        return false;
    }
    let m = &state.metrics.freshness;
    let labels = [cache.label(), cache.encoding().as_str()];
    if cache.failing_cold() {
        // Its first load failed (an outage, a refusal, the memory budget): the upstream
        // answers this read as it would without kubeplex, at once.
        m.sync_waits.with_label_values(&[labels[0], labels[1], "load_failed"]).inc();
        return false;
    }
    let started = std::time::Instant::now();
    let synced = cache.wait_synced(state.caches.freshness_config().sync_wait).await;
    let result = match (synced, cache.failing_cold()) {
        (true, _) => "synced",
        (false, true) => "load_failed",
        (false, false) => "timeout",
    };
    m.sync_waits.with_label_values(&[labels[0], labels[1], result]).inc();
    m.sync_wait_seconds.with_label_values(&labels).observe(started.elapsed().as_secs_f64());
    synced
}

/// Whether the cache is shown to hold the upstream's state as of `arrived` (a consistent read:
/// resourceVersion unset), within the proof's budget; if not, the read passes through.
/// `probe_worth_it` says, when a probe of its own would be needed, whether the read is worth
/// one (a list's: `prepare::consistent`).
pub async fn consistent(
    state: &ProxyState,
    cache: &Live,
    arrived: std::time::Instant,
    probe_worth_it: impl FnOnce() -> bool,
    reload_worth_it: impl FnOnce() -> bool,
) -> Result<Proven, Unproven> {
    within_budget(state, cache, "consistent", |deadline| {
        cache.freshness.consistent(cache, arrived, deadline, probe_worth_it, reload_worth_it)
    })
    .await
}

/// [`consistent`] for a read a metadata list proves at no more cost than the read's own
/// ([`listing`]): of the cache, or of `namespace` in it.
pub async fn consistent_listed(
    state: &ProxyState,
    cache: &Live,
    listing: Listing,
    namespace: Option<&str>,
    arrived: std::time::Instant,
) -> Result<Proven, Unproven> {
    within_budget(state, cache, "consistent", |deadline| {
        let narrow = listing == Listing::Namespace;
        cache.freshness.consistent_listed(cache, namespace, narrow, arrived, deadline)
    })
    .await
}

/// A not-older-than read past the cache's RV (`rv`: one the client had from another resource,
/// or from another tier), proven as a consistent read of its scope is — by one metadata list
/// ([`listing`], with the read's `filter` and `limit`), where that costs the upstream no more
/// than the read would directly. The list is a consistent read sent after the read arrived, so
/// its RV is at least any the client could have had: once the cache is shown to hold the
/// upstream's state at that RV, the read is answered there, at once — where
/// [`not_older_than`]'s probe of a quiet resource waits for the apiserver's bookmark tick (1–2
/// s). Returns the proof and the listing (a watch's final bookmark is proven the same way).
/// `None` when the cache is at `rv` already, no listing is cheap enough, the list's RV is short
/// of `rv` (one the upstream has not reached: its own wait and 504 are the answer then,
/// [`not_older_than`]), or the proof did not come within its budget. Counted as
/// `read="not_older_than"`.
pub async fn not_older_than_listed(
    state: &ProxyState,
    cache: &Live,
    namespaced: bool,
    filter: &Filter,
    limit: Option<usize>,
    rv: u64,
) -> Option<(Proven, Listing)> {
    if cache.resource_version() >= rv {
        return None;
    }
    let listing = listing(cache, namespaced, filter, limit)?;
    let namespace = filter.namespace.as_deref();
    let arrived = std::time::Instant::now();
    let proven = within_budget(state, cache, "not_older_than", |deadline| {
        let narrow = listing == Listing::Namespace;
        cache.freshness.consistent_listed(cache, namespace, narrow, arrived, deadline)
    })
    .await
    .ok()?;
    // A state loaded after the read arrived carries the cache's RV.
    let at = proven.at.unwrap_or_else(|| cache.resource_version());
    (at >= rv).then_some((proven, listing))
}

/// Why a read's proof did not come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unproven {
    /// The upstream is overloaded: it answered what would prove it 429, 503 or 504, or not
    /// within the read's whole budget (`consistentReadWait`).
    Overloaded,
    /// Anything else: no proofs (a zero budget), a probe the caller declined, the upstream
    /// failing at once.
    Other,
}

/// A read's proof, `prove` given the proof's deadline; counted as `read` (`consistent`,
/// `not_older_than`).
async fn within_budget<F>(
    state: &ProxyState,
    cache: &Live,
    read: &'static str,
    prove: impl FnOnce(Instant) -> F,
) -> Result<Proven, Unproven>
where
    F: std::future::Future<Output = Result<Proven, NotProven>>,
{
    let budget = cache.freshness.budget();
    if budget.is_zero() {
        return Err(Unproven::Other);
    }
    let started = std::time::Instant::now();
    let proof = prove(Instant::now() + budget).await;
    observe(state, cache, read, outcome(proof.map(|p| p.proof)), started);
    match proof {
        Ok(p) => Ok(p),
        Err(NotProven::Overloaded) => Err(Unproven::Overloaded),
        Err(NotProven::Timeout) if started.elapsed() >= budget => Err(Unproven::Overloaded),
        Err(_) => Err(Unproven::Other),
    }
}

/// Whether the cache is shown, by `deadline`, to hold the upstream's state as of `arrived`, for
/// the final bookmark of a watch that is another tier's freshness probe (`watch`): the
/// bookmark is at the upstream's current RV only once this tier knows it holds that state.
/// `listed`: by a metadata list as the watch's own consistent read was ([`listing`]), of the
/// cache or of the watch's namespace in it. Counted as `read="bookmark"`.
pub async fn for_bookmark(
    state: &ProxyState,
    cache: &Live,
    arrived: std::time::Instant,
    deadline: Instant,
    listed: Option<(Listing, Option<&str>)>,
) -> bool {
    let started = std::time::Instant::now();
    let proof = match listed {
        Some((listing, ns)) => {
            let narrow = listing == Listing::Namespace;
            cache.freshness.consistent_listed(cache, ns, narrow, arrived, deadline).await
        }
        None => cache.freshness.consistent(cache, arrived, deadline, || true, || false).await,
    };
    observe(state, cache, "bookmark", outcome(proof.map(|p| p.proof)), started);
    proof.is_ok()
}

/// Waits for the cache to reach `rv` (a not-older-than read), like the apiserver's watch cache
/// does for ~3 s: through its own watch, or — when the upstream is already past `rv`, e.g. an
/// RV taken from another resource on a quiet one — through the freshness proof. `Err(current)`
/// when it did not get there: the apiserver's 504 is the answer then.
pub async fn not_older_than(state: &ProxyState, cache: &Live, rv: u64) -> Result<(), u64> {
    if cache.resource_version() >= rv {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let deadline = Instant::now() + NOT_OLDER_THAN_WAIT;
    let proof = cache.freshness.not_older_than(cache, rv, deadline).await;
    observe(state, cache, "not_older_than", outcome(proof), started);
    proof.map(|_| ()).map_err(|_| cache.resource_version())
}

/// The `proof` label of a wait's outcome.
fn outcome(proof: Result<Proof, NotProven>) -> &'static str {
    match proof {
        Ok(p) => p.as_str(),
        Err(e) => e.as_str(),
    }
}

fn observe(
    state: &ProxyState,
    cache: &ResourceCache,
    read: &str,
    proof: &str,
    started: std::time::Instant,
) {
    let m = &state.metrics.freshness;
    let (label, encoding) = (cache.label(), cache.encoding().as_str());
    m.proofs.with_label_values(&[label, encoding, read, proof]).inc();
    m.proof_wait_seconds
        .with_label_values(&[label, encoding, read])
        .observe(started.elapsed().as_secs_f64());
}
