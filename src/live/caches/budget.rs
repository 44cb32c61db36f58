//! The caches' memory budget (issue 13): at most `memory_budget` bytes of objects in all caches
//! together. Each load (first list, relist) is weighed before it is applied: one that would take
//! the caches past the budget is not applied, its cache is stopped and refused for a while
//! (30 s, doubling to 10 min), and its reads pass through meanwhile — with a log line and
//! `kubeplex_cache_budget_refused_total`. A configured (pinned) cache is started again when its
//! refusal ends; others when they are next read. Readiness does not wait for refused caches.
//!
//! A cache whose load the upstream refuses kubeplex (401, 403: its own RBAC does not let it list
//! what a client reads) is refused the same way, without the budget: retrying at once would only
//! cost the apiserver a refused list every few seconds, and the reads pass through meanwhile.
//!
//! What is weighed is the objects' bytes (`kubeplex_cache_bytes`), the bulk of a cache's memory.
//! Growth by watch events between loads is checked every [`ENFORCE_EVERY`]: while all caches
//! together are past the budget, the largest is refused the same way — caches started on demand
//! before configured ones — until the rest fit.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::refusal::{Refusal, RefusedStatus, Why};
use super::{CacheKey, Caches};
use crate::cache::resource::ResourceCache;
use crate::cache::{Encoding, Scope};
use crate::live::feed::Feed;
use crate::wire::resource::ResourceInfo;

/// How often growth by watch events is checked against the budget.
pub const ENFORCE_EVERY: Duration = Duration::from_secs(1);

const RETRY_FIRST: Duration = Duration::from_secs(30);
const RETRY_MAX: Duration = Duration::from_secs(600);

/// A cache's feed, each load weighed against the budget before `apply` sees it.
struct Weighed {
    caches: Weak<Caches>,
    key: CacheKey,
    cache: Arc<ResourceCache>,
    apply: Box<dyn Fn(Feed) + Send + Sync>,
}

impl Weighed {
    fn feed(&self, event: Feed) {
        if let Feed::Loaded { objects, .. } = &event {
            if let Some(caches) = self.caches.upgrade() {
                let bytes = objects.iter().map(|o| o.body.len()).sum();
                if !caches.admit(&self.key, bytes) {
                    // Its cold readers are woken and pass through; then the cache (and this
                    // reflector) stops.
                    self.cache.load_failed();
                    caches.refuse(&self.key, &self.cache, bytes, Why::Budget);
                    return;
                }
            }
        }
        let refused = match event {
            Feed::LoadFailed { forbidden: true, .. } => Some(Why::Forbidden),
            Feed::NotServed => Some(Why::NotServed),
            _ => None,
        };
        (self.apply)(event);
        if let (Some(why), Some(caches)) = (refused, self.caches.upgrade()) {
            caches.refuse(&self.key, &self.cache, 0, why);
        }
    }
}

impl Caches {
    /// `apply`, with each load of `cache` (at `key`) weighed against the memory budget before
    /// it is applied.
    pub(super) fn weighed(
        &self,
        key: CacheKey,
        cache: Arc<ResourceCache>,
        apply: Box<dyn Fn(Feed) + Send + Sync>,
    ) -> impl Fn(Feed) + Send + Sync + 'static {
        let weighed = Weighed { caches: self.me.clone(), key, cache, apply };
        move |event| weighed.feed(event)
    }

    /// Whether a load of `bytes` for `key` fits beside the other caches.
    fn admit(&self, key: &CacheKey, bytes: usize) -> bool {
        let Some(limit) = self.config.memory_budget else { return true };
        let others: usize = {
            let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.iter().filter(|(k, _)| *k != key).map(|(_, c)| c.bytes()).sum()
        };
        let fits = others.saturating_add(bytes) <= limit;
        if fits {
            self.refused.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
        }
        fits
    }

    /// Whether there is a memory budget.
    pub fn has_budget(&self) -> bool {
        self.config.memory_budget.is_some()
    }

    /// Refuses the caches that grew past the budget by watch events, largest first (those
    /// started on demand before the configured ones), until the others fit. Run periodically.
    pub fn enforce_budget(&self) {
        let Some(limit) = self.config.memory_budget else { return };
        let mut running: Vec<(CacheKey, Arc<ResourceCache>, usize)> = {
            let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(k, c)| (k.clone(), c.cache.clone(), c.bytes())).collect()
        };
        let mut total: usize = running.iter().map(|(_, _, b)| *b).sum();
        if total <= limit {
            return;
        }
        running.sort_by_key(|(_, c, bytes)| (c.is_pinned(), std::cmp::Reverse(*bytes)));
        for (key, cache, bytes) in running {
            if total <= limit {
                break;
            }
            total -= bytes;
            self.refuse(&key, &cache, bytes, Why::Budget);
        }
    }

    fn refuse(&self, key: &CacheKey, cache: &ResourceCache, bytes: usize, why: Why) {
        let (live, others, rendered) = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let live = map.remove(key);
            // The caches rendered from it (`live::mirror`) go with it: nothing feeds them now.
            let rendered: Vec<_> = map
                .iter()
                .filter(|(_, l)| l.source.as_ref() == Some(key))
                .map(|(k, _)| k.clone())
                .collect();
            let rendered: Vec<_> = rendered
                .into_iter()
                .filter_map(|k| map.remove(&k).map(|l| (Self::same_resource(&map, &k), l)))
                .collect();
            (live, Self::same_resource(&map, key), rendered)
        };
        for (others, live) in rendered {
            live.stop(others);
        }
        let backoff = {
            let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
            let backoff = refused.get(key).map_or(RETRY_FIRST, |r| (r.backoff * 2).min(RETRY_MAX));
            let refusal = Refusal {
                until: Instant::now() + backoff,
                backoff,
                pinned: cache.is_pinned(),
                bytes,
                info: Arc::new(cache.info().clone()),
                encoding: cache.encoding(),
                scope: cache.scope().clone(),
                why,
            };
            refused.insert(key.clone(), refusal);
            backoff
        };
        match why {
            Why::Budget => {
                let labels = [cache.label(), cache.encoding().as_str()];
                self.metrics.budget_refused.with_label_values(&labels).inc();
                tracing::warn!(resource = %cache.describe(), bytes, budget = self.config.memory_budget.unwrap_or(0), retry_in = ?backoff, "cache refused: it would take the caches past the memory budget; its reads pass through");
            }
            Why::Forbidden => {
                tracing::warn!(resource = %cache.describe(), retry_in = ?backoff, "cache stopped: the upstream refuses kubeplex the list (its RBAC); its reads pass through");
            }
            Why::NotServed => {
                // What kubeplex knows of the group-version is out of date too: asked again
                // at its next use, so that its discovery document is the upstream's.
                if let Some(discovery) = self.discovery.get() {
                    discovery.forget(&cache.info().group, &cache.info().version);
                }
                tracing::warn!(resource = %cache.describe(), retry_in = ?backoff, "cache stopped: the upstream no longer serves the resource (its CRD deleted or its version no longer served); its watchers end and its reads pass through");
            }
        }
        if let Some(live) = live {
            // Aborts this cache's reflector, the caller: the last thing it does.
            live.stop(others);
        }
    }

    /// Whether `key` is refused now.
    pub(super) fn is_refused(&self, key: &CacheKey) -> bool {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused.get(key).is_some_and(|r| Instant::now() < r.until)
    }

    /// Configured caches refused now.
    pub(super) fn refused_pinned(&self) -> usize {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused.values().filter(|r| r.pinned).count()
    }

    /// Starts again the configured caches whose refusal has ended. Run periodically.
    pub fn retry_refused(&self) {
        let due: Vec<(Arc<ResourceInfo>, Encoding, Scope)> = {
            let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            refused
                .values()
                .filter(|r| r.pinned && now >= r.until)
                .map(|r| (r.info.clone(), r.encoding, r.scope.clone()))
                .collect()
        };
        for (info, encoding, scope) in due {
            if let Some(cache) = self.get_or_start(&info, encoding, scope) {
                cache.pin();
            }
        }
    }

    /// Every refused cache, for operators (`/debug/caches`).
    pub fn refused_status(&self) -> Vec<RefusedStatus> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let mut all: Vec<RefusedStatus> = refused
            .values()
            .map(|r| RefusedStatus {
                resource: format!("{}/{}", r.info.label(), r.info.version),
                encoding: r.encoding.as_str(),
                scope: r.scope.to_string(),
                reason: r.why.as_str(),
                bytes: r.bytes,
                pinned: r.pinned,
                retry_in_seconds: r.until.saturating_duration_since(now).as_secs(),
            })
            .collect();
        all.sort_by(|a, b| (&a.resource, a.encoding).cmp(&(&b.resource, b.encoding)));
        all
    }
}
