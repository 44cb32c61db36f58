//! Waiting for a cache instead of passing a read through: a cold cache's first sync, and the
//! freshness proof of consistent and not-older-than reads — which proof, and how it is made,
//! is `live::freshness`'s; here is only how long a read waits for it. Each wait is bounded
//! (`FreshnessConfig`) and counted in `kubeplex_cache_sync_*` and `kubeplex_freshness_*`.

use std::time::Duration;

use tokio::time::Instant;

use crate::cache::fanout::Filter;
use crate::cache::resource::ResourceCache;
use crate::live::caches::Live;
use crate::live::freshness::{self, ConsistentRead, Listing, NotProven, Proof, Proven};
use crate::serve::state::ProxyState;

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

/// Whether the cache is shown to hold the upstream's state as of the read's arrival (a
/// consistent read: resourceVersion unset) within the proof's budget, how
/// ([`Freshness::prove`](crate::live::freshness::Freshness::prove)), and the metadata list it
/// was proven by if it was; if not, the read passes through.
pub async fn consistent(
    state: &ProxyState,
    cache: &Live,
    read: &ConsistentRead<'_>,
) -> Result<(Proven, Option<Listing>), Unproven> {
    within_budget(state, cache, "consistent", |deadline| {
        cache.freshness.prove(cache, read, deadline)
    })
    .await
}

/// A not-older-than read past the cache's RV (`rv`: one the client had from another resource,
/// or from another tier), proven as a consistent read of its scope is — by one metadata list
/// ([`freshness::listing`], with the read's `filter` and `limit`), where that costs the upstream no more
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
    let listing = freshness::listing(cache, namespaced, filter, limit)?;
    let namespace = filter.namespace.as_deref();
    let arrived = std::time::Instant::now();
    let (proven, _) = within_budget(state, cache, "not_older_than", |deadline| async move {
        let narrow = listing == Listing::Namespace;
        let proof = cache.freshness.consistent_listed(cache, namespace, narrow, arrived, deadline);
        Ok((proof.await?, Some(listing)))
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
) -> Result<(Proven, Option<Listing>), Unproven>
where
    F: std::future::Future<Output = Result<(Proven, Option<Listing>), NotProven>>,
{
    let budget = cache.freshness.budget();
    if budget.is_zero() {
        return Err(Unproven::Other);
    }
    let started = std::time::Instant::now();
    let proof = prove(Instant::now() + budget).await;
    observe(state, cache, read, outcome(proof.map(|(p, _)| p.proof)), started);
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
/// `listed`: by a metadata list as the watch's own consistent read was ([`freshness::listing`]), of the
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
