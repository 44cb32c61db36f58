//! The caches' metrics, by resource and encoding: defined here, with the state they describe,
//! and registered into the one registry the process builds (`serve::metrics::Metrics`).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

/// Every cache's series.
#[derive(Clone)]
pub struct CacheMetrics {
    pub cache_objects: IntGaugeVec,
    pub cache_bytes: IntGaugeVec,
    pub cache_resource_version: IntGaugeVec,
    pub cache_updated: IntGaugeVec,
    pub skipped_objects: IntCounterVec,
    /// The caches' memory budget in bytes (0: none).
    pub budget_bytes: prometheus::IntGauge,
    /// Loads refused because they would have taken the caches past the budget.
    pub budget_refused: IntCounterVec,
    pub watch: WatchMetrics,
}

impl CacheMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let cache_objects = IntGaugeVec::new(
            Opts::new("kubeplex_cache_objects", "Objects held per resource cache."),
            &["resource", "encoding"],
        )?;
        let cache_bytes = IntGaugeVec::new(
            Opts::new("kubeplex_cache_bytes", "Bytes of object data held per resource cache."),
            &["resource", "encoding"],
        )?;
        let cache_resource_version = IntGaugeVec::new(
            Opts::new("kubeplex_cache_resource_version", "The resourceVersion each cache has reached (compare with the upstream's to see lag)."),
            &["resource", "encoding"],
        )?;
        let cache_updated = IntGaugeVec::new(
            Opts::new("kubeplex_cache_updated_timestamp_seconds", "When each cache last heard from the upstream (event, bookmark or list), as Unix time: time() minus this is how far behind it can be."),
            &["resource", "encoding"],
        )?;
        let skipped_objects = IntCounterVec::new(
            Opts::new(
                "kubeplex_cache_skipped_objects_total",
                "Upstream objects a cache could not index and left out (should stay 0).",
            ),
            &["resource", "encoding"],
        )?;
        for c in [&cache_objects, &cache_bytes, &cache_resource_version, &cache_updated] {
            registry.register(Box::new(c.clone()))?;
        }
        registry.register(Box::new(skipped_objects.clone()))?;
        let budget_bytes = prometheus::IntGauge::new(
            "kubeplex_cache_budget_bytes",
            "The caches' memory budget (cacheMemoryBudget; 0: none): a load that would take the caches' object bytes past it is refused and its reads pass through.",
        )?;
        let budget_refused = IntCounterVec::new(
            Opts::new(
                "kubeplex_cache_budget_refused_total",
                "Caches refused by the memory budget: a load that would have taken the caches past it, or a cache that grew past it by watch events (the largest first). Its reads pass through; it is retried later with backoff.",
            ),
            &["resource", "encoding"],
        )?;
        registry.register(Box::new(budget_bytes.clone()))?;
        registry.register(Box::new(budget_refused.clone()))?;
        Ok(CacheMetrics {
            budget_bytes,
            budget_refused,
            cache_objects,
            cache_bytes,
            cache_resource_version,
            cache_updated,
            skipped_objects,
            watch: WatchMetrics::new(registry)?,
        })
    }
}

/// The watch fan-out's metrics, by resource and encoding.
#[derive(Clone)]
pub struct WatchMetrics {
    pub watchers: IntGaugeVec,
    pub events_received: IntCounterVec,
    pub frames_dispatched: IntCounterVec,
    pub bytes_sent: IntCounterVec,
    pub watchers_ended: IntCounterVec,
    pub history_events: IntGaugeVec,
    pub history_bytes: IntGaugeVec,
    pub history_oldest: IntGaugeVec,
    pub delivery: HistogramVec,
}

impl WatchMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let re = &["resource", "encoding"];
        let gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), re);
        let counter = |name: &str, help: &str| IntCounterVec::new(Opts::new(name, help), re);
        let m = WatchMetrics {
            watchers: gauge("kubeplex_watchers", "Downstream watches open, served from a cache.")?,
            events_received: counter(
                "kubeplex_watch_events_received_total",
                "Changes a cache took in (upstream watch events, and a relist's differences).",
            )?,
            frames_dispatched: counter(
                "kubeplex_watch_events_dispatched_total",
                "Events queued to downstream watchers (one per watcher that sees the event).",
            )?,
            bytes_sent: counter(
                "kubeplex_watch_bytes_sent_total",
                "Bytes of watch streams handed to downstream connections.",
            )?,
            watchers_ended: IntCounterVec::new(
                Opts::new(
                    "kubeplex_watchers_ended_total",
                    "Downstream watches kubeplex ended: slow (fell behind its queue budget), reset (the cache lost track of the upstream), stopped (cache stopped).",
                ),
                &["resource", "encoding", "reason"],
            )?,
            history_events: gauge(
                "kubeplex_watch_history_events",
                "Events kept for resuming watches.",
            )?,
            history_bytes: gauge(
                "kubeplex_watch_history_bytes",
                "Bytes kept for resuming watches (objects and encoded frames).",
            )?,
            history_oldest: gauge(
                "kubeplex_watch_history_oldest_resource_version",
                "The oldest resourceVersion a watch can resume from; older ones get 410 Expired.",
            )?,
            delivery: HistogramVec::new(
                HistogramOpts::new(
                    "kubeplex_watch_delivery_seconds",
                    "Time from receiving an upstream event to handing it to a downstream connection.",
                )
                .buckets(vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                    0.5, 1.0, 5.0,
                ]),
                re,
            )?,
        };
        registry.register(Box::new(m.watchers.clone()))?;
        registry.register(Box::new(m.events_received.clone()))?;
        registry.register(Box::new(m.frames_dispatched.clone()))?;
        registry.register(Box::new(m.bytes_sent.clone()))?;
        registry.register(Box::new(m.watchers_ended.clone()))?;
        registry.register(Box::new(m.history_events.clone()))?;
        registry.register(Box::new(m.history_bytes.clone()))?;
        registry.register(Box::new(m.history_oldest.clone()))?;
        registry.register(Box::new(m.delivery.clone()))?;
        Ok(m)
    }
}
