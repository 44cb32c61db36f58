//! The fake apiserver's own request metrics, under kube-apiserver's names and labels, so tests
//! can prove how many list and watch calls reached the upstream.

use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

pub struct SimMetrics {
    registry: Registry,
    requests: IntCounterVec,
    longrunning: IntGaugeVec,
    reviews: IntCounterVec,
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
        registry.register(Box::new(reviews.clone())).expect("unique metric");
        registry.register(Box::new(requests.clone())).expect("unique metric");
        registry.register(Box::new(longrunning.clone())).expect("unique metric");
        SimMetrics { registry, requests, longrunning, reviews }
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
