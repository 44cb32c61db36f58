//! What every connection shares.

use std::sync::Arc;

use super::cache_read::pages::PageCache;
use super::guardrails;
use super::metrics::Metrics;
use crate::auth::NodeAuth;
use crate::live::caches::Caches;
use crate::live::discovery::Resources;
use crate::upstream::Upstream;

/// Shared by every connection.
pub struct ProxyState {
    /// Caches named in the configuration; readiness waits for them.
    pub preload_specs: Vec<String>,
    pub upstream: Arc<Upstream>,
    pub resources: Resources,
    pub caches: Arc<Caches>,
    pub metrics: Metrics,
    /// Compressed large list bodies (see [`PageCache`]).
    pub pages: PageCache,
    /// The node-local mode's authentication and authorization; `None` in the sidecar mode.
    pub node: Option<Arc<NodeAuth>>,
    /// Set when a graceful shutdown begins: readiness fails from then on.
    pub draining: std::sync::atomic::AtomicBool,
    /// Whether the clients' port accepts connections: false while `listenWhenReady` holds it,
    /// so that `/readyz` never passes before clients can connect.
    pub accepting: std::sync::atomic::AtomicBool,
    /// In-flight and body limits on passthrough (see [`guardrails`]).
    pub guard: guardrails::Limiter,
}
