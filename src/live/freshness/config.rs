//! How long reads wait for a cache rather than passing through ([`FreshnessConfig`]): for a
//! cold cache's first load, for a freshness proof, and whether a small list is worth a probe.

use std::time::Duration;

/// How long reads wait for the cache rather than passing through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreshnessConfig {
    /// A read of a cache that has not synced yet waits this long for its first load (shared by
    /// every such read), then passes through. Zero: pass through at once.
    pub sync_wait: Duration,
    /// A consistent read (resourceVersion unset) or a not-older-than read past the cache waits
    /// this long for the freshness proof, then passes through (or, for not-older-than, gets the
    /// apiserver's 504). Zero: consistent reads always pass through.
    pub consistent_wait: Duration,
    /// A consistent list whose objects come to fewer bytes than this passes through rather
    /// than wait for a bookmark probe of its own (it still joins a probe under way, and is
    /// served when the cache is shown current without one). Watches always use the proof.
    pub probe_min_list_bytes: usize,
}

impl FreshnessConfig {
    /// The cold-start wait's default: long enough for a streaming list of a large resource.
    pub const SYNC_WAIT: Duration = Duration::from_secs(15);
    /// The proof's default budget: a probe's bookmark comes 1–2 s in (see
    /// `live::freshness`), and the apiserver's own not-older-than wait is 3 s.
    pub const CONSISTENT_WAIT: Duration = Duration::from_secs(3);
    /// 1 MiB: the apiserver serializes that in tens of milliseconds, less than the probe's
    /// ~1.5 s wait is worth to a `kubectl get`, and far less than its cost for a large list.
    pub const PROBE_MIN_LIST_BYTES: usize = 1 << 20;
}

impl Default for FreshnessConfig {
    fn default() -> Self {
        FreshnessConfig {
            sync_wait: Self::SYNC_WAIT,
            consistent_wait: Self::CONSISTENT_WAIT,
            probe_min_list_bytes: Self::PROBE_MIN_LIST_BYTES,
        }
    }
}
