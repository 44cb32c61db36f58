//! One cache's metric series, resolved once when it starts (`publish` runs on every upstream
//! event, under the store's write lock) and taken back when it stops.
//!
//! Series are labelled by resource and encoding only, whatever the caches' scopes: several caches
//! of one resource (one per namespace, a node's pods by `spec.nodeName`, ...) add their objects,
//! bytes, watchers and history into the same series ([`Share`]), so the label set stays bounded
//! however many scopes clients ask for. Their RV, last update and oldest history RV are the last
//! written by any of them (RVs are the cluster's, so they agree to within a moment).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::cache::metrics::CacheMetrics;
use crate::cache::object::Encoding;
use crate::cache::store::Store;

/// One cache's share of a gauge series that the caches of a resource sum into.
pub(super) struct Share {
    gauge: prometheus::IntGauge,
    mine: AtomicI64,
}

impl Share {
    fn new(gauge: prometheus::IntGauge) -> Self {
        Share { gauge, mine: AtomicI64::new(0) }
    }

    /// This cache's value is now `value`.
    pub(super) fn set(&self, value: i64) {
        let before = self.mine.swap(value, Ordering::AcqRel);
        self.gauge.add(value - before);
    }

    /// Takes this cache's share back out (it stops).
    fn withdraw(&self) {
        self.set(0);
    }
}

pub(super) struct Gauges {
    objects: Share,
    bytes: Share,
    resource_version: prometheus::IntGauge,
    updated: prometheus::IntGauge,
    pub(super) watchers: Share,
    pub(super) events_received: prometheus::IntCounter,
    pub(super) frames_dispatched: prometheus::IntCounter,
    pub(super) ended_slow: prometheus::IntCounter,
    pub(super) ended_reset: prometheus::IntCounter,
    pub(super) history_events: Share,
    pub(super) history_bytes: Share,
    pub(super) history_oldest: prometheus::IntGauge,
    pub(super) bytes_sent: prometheus::IntCounter,
    pub(super) delivery: prometheus::Histogram,
}

impl Gauges {
    pub(super) fn new(metrics: &CacheMetrics, label: &str, encoding: Encoding) -> Self {
        let l = [label, encoding.as_str()];
        // Exported at 0 from the start, so that alerts on its increase see the first skip.
        metrics.skipped_objects.with_label_values(&l);
        metrics.budget_refused.with_label_values(&l);
        Gauges {
            objects: Share::new(metrics.cache_objects.with_label_values(&l)),
            bytes: Share::new(metrics.cache_bytes.with_label_values(&l)),
            resource_version: metrics.cache_resource_version.with_label_values(&l),
            updated: metrics.cache_updated.with_label_values(&l),
            watchers: Share::new(metrics.watch.watchers.with_label_values(&l)),
            events_received: metrics.watch.events_received.with_label_values(&l),
            frames_dispatched: metrics.watch.frames_dispatched.with_label_values(&l),
            ended_slow: metrics.watch.watchers_ended.with_label_values(&[label, l[1], "slow"]),
            ended_reset: metrics.watch.watchers_ended.with_label_values(&[label, l[1], "reset"]),
            history_events: Share::new(metrics.watch.history_events.with_label_values(&l)),
            history_bytes: Share::new(metrics.watch.history_bytes.with_label_values(&l)),
            history_oldest: metrics.watch.history_oldest.with_label_values(&l),
            bytes_sent: metrics.watch.bytes_sent.with_label_values(&l),
            delivery: metrics.watch.delivery.with_label_values(&l),
        }
    }

    /// The store's size and RV, and when the upstream was last heard from.
    pub(super) fn publish(&self, store: &Store) {
        self.objects.set(store.len() as i64);
        self.bytes.set(store.bytes() as i64);
        self.resource_version.set(store.resource_version() as i64);
        let now = crate::cache::clock::unix_now();
        self.updated.set(now as i64);
    }

    /// The upstream was last heard from at `unix_secs` (a state read back from disk).
    pub(super) fn heard_at(&self, unix_secs: u64) {
        self.updated.set(unix_secs as i64);
    }

    /// Takes a stopped cache's shares back out of the summed series, and removes the series
    /// once no cache of the resource is left (`others`: how many still run). Counters stay:
    /// they only ever grow.
    pub(super) fn remove(
        &self,
        metrics: &CacheMetrics,
        label: &str,
        encoding: Encoding,
        others: usize,
    ) {
        for share in
            [&self.objects, &self.bytes, &self.watchers, &self.history_events, &self.history_bytes]
        {
            share.withdraw();
        }
        if others > 0 {
            return;
        }
        let l = [label, encoding.as_str()];
        let w = &metrics.watch;
        let _ = w.watchers.remove_label_values(&l);
        let _ = w.history_events.remove_label_values(&l);
        let _ = w.history_bytes.remove_label_values(&l);
        let _ = w.history_oldest.remove_label_values(&l);
        let _ = metrics.cache_objects.remove_label_values(&l);
        let _ = metrics.cache_bytes.remove_label_values(&l);
        let _ = metrics.cache_resource_version.remove_label_values(&l);
        let _ = metrics.cache_updated.remove_label_values(&l);
    }
}
