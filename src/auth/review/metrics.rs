//! The reviews' metrics.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// Review counts and latency.
#[derive(Clone)]
pub struct ReviewMetrics {
    /// By kind (`token`, `access`), result (`authenticated`, `invalid`, `allowed`, `denied`,
    /// `error`) and source (`cache`, `review`, `last_known`: an answer from before an outage;
    /// `node_rules`: the Node authorizer's rules applied by kubeplex, `auth::node_rules`;
    /// `verified`: a bound ServiceAccount token verified by kubeplex, `auth::service_account`).
    pub decisions: IntCounterVec,
    /// Latency of the reviews sent upstream, by kind.
    pub seconds: HistogramVec,
    /// Node reads refused by the Node authorizer for a pod just bound and retried until its
    /// graph caught up (`auth::graph_lag`): how long, by result (`granted`, `refused`: the
    /// window ended first, or `other`: another answer).
    pub graph_retries: HistogramVec,
    /// The retries' requests sent upstream.
    pub graph_retry_requests: IntCounter,
}

impl ReviewMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "kubeplex_auth_decisions_total",
                "Authentication (kind=token) and authorization (kind=access) decisions, by result and by source: the decision cache, a review sent to the upstream, the Node authorizer's rules applied by kubeplex (node_rules), a bound ServiceAccount token verified by kubeplex (verified), or the last answer from before an upstream outage (last_known).",
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
        let graph_retries = HistogramVec::new(
            HistogramOpts::new(
                "kubeplex_auth_node_graph_retry_seconds",
                "Node mode: a node's read of a pod just bound to it, or of what such a pod uses, refused by the Node authorizer for want of the binding in its graph and sent again until granted or nodeGraphLag after the binding: how long from the first refusal to the answer, by result (granted, refused, other).",
            )
            .buckets(vec![0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.0]),
            &["result"],
        )?;
        let graph_retry_requests = IntCounter::new(
            "kubeplex_auth_node_graph_retry_requests_total",
            "Node mode: reads sent upstream again after the Node authorizer refused them for want of a binding in its graph (kubeplex_auth_node_graph_retry_seconds).",
        )?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(seconds.clone()))?;
        registry.register(Box::new(graph_retries.clone()))?;
        registry.register(Box::new(graph_retry_requests.clone()))?;
        Ok(ReviewMetrics { decisions, seconds, graph_retries, graph_retry_requests })
    }
}

/// One cache's entry count, read when scraped.
pub type EntryCount = Box<dyn Fn() -> u64 + Send + Sync>;

/// `kubeplex_auth_cache_entries{cache}`: the entries of node mode's decision caches, read at
/// each scrape (a soak's counts that must stay bounded; issue 47). Each cache is bounded by its
/// `max_entries` and its TTL; this shows how near it runs.
pub struct CacheEntries {
    gauge: IntGaugeVec,
    caches: Vec<(&'static str, EntryCount)>,
}

impl CacheEntries {
    pub fn new(caches: Vec<(&'static str, EntryCount)>) -> Result<Self, prometheus::Error> {
        let gauge = IntGaugeVec::new(
            Opts::new(
                "kubeplex_auth_cache_entries",
                "Node mode: entries in each cache of authentication and authorization answers: tokens and access (the reviews' answers, until their TTL), known_tokens and known_access (the last answers, kept for an upstream outage), sa_verified and sa_present (ServiceAccount tokens verified by kubeplex and the objects they were checked against).",
            ),
            &["cache"],
        )?;
        Ok(CacheEntries { gauge, caches })
    }

    /// Registered once; a second registration on the same registry (tests that start two
    /// proxies) keeps the first.
    pub fn register(self, registry: &Registry) {
        let _ = registry.register(Box::new(self));
    }
}

impl Collector for CacheEntries {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        for (name, count) in &self.caches {
            self.gauge.with_label_values(&[name]).set(i64::try_from(count()).unwrap_or(i64::MAX));
        }
        self.gauge.collect()
    }
}
