//! The fake apiserver's own request metrics, under kube-apiserver's names and labels, so tests
//! can prove how many list and watch calls reached the upstream, how many watch events it sent
//! and how many bytes it wrote.

use prometheus::{
    exponential_buckets, Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub struct SimMetrics {
    registry: Registry,
    requests: IntCounterVec,
    longrunning: IntGaugeVec,
    reviews: IntCounterVec,
    watch_events: IntCounterVec,
    watch_event_sizes: HistogramVec,
    response_sizes: HistogramVec,
}

/// Labels identifying a request, as `apiserver_request_total` has them.
#[derive(Debug, Clone, Default)]
pub struct RequestLabels {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE`, `DELETECOLLECTION`.
    pub verb: &'static str,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    /// `namespace`, `cluster` or `resource`.
    pub scope: &'static str,
}

impl SimMetrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, \
                 version, resource, scope, component, and HTTP response code.",
            ),
            &[
                "code",
                "component",
                "dry_run",
                "group",
                "resource",
                "scope",
                "subresource",
                "verb",
                "version",
            ],
        )
        .expect("static metric definition");
        let longrunning = IntGaugeVec::new(
            Opts::new(
                "apiserver_longrunning_requests",
                "Gauge of all active long-running apiserver requests broken out by verb, group, \
                 version, resource, scope and component. Not all requests are tracked this way.",
            ),
            &["component", "group", "resource", "scope", "subresource", "verb", "version"],
        )
        .expect("static metric definition");
        // The sim's own: TokenReviews and SubjectAccessReviews it answered, so a test can tell
        // how many reviews a client's reads cost (the apiserver only has them inside
        // `apiserver_request_total`, which counts them too).
        let reviews = IntCounterVec::new(
            Opts::new(
                "kubeplex_sim_reviews_total",
                "TokenReviews and SubjectAccessReviews answered by the fake apiserver, by kind \
                 (tokenreview, subjectaccessreview) and result (authenticated, unauthenticated, \
                 allowed, denied).",
            ),
            &["kind", "result"],
        )
        .expect("static metric definition");
        // kube-apiserver's `apiserver_watch_events_total` and `apiserver_watch_events_sizes`
        // (`endpoints/metrics`): every event a watch writes — initial events, BOOKMARKs and
        // ERRORs included, as `serveWatch` counts what comes out of the watcher — and its
        // encoded size, with the same buckets (1 KiB to 128 KiB). Labelled by group, version and
        // resource, as the apiserver's metrics name resources since 1.34 (earlier releases
        // labelled these two by kind).
        let watch_events = IntCounterVec::new(
            Opts::new("apiserver_watch_events_total", "Number of events sent in watch clients"),
            &["group", "resource", "version"],
        )
        .expect("static metric definition");
        let watch_event_sizes = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_watch_events_sizes",
                "Watch event size distribution in bytes",
            )
            .buckets(exponential_buckets(1024.0, 2.0, 8).expect("static buckets")),
            &["group", "resource", "version"],
        )
        .expect("static metric definition");
        // kube-apiserver's `apiserver_response_sizes`: the bytes a read wrote (its body after
        // compression), observed when the request ends — GET and LIST, and WATCH, which the
        // apiserver also records for built-in resources (their watch is a LIST route), with
        // its buckets (1 kB to 10 GB).
        let response_sizes = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_response_sizes",
                "Response size distribution in bytes for each group, version, verb, resource, \
                 subresource, scope and component.",
            )
            .buckets(exponential_buckets(1000.0, 10.0, 8).expect("static buckets")),
            &["component", "group", "resource", "scope", "subresource", "verb", "version"],
        )
        .expect("static metric definition");
        for metric in [
            Box::new(reviews.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(requests.clone()),
            Box::new(longrunning.clone()),
            Box::new(watch_events.clone()),
            Box::new(watch_event_sizes.clone()),
            Box::new(response_sizes.clone()),
        ] {
            registry.register(metric).expect("unique metric");
        }
        SimMetrics {
            registry,
            requests,
            longrunning,
            reviews,
            watch_events,
            watch_event_sizes,
            response_sizes,
        }
    }

    /// One event written to a watch stream, of `bytes` bytes.
    pub fn watch_event(&self, l: &RequestLabels, bytes: usize) {
        let values = [l.group.as_str(), l.resource.as_str(), l.version.as_str()];
        self.watch_events.with_label_values(&values).inc();
        self.watch_event_sizes.with_label_values(&values).observe(bytes as f64);
    }

    /// The bytes a GET, LIST or WATCH wrote, when it ends.
    pub fn response_size(&self, l: &RequestLabels, bytes: u64) {
        self.response_sizes
            .with_label_values(&[
                "apiserver",
                &l.group,
                &l.resource,
                l.scope,
                &l.subresource,
                l.verb,
                &l.version,
            ])
            .observe(bytes as f64);
    }

    pub fn observe(&self, l: &RequestLabels, code: u16) {
        self.requests
            .with_label_values(&[
                &code.to_string(),
                "apiserver",
                "",
                &l.group,
                &l.resource,
                l.scope,
                &l.subresource,
                l.verb,
                &l.version,
            ])
            .inc();
    }

    pub fn review(&self, kind: &str, result: &str) {
        self.reviews.with_label_values(&[kind, result]).inc();
    }

    /// Marks a long-running request (a watch) open until the guard is dropped.
    pub fn longrunning(&self, l: &RequestLabels) -> LongRunningGuard {
        let gauge = self.longrunning.with_label_values(&[
            "apiserver",
            &l.group,
            &l.resource,
            l.scope,
            &l.subresource,
            l.verb,
            &l.version,
        ]);
        gauge.inc();
        LongRunningGuard { gauge }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metrics.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for SimMetrics {
    fn default() -> Self {
        Self::new()
    }
}

pub struct LongRunningGuard {
    gauge: prometheus::IntGauge,
}

impl Drop for LongRunningGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}
