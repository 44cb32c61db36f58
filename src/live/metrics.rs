//! The upstream side's metrics: the calls the caches' reflectors and freshness proofs make to
//! the apiserver, and relists. Defined here, with the code that makes the calls, and registered
//! into the one registry the process builds.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The upstream side's series.
#[derive(Clone)]
pub struct UpstreamMetrics {
    pub calls: IntCounterVec,
    pub relists: IntCounterVec,
    pub errors: IntCounterVec,
    pub render_fallbacks: IntCounterVec,
    pub watches: IntGaugeVec,
}

impl UpstreamMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let calls = IntCounterVec::new(
            Opts::new(
                "kubeplex_upstream_calls_total",
                "List and watch calls the caches made to the upstream.",
            ),
            &["resource", "encoding", "verb"],
        )?;
        let relists = IntCounterVec::new(
            Opts::new(
                "kubeplex_relists_total",
                "Relists after the upstream's watch history expired (410).",
            ),
            &["resource", "encoding"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "kubeplex_upstream_errors_total",
                "Failed list and watch calls of the caches' reflectors, by reason: unreachable (no answer: connection refused, reset, timeout), throttled (429), status (another error code), decode (an answer kubeplex could not read). Each is retried with backoff; the cache keeps serving its last state.",
            ),
            &["resource", "encoding", "reason"],
        )?;
        let render_fallbacks = IntCounterVec::new(
            Opts::new(
                "kubeplex_cache_render_fallbacks_total",
                "Caches rendered from the other encoding's cache of the same resource (one upstream watch for both) that met an object the 1.36 schema cannot render exactly (a field a newer apiserver has) and were replaced by a list+watch of their own in their encoding.",
            ),
            &["resource", "encoding"],
        )?;
        let watches = IntGaugeVec::new(
            Opts::new(
                "kubeplex_upstream_watches",
                "Watch streams the caches' reflectors hold open at the upstream (a watch, or a streaming list), from its answer to the stream's end: what kubeplex costs the apiserver in open watches, and 0 for a cache whose watch is down.",
            ),
            &["resource", "encoding"],
        )?;
        registry.register(Box::new(watches.clone()))?;
        registry.register(Box::new(render_fallbacks.clone()))?;
        registry.register(Box::new(calls.clone()))?;
        registry.register(Box::new(relists.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        Ok(UpstreamMetrics { calls, relists, errors, render_fallbacks, watches })
    }

    /// One cache's series, resolved once.
    pub fn for_cache(&self, label: &str, encoding: &str) -> CallCounters {
        // Shown at 0 from the cache's start, as its other series are.
        self.render_fallbacks.with_label_values(&[label, encoding]);
        let call = |verb: &str| self.calls.with_label_values(&[label, encoding, verb]);
        CallCounters {
            list: call("list"),
            reader_list: call("reader_list"),
            watch: call("watch"),
            watchlist: call("watchlist"),
            proof_list: call("proof_list"),
            proof_watch: call("proof_watch"),
            relists: self.relists.with_label_values(&[label, encoding]),
            open_watches: self.watches.with_label_values(&[label, encoding]),
            errors: ErrorCounters {
                unreachable: self.errors.with_label_values(&[label, encoding, "unreachable"]),
                throttled: self.errors.with_label_values(&[label, encoding, "throttled"]),
                status: self.errors.with_label_values(&[label, encoding, "status"]),
                decode: self.errors.with_label_values(&[label, encoding, "decode"]),
            },
        }
    }
}

/// The upstream calls of one cache, by verb: the reflector's paged `list`, `watch` and
/// streaming list (`watchlist`), and the freshness proof's `proof_list` and `proof_watch`.
#[derive(Clone)]
pub struct CallCounters {
    pub list: IntCounter,
    /// A first load taken from the answer to the read that started the cache (its request,
    /// passed through: `live::reflector::fed`).
    pub reader_list: IntCounter,
    pub watch: IntCounter,
    pub watchlist: IntCounter,
    pub proof_list: IntCounter,
    pub proof_watch: IntCounter,
    pub relists: IntCounter,
    /// Watch streams open at the upstream (`kubeplex_upstream_watches`): see [`OpenWatch`].
    pub open_watches: IntGauge,
    pub errors: ErrorCounters,
}

/// One watch stream open at the upstream, counted in `kubeplex_upstream_watches` from the
/// upstream's answer until it is dropped (the stream ended, broke or was given up).
pub struct OpenWatch(IntGauge);

impl OpenWatch {
    pub fn enter(gauge: &IntGauge) -> Self {
        gauge.inc();
        OpenWatch(gauge.clone())
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A reflector's failed calls, by reason (see `kubeplex_upstream_errors_total`).
#[derive(Clone)]
pub struct ErrorCounters {
    pub unreachable: IntCounter,
    pub throttled: IntCounter,
    pub status: IntCounter,
    pub decode: IntCounter,
}
