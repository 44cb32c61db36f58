//! What `/debug/caches` shows of one cache ([`CacheStatus`]), as `ResourceCache::status` fills
//! it.

/// What `/debug/caches` shows of one cache.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheStatus {
    pub resource: String,
    pub encoding: &'static str,
    /// The namespace it is limited to (`cacheNamespace`, or the reads that started it), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The label selector its list and watch carry, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// The field selector its list and watch carry, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
    pub synced: bool,
    pub complete: bool,
    pub pinned: bool,
    pub objects: usize,
    pub bytes: usize,
    pub resource_version: u64,
    /// Since the upstream was last heard from (an event, a bookmark, a load).
    pub seconds_since_upstream: u64,
    /// Silent for longer than `STALE_AFTER`: serving its last state.
    pub stale: bool,
    /// Its watch of the upstream runs without a gap since its last load (false while a watch
    /// fails, is refused or throttled, during a load, and for a state from disk): only then
    /// can a grant be derived from what it shows (`auth::node_rules`).
    pub watching: bool,
    pub seconds_since_read: u64,
    pub watchers: usize,
    /// Reads waiting on this cache now: for its first sync, or for it to reach an RV (a
    /// not-older-than read, a freshness proof).
    pub waiting_reads: usize,
    pub history_events: usize,
    pub history_bytes: usize,
    /// The oldest RV a watch can resume from (the history's start).
    pub history_from: u64,
    /// Where the state comes from: `upstream`, or `disk` (read back at start-up while the
    /// upstream could not be reached, until its first load).
    pub state_from: &'static str,
    /// How old that disk state is (seconds since it was written), when it is one.
    pub disk_state_age_seconds: Option<u64>,
    /// The encoding it is rendered from, when the cache of the same resource and scope in that
    /// encoding feeds it rather than a list+watch of its own (`live::mirror`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_from: Option<&'static str>,
}
