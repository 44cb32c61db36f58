//! The soak's samples: every `every`, a CSV row of each replica's memory and counts (its
//! `/metrics`), the control plane's CPU and memory, the apiserver's open watches and request
//! rate, the last minute's write → node latency and the nodes' failures; and the slopes the
//! report gives of them.

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{lock, Slope};
use crate::hist::Histogram;
use crate::node::report::{series, Counters};
use crate::scale::cluster::{processes_named, Cluster};
use crate::scale::node::Classes;
use crate::scale::writer::WriteCounts;
use crate::target::{cpu_seconds, rss_bytes};

/// Samples every `every` into the CSV file at `path`.
pub(super) struct Sampler {
    pub(super) admins: Vec<SocketAddr>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) classes: Arc<Mutex<Classes>>,
    pub(super) counts: Arc<WriteCounts>,
    pub(super) markers: Arc<Mutex<Vec<(f64, String)>>>,
    pub(super) every: Duration,
    pub(super) path: PathBuf,
}

/// A replica's series, from its `/metrics`: the column, the metric, a label it must have, and
/// what one unit is.
struct ReplicaSeries {
    column: &'static str,
    metric: &'static str,
    label: Option<(&'static str, &'static str)>,
    unit: f64,
}

const fn series_of(
    column: &'static str,
    metric: &'static str,
    label: Option<(&'static str, &'static str)>,
    unit: f64,
) -> ReplicaSeries {
    ReplicaSeries { column, metric, label, unit }
}

const REPLICA_SERIES: &[ReplicaSeries] = &[
    series_of("rss_mib", "process_resident_memory_bytes", None, MIB),
    series_of("rss_anon_mib", "kubeplex_process_resident_anonymous_bytes", None, MIB),
    series_of("heap_in_use_mib", "kubeplex_allocator_heap_bytes", Some(("state", "in_use")), MIB),
    series_of("heap_free_mib", "kubeplex_allocator_heap_bytes", Some(("state", "free")), MIB),
    series_of("cache_mib", "kubeplex_cache_bytes", None, MIB),
    series_of("watch_history_mib", "kubeplex_watch_history_bytes", None, MIB),
    series_of("disk_state_mib", "kubeplex_disk_state_bytes", None, MIB),
    series_of("upstream_watches", "kubeplex_upstream_watches", None, 1.0),
    series_of("client_connections", "kubeplex_client_connections", None, 1.0),
    series_of("open_fds", "process_open_fds", None, 1.0),
    series_of("tasks", "kubeplex_runtime_alive_tasks", None, 1.0),
    series_of("watchers", "kubeplex_watchers", None, 1.0),
    series_of("review_cache_entries", "kubeplex_auth_cache_entries", None, 1.0),
];

const MIB: f64 = 1024.0 * 1024.0;

/// The replicas' series whose slope the report gives (memory and counts that must stay flat).
const FLAT: &[&str] = &[
    "rss_mib",
    "rss_anon_mib",
    "heap_in_use_mib",
    "cache_mib",
    "watch_history_mib",
    "upstream_watches",
    "client_connections",
    "open_fds",
    "tasks",
    "watchers",
    "review_cache_entries",
];

/// The samples taken: the header's columns, then each row (`None`: not read).
#[derive(Default)]
pub(super) struct Rows {
    columns: Vec<String>,
    pub(super) rows: Vec<(f64, Vec<Option<f64>>)>,
}

/// Which samples a slope is taken over.
pub(super) enum Window {
    /// Every sample from this time on.
    From(f64),
    /// The last sample before each of these times, and the last of all.
    Before(Vec<f64>),
}

impl Window {
    /// From the first of `starts` (disruptions after the warm-up) on; with none, from the
    /// warm-up's end.
    pub(super) fn cycles(starts: &[f64], warm: f64) -> Window {
        Window::From(starts.first().copied().unwrap_or(warm))
    }

    pub(super) fn settled(starts: &[f64]) -> Window {
        Window::Before(starts.to_vec())
    }

    pub(super) fn select(&self, times: &[f64]) -> Vec<usize> {
        match self {
            Window::From(from) => (0..times.len()).filter(|i| times[*i] >= *from).collect(),
            Window::Before(ends) => {
                let mut picked: Vec<usize> =
                    ends.iter().filter_map(|end| times.iter().rposition(|t| t < end)).collect();
                picked.extend(times.len().checked_sub(1));
                picked.dedup();
                picked
            }
        }
    }
}

impl Rows {
    /// Each flat series' slope over the rows `window` picks.
    pub(super) fn slopes(&self, window: &Window) -> Vec<Slope> {
        let times: Vec<f64> = self.rows.iter().map(|(t, _)| *t).collect();
        let picked = window.select(&times);
        let mut out = Vec::new();
        for (c, name) in self.columns.iter().enumerate() {
            let replica = name.contains(":pool-");
            if !replica || !FLAT.iter().any(|f| name.starts_with(&format!("{f}:"))) {
                continue;
            }
            let points: Vec<(f64, f64)> = picked
                .iter()
                .filter_map(|i| {
                    let (t, r) = self.rows.get(*i)?;
                    Some((*t / 3600.0, (*r.get(c)?)?))
                })
                .collect();
            if let Some((mean, per_hour)) = least_squares(&points) {
                let percent = if mean.abs() > f64::EPSILON { per_hour / mean * 100.0 } else { 0.0 };
                out.push(Slope { series: name.clone(), mean, per_hour, percent_per_hour: percent });
            }
        }
        out
    }
}

/// The mean of `y` and the least-squares slope of `y` over `x`; `None` for fewer than 3
/// points or no spread in `x`.
pub fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + (x - mx) * (y - my), b + (x - mx) * (x - mx)));
    (sxx > 0.0).then(|| (my, sxy / sxx))
}

impl Sampler {
    pub(super) async fn run(self, start: Instant, mut stopped: watch::Receiver<bool>) -> Rows {
        let mut rows = Rows::default();
        let mut columns = vec!["t".to_string()];
        for r in REPLICA_SERIES {
            for i in 0..self.admins.len() {
                columns.push(format!("{}:pool-{i}", r.column));
            }
        }
        for i in 0..self.admins.len() {
            columns.push(format!("cpu_cores:pool-{i}"));
        }
        // The control plane's apart from the replicas' (charts of their own: its scale is
        // another).
        for c in [
            "control_plane_cpu_cores:kube-apiserver",
            "control_plane_cpu_cores:etcd",
            "control_plane_rss_mib:kube-apiserver",
            "apiserver_open_watches",
            "apiserver_requests_per_s",
            "write_to_node_ms:p50 (last minute)",
            "write_to_node_ms:p99 (last minute)",
            "node_watch_failures:all",
            "node_watch_failures:5xx",
            "writes_failed",
        ] {
            columns.push(c.to_string());
        }
        rows.columns = columns[1..].to_vec();
        let mut file = std::fs::File::create(&self.path).ok();
        if let Some(f) = file.as_mut() {
            let _ = writeln!(f, "{}", columns.join(","));
        }
        let mut last_cpu: Vec<Option<f64>> = vec![None; self.admins.len() + 2];
        let mut last_requests: Option<f64> = None;
        let mut last_failures = (0u64, 0u64, 0u64);
        let mut last_at = Instant::now();
        let mut minute: VecDeque<Histogram> = VecDeque::new();
        let per_minute = (60.0 / self.every.as_secs_f64()).ceil().max(1.0) as usize;
        let mut written_markers = 0;
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopped.wait_for(|s| *s) => break,
            }
            let t = start.elapsed().as_secs_f64();
            let dt = last_at.elapsed().as_secs_f64().max(0.001);
            last_at = Instant::now();
            let mut row: Vec<Option<f64>> = Vec::new();
            let mut texts = Vec::new();
            for admin in &self.admins {
                let url = format!("http://{admin}/metrics");
                texts.push(crate::target::scrape(&url, false).await.ok().map(|t| series(&t)));
            }
            for r in REPLICA_SERIES {
                for text in &texts {
                    row.push(text.as_ref().map(|s| {
                        s.iter()
                            .filter(|(n, l, _)| {
                                n == r.metric
                                    && r.label.is_none_or(|(k, v)| l.get(k).is_some_and(|x| x == v))
                            })
                            .map(|x| x.2)
                            .sum::<f64>()
                            / r.unit
                    }));
                }
            }
            let mut cpu_now: Vec<Option<f64>> = texts
                .iter()
                .map(|t| {
                    t.as_ref()?.iter().find(|(n, ..)| n == "process_cpu_seconds_total").map(|x| x.2)
                })
                .collect();
            // The control plane's processes by name (a restarted apiserver is another pid);
            // none with the fake apiserver, which runs in this process.
            let procs = match self.cluster.sim {
                None => processes_named(&["kube-apiserver", "etcd"]),
                Some(_) => Vec::new(),
            };
            let pid = |name: &str| procs.iter().find(|(n, _)| n == name).map(|p| p.1);
            cpu_now.push(pid("kube-apiserver").and_then(cpu_seconds));
            cpu_now.push(pid("etcd").and_then(cpu_seconds));
            for (i, now) in cpu_now.iter().enumerate() {
                // A process started again counts from 0: no rate across it.
                let rate = match (last_cpu[i], now) {
                    (Some(a), Some(b)) if *b >= a => Some((b - a) / dt),
                    _ => None,
                };
                row.push(rate);
                last_cpu[i] = *now;
            }
            row.push(pid("kube-apiserver").and_then(rss_bytes).map(|b| b as f64 / MIB));
            let apiserver = self.cluster.metrics().await.ok().map(|t| Counters::read(&t));
            row.push(apiserver.as_ref().map(|c| c.open_watches));
            let requests = apiserver.as_ref().map(|c| c.requests.values().sum::<f64>());
            row.push(match (last_requests, requests) {
                (Some(a), Some(b)) if b >= a => Some((b - a) / dt),
                _ => None,
            });
            last_requests = requests;
            // The last minute's deliveries.
            let mut recent = Histogram::default();
            for c in lock(&self.classes).values() {
                recent.merge(&std::mem::take(&mut *lock(&c.recent)));
            }
            minute.push_back(recent);
            while minute.len() > per_minute {
                minute.pop_front();
            }
            let mut window = Histogram::default();
            for h in &minute {
                window.merge(h);
            }
            let has = window.count() > 0;
            row.push(has.then(|| window.quantile_ms(0.5)));
            row.push(has.then(|| window.quantile_ms(0.99)));
            let (all, five) = {
                let classes = lock(&self.classes);
                let mut all = 0;
                let mut five = 0;
                for c in classes.values() {
                    for (k, n) in lock(&c.failures).iter() {
                        all += n;
                        if k.starts_with('5') {
                            five += n;
                        }
                    }
                }
                (all, five)
            };
            let failed = self.counts.failed.load(Ordering::Relaxed);
            row.push(Some(all.saturating_sub(last_failures.0) as f64));
            row.push(Some(five.saturating_sub(last_failures.1) as f64));
            row.push(Some(failed.saturating_sub(last_failures.2) as f64));
            last_failures = (all, five, failed);
            if let Some(f) = file.as_mut() {
                let markers = lock(&self.markers);
                for (at, label) in markers.iter().skip(written_markers) {
                    let _ = writeln!(f, "#marker,{at:.1},{label}");
                }
                written_markers = markers.len();
                let cells: Vec<String> =
                    row.iter().map(|v| v.map_or(String::new(), |v| format!("{v:.3}"))).collect();
                let _ = writeln!(f, "{t:.1},{}", cells.join(","));
                let _ = f.flush();
            }
            rows.rows.push((t, row));
        }
        rows
    }
}
