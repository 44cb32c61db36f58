//! The reviews' metrics.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Review counts and latency.
#[derive(Clone)]
pub struct ReviewMetrics {
    /// By kind (`token`, `access`), result (`authenticated`, `invalid`, `allowed`, `denied`,
    /// `error`) and source (`cache`, `review`, `last_known`: an answer from before an outage).
    pub decisions: IntCounterVec,
    /// Latency of the reviews sent upstream, by kind.
    pub seconds: HistogramVec,
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
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(seconds.clone()))?;
        Ok(ReviewMetrics { decisions, seconds })
    }
}
