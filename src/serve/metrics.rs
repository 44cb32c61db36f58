//! kubeplex's Prometheus metrics, registered in an injected registry (docs/style.md rule 9) and
//! exposed on the admin listener.

use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry};

use super::request::Class;
use crate::auth::ReviewMetrics;
use crate::cache::metrics::CacheMetrics;
use crate::live::discovery::Resources;
use crate::live::metrics::UpstreamMetrics;
use crate::net::h1::LeanCounters;
use crate::wire::request::ApiPath;

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cache,
    Upstream,
    /// Refused by kubeplex itself (node mode: 401 for credentials that do not authenticate,
    /// 403 for a read the client may not do).
    Denied,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Cache => "cache",
            Source::Upstream => "upstream",
            Source::Denied => "denied",
        }
    }
}

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    /// The caches' own series (defined in `cache::metrics`, registered here).
    pub cache: CacheMetrics,
    /// The upstream side's series (defined in `live::metrics`, registered here).
    pub upstream: UpstreamMetrics,
    /// Authentication and authorization of clients (node mode).
    pub reviews: ReviewMetrics,
    pub page_cache: IntCounterVec,
    cache_lists: IntCounterVec,
    cache_list_fetched: IntCounterVec,
    pub freshness: FreshnessMetrics,
    /// Discovery's entries, their staleness and fetches (see `live::discovery`).
    pub discovery: crate::live::discovery::DiscoveryMetrics,
    pub lean: LeanCounters,
    /// Requests whose handler panicked (answered 500; see `serve::stack`).
    pub panics: IntCounter,
}

/// Waits for caches: cold starts, and freshness proofs of consistent and not-older-than reads.
#[derive(Clone)]
pub struct FreshnessMetrics {
    /// Reads that found their cache not synced yet, by result (`synced`, `timeout`,
    /// `load_failed`, or `named`: a read of one object passed through at once, `serve::cache_read::read`).
    pub sync_waits: IntCounterVec,
    pub sync_wait_seconds: HistogramVec,
    /// Reads that needed the cache at the upstream's current RV (consistent) or at a given RV
    /// past it (not-older-than), by read (`consistent`, `not_older_than`) and proof (`load`,
    /// `cache`, `watch`, `probe`, or `timeout` when it was passed through or got the 504).
    pub proofs: IntCounterVec,
    pub proof_wait_seconds: HistogramVec,
}

impl FreshnessMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let buckets =
            vec![0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0];
        let m = FreshnessMetrics {
            sync_waits: IntCounterVec::new(
                Opts::new(
                    "kubeplex_cache_sync_waits_total",
                    "Reads that found their cache's first load under way, by result: synced (waited for it, sharing its one upstream list), timeout or load_failed (then passed through), named (a read of one object, which a cache of a wider scope holds: passed through at once).",
                ),
                &["resource", "encoding", "result"],
            )?,
            sync_wait_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "kubeplex_cache_sync_wait_seconds",
                    "How long reads waited for a cache's first sync.",
                )
                .buckets(buckets.clone()),
                &["resource", "encoding"],
            )?,
            proofs: IntCounterVec::new(
                Opts::new(
                    "kubeplex_freshness_proofs_total",
                    "Reads that needed the cache at the upstream's current RV (read=consistent), at an RV past the cache's (read=not_older_than), or at the upstream's current RV for a probe-like watch's final bookmark (read=bookmark: another tier's freshness probe), by how it was shown: load (state loaded after the read arrived), cache (already there), watch (its watch got there), probe (a bookmark probe), timeout (not shown in time).",
                ),
                &["resource", "encoding", "read", "proof"],
            )?,
            proof_wait_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "kubeplex_freshness_wait_seconds",
                    "How long reads waited for their cache to be shown fresh.",
                )
                .buckets(buckets),
                &["resource", "encoding", "read"],
            )?,
        };
        registry.register(Box::new(m.sync_waits.clone()))?;
        registry.register(Box::new(m.sync_wait_seconds.clone()))?;
        registry.register(Box::new(m.proofs.clone()))?;
        registry.register(Box::new(m.proof_wait_seconds.clone()))?;
        Ok(m)
    }
}

impl Metrics {
    pub fn new(registry: Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "kubeplex_requests_total",
                "Requests served, by resource, verb, HTTP code and source (cache or upstream).",
            ),
            &["resource", "verb", "code", "source"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "kubeplex_request_duration_seconds",
                "Time to the response headers, by verb and source.",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["verb", "source"],
        )?;
        let page_cache = IntCounterVec::new(
            Opts::new(
                "kubeplex_page_cache_total",
                "Compressed list pages served from the page cache (hit) or compressed anew (miss).",
            ),
            &["result"],
        )?;
        // The apiserver's `apiserver_cache_list_total` and `..._fetched_objects_total`: whether
        // lists read an index, and how many objects they looked at.
        let cache_lists = IntCounterVec::new(
            Opts::new(
                "kubeplex_cache_list_total",
                "Lists selected from a cache (not page-cache hits), by index read (\"\": none).",
            ),
            &["resource", "index"],
        )?;
        let cache_list_fetched = IntCounterVec::new(
            Opts::new(
                "kubeplex_cache_list_fetched_objects_total",
                "Objects read from a cache to answer lists, matching or not, by index read.",
            ),
            &["resource", "index"],
        )?;
        registry.register(Box::new(cache_lists.clone()))?;
        registry.register(Box::new(cache_list_fetched.clone()))?;
        registry.register(Box::new(page_cache.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        let cache = CacheMetrics::new(&registry)?;
        let upstream = UpstreamMetrics::new(&registry)?;
        let reviews = ReviewMetrics::new(&registry)?;
        let freshness = FreshnessMetrics::new(&registry)?;
        let discovery = crate::live::discovery::DiscoveryMetrics::new(&registry)?;
        let lean = LeanCounters {
            requests: IntCounter::new(
                "kubeplex_lean_http1_requests_total",
                "Body-less HTTP/1.1 GETs answered by kubeplex's lean HTTP/1.1 server (no buffers held while a watch idles).",
            )?,
            handovers: IntCounter::new(
                "kubeplex_hyper_connections_total",
                "Downstream connections served by hyper: HTTP/2 ones, and HTTP/1.1 ones from their first request the lean server does not take (a body, an upgrade, HTTP/1.0).",
            )?,
        };
        let panics = IntCounter::new(
            "kubeplex_request_panics_total",
            "Requests whose handler panicked; each was answered 500 and the process went on (should stay 0: report it).",
        )?;
        registry.register(Box::new(panics.clone()))?;
        registry.register(Box::new(RuntimeTasks(prometheus::IntGauge::new(
            "kubeplex_runtime_alive_tasks",
            "Tasks alive in kubeplex's async runtime when scraped (each connection, watch, cache and timer has some): after load ends it returns to its level before; one that only grows is a leak.",
        )?)))?;
        registry.register(Box::new(ProcessMetrics::new()?))?;
        registry.register(Box::new(lean.requests.clone()))?;
        registry.register(Box::new(lean.handovers.clone()))?;
        Ok(Metrics {
            panics,
            lean,
            freshness,
            discovery,
            cache,
            upstream,
            reviews,
            registry,
            requests,
            latency,
            page_cache,
            cache_lists,
            cache_list_fetched,
        })
    }

    /// One list answered from a cache: the index it read (`None`: the key range) and the
    /// objects it read.
    pub fn observe_cache_list(&self, resource: &str, index: Option<&str>, fetched: usize) {
        let labels = [resource, index.unwrap_or("")];
        self.cache_lists.with_label_values(&labels).inc();
        self.cache_list_fetched.with_label_values(&labels).inc_by(fetched as u64);
    }

    pub fn observe(&self, resource: &str, verb: &str, code: u16, source: Source, seconds: f64) {
        self.requests
            .with_label_values(&[resource, verb, &code.to_string(), source.as_str()])
            .inc();
        self.latency.with_label_values(&[verb, source.as_str()]).observe(seconds);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        use prometheus::Encoder;
        let mut out = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

/// `kubeplex_runtime_alive_tasks`, read from the runtime at each scrape (0 when scraped from
/// outside one).
struct RuntimeTasks(prometheus::IntGauge);

impl prometheus::core::Collector for RuntimeTasks {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let alive =
            tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_alive_tasks());
        self.0.set(i64::try_from(alive).unwrap_or(i64::MAX));
        self.0.collect()
    }
}

/// The process's own series, with the names every Prometheus client library gives them (Go's
/// `collectors.NewProcessCollector`, which the apiserver's `/metrics` has too): CPU, resident
/// and virtual memory, open and allowed descriptors, start time. Read from `/proc/self` at
/// each scrape (Linux; elsewhere none are exposed).
struct ProcessMetrics {
    cpu: prometheus::Counter,
    resident: prometheus::IntGauge,
    /// `RssAnon`: see `kubeplex_process_resident_anonymous_bytes`.
    anonymous: prometheus::IntGauge,
    virtual_bytes: prometheus::IntGauge,
    open_fds: prometheus::IntGauge,
    max_fds: prometheus::IntGauge,
    start: prometheus::Gauge,
    descs: Vec<prometheus::core::Desc>,
}

/// The kernel's clock ticks a second as `/proc` reports times (`USER_HZ`: 100 on Linux).
const USER_HZ: f64 = 100.0;

impl ProcessMetrics {
    fn new() -> Result<Self, prometheus::Error> {
        use prometheus::core::Collector;
        let m = ProcessMetrics {
            cpu: prometheus::Counter::new(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            )?,
            resident: prometheus::IntGauge::new(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            )?,
            anonymous: prometheus::IntGauge::new(
                "kubeplex_process_resident_anonymous_bytes",
                "The resident set's anonymous part (RssAnon): the heap and stacks, without the binary's file-backed pages, which count in process_resident_memory_bytes as they are first touched (up to the binary's size) — what a leak grows.",
            )?,
            virtual_bytes: prometheus::IntGauge::new(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            )?,
            open_fds: prometheus::IntGauge::new(
                "process_open_fds",
                "Number of open file descriptors.",
            )?,
            max_fds: prometheus::IntGauge::new(
                "process_max_fds",
                "Maximum number of open file descriptors.",
            )?,
            start: prometheus::Gauge::new(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            )?,
            descs: Vec::new(),
        };
        let descs = [
            m.cpu.desc(),
            m.resident.desc(),
            m.anonymous.desc(),
            m.virtual_bytes.desc(),
            m.open_fds.desc(),
            m.max_fds.desc(),
            m.start.desc(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        Ok(ProcessMetrics { descs, ..m })
    }
}

/// `/proc/self/stat`'s fields after the command (`state` is the first): utime, stime,
/// starttime (ticks after boot) and vsize.
fn proc_stat(text: &str) -> Option<(f64, f64, f64, i64)> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    let vsize = fields.get(23 - 3).and_then(|f| f.parse::<i64>().ok())?;
    Some((field(14)?, field(15)?, field(22)?, vsize))
}

impl prometheus::core::Collector for ProcessMetrics {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut out = Vec::new();
        if let Some((utime, stime, start_ticks, vsize)) =
            read("/proc/self/stat").as_deref().and_then(proc_stat)
        {
            let cpu = (utime + stime) / USER_HZ;
            // A counter only goes up: add what passed since the last scrape.
            self.cpu.inc_by((cpu - self.cpu.get()).max(0.0));
            self.virtual_bytes.set(vsize);
            out.extend(self.cpu.collect());
            out.extend(self.virtual_bytes.collect());
            let boot = read("/proc/stat").and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())
            });
            if let Some(boot) = boot {
                self.start.set(boot + start_ticks / USER_HZ);
                out.extend(self.start.collect());
            }
        }
        let status = read("/proc/self/status").unwrap_or_default();
        let bytes_of = |field: &str| {
            status.lines().find_map(|l| {
                let kib: i64 = l.strip_prefix(field)?.split_whitespace().next()?.parse().ok()?;
                Some(kib.saturating_mul(1024))
            })
        };
        if let Some(bytes) = bytes_of("VmRSS:") {
            self.resident.set(bytes);
            out.extend(self.resident.collect());
        }
        if let Some(bytes) = bytes_of("RssAnon:") {
            self.anonymous.set(bytes);
            out.extend(self.anonymous.collect());
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(i64::try_from(fds.count()).unwrap_or(i64::MAX));
            out.extend(self.open_fds.collect());
        }
        let max = read("/proc/self/limits").and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Max open files"))?;
            line["Max open files".len()..].split_whitespace().next()?.parse::<i64>().ok()
        });
        if let Some(max) = max {
            self.max_fds.set(max);
            out.extend(self.max_fds.collect());
        }
        out
    }
}

/// Subresources kept in metric labels; anything else a path names is `other`, so no request
/// can create label values at will.
const LABELLED_SUBRESOURCES: &[&str] = &[
    "attach",
    "binding",
    "eviction",
    "exec",
    "log",
    "portforward",
    "proxy",
    "scale",
    "status",
    "token",
    "ephemeralcontainers",
    "resize",
    "finalize",
    "approval",
];

/// The resource label of a request for metrics: only ever a resource discovery already knows
/// (without fetching anything), so its values are bounded.
pub fn resource_label(resources: &Resources, class: &Class) -> String {
    let ApiPath::Resource(rp) = &class.path else { return String::new() };
    let Some(info) = resources.known(&rp.group, &rp.version, &rp.resource) else {
        return "other".to_string();
    };
    let mut label = info.label();
    if let Some(sub) = &rp.subresource {
        let sub =
            if LABELLED_SUBRESOURCES.contains(&sub.as_str()) { sub.as_str() } else { "other" };
        label = format!("{label}/{sub}");
    }
    label
}
