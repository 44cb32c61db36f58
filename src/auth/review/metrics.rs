//! The reviews' metrics.

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Review counts and latency.
#[derive(Clone)]
pub struct ReviewMetrics {
    /// By kind (`token`, `access`), result (`authenticated`, `invalid`, `allowed`, `denied`,
    /// `error`) and source (`cache`, `review`, `last_known`: an answer from before an outage).
    pub decisions: IntCounterVec,
    /// Latency of the reviews sent upstream, by kind.
    pub seconds: HistogramVec,
    /// How long node reads were held for the Node authorizer's graph (`auth::graph_lag`).
    pub graph_waits: Histogram,
}

impl ReviewMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "kubeplex_auth_decisions_total",
                "Authentication (kind=token) and authorization (kind=access) decisions, by result and by source: the decision cache, a review sent to the upstream, or the last answer from before an upstream outage (last_known).",
            ),
            &["kind", "result", "source"],
        )?;
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                "kubeplex_auth_review_seconds",
                "Latency of the TokenReviews and SubjectAccessReviews sent to the upstream.",
            )
            .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
            &["kind"],
        )?;
        let graph_waits = Histogram::with_opts(
            HistogramOpts::new(
                "kubeplex_auth_node_graph_wait_seconds",
                "How long a node's read of a pod just bound to it, or of what such a pod uses, was held until the Node authorizer's graph could have caught up with the binding (nodeGraphLag), instead of being sent upstream to be refused.",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.0]),
        )?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(seconds.clone()))?;
        registry.register(Box::new(graph_waits.clone()))?;
        Ok(ReviewMetrics { decisions, seconds, graph_waits })
    }
}
