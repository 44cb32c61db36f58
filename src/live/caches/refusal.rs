//! A cache refused for a while (by the memory budget, or because the upstream refuses kubeplex
//! its list), and what `/debug/caches` shows of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cache::{Encoding, Scope};
use crate::wire::resource::ResourceInfo;

/// A cache the budget refused.
pub struct Refusal {
    pub until: Instant,
    pub backoff: Duration,
    pub pinned: bool,
    pub bytes: usize,
    pub info: Arc<ResourceInfo>,
    pub encoding: Encoding,
    pub scope: Scope,
    pub why: Why,
}

/// Why a cache was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its objects would take the caches past the memory budget.
    Budget,
    /// The upstream refused kubeplex the list (401, 403).
    Forbidden,
    /// The upstream does not serve the resource (404): its CRD deleted, or its version no
    /// longer served.
    NotServed,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Budget => "memory_budget",
            Why::Forbidden => "forbidden",
            Why::NotServed => "not_served",
        }
    }
}

/// What `/debug/caches` shows of a refused cache.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RefusedStatus {
    pub resource: String,
    pub encoding: &'static str,
    /// Its scope (`*`: the whole resource).
    pub scope: String,
    /// `memory_budget`, `forbidden` (the upstream refused kubeplex the list) or `not_served`
    /// (the upstream does not serve the resource: a CRD deleted).
    pub reason: &'static str,
    /// The bytes of the load that was refused.
    pub bytes: usize,
    pub pinned: bool,
    /// When it may be started again.
    pub retry_in_seconds: u64,
}
