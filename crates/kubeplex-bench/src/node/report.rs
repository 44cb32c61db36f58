//! What a node run reports: the fake apiserver's own counts (its `/metrics`, read in process
//! before and after), the clients' classes and writes, the binding latency, the views check,
//! and kubeplex's side in the node tier — as text or JSON, each figure side by side for the two
//! modes with their ratio.

use std::collections::BTreeMap;

use serde::Serialize;

use super::churn::ChurnReport;
use super::shared::OutcomeReport;
use crate::hist::Summary;
use crate::mix::ClassReport;

/// The series of a Prometheus text page: `(name, labels)` → value.
pub(crate) fn series(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((head, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (name, labels) = match head.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (head, ""),
        };
        let labels = labels
            .split("\",")
            .filter_map(|kv| {
                let (k, v) = kv.split_once("=\"")?;
                Some((k.to_string(), v.trim_end_matches('"').to_string()))
            })
            .collect();
        out.push((name.to_string(), labels, value));
    }
    out
}

/// The fake apiserver's counters that a run reports, summed as needed.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// `apiserver_request_total` by (resource, verb).
    pub requests: BTreeMap<(String, String), f64>,
    pub watch_events: f64,
    pub watch_event_bytes: f64,
    /// `apiserver_watch_events_total` by resource.
    pub watch_events_by_resource: BTreeMap<String, f64>,
    /// `apiserver_response_sizes_sum` by verb.
    pub response_bytes: BTreeMap<String, f64>,
    /// `apiserver_longrunning_requests` (open watches).
    pub open_watches: f64,
}

impl Counters {
    pub fn read(text: &str) -> Counters {
        let mut c = Counters::default();
        for (name, labels, value) in series(text) {
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            match name.as_str() {
                "apiserver_request_total" => {
                    *c.requests.entry((label("resource"), label("verb"))).or_default() += value;
                }
                "apiserver_watch_events_total" => {
                    c.watch_events += value;
                    *c.watch_events_by_resource.entry(label("resource")).or_default() += value;
                }
                "apiserver_watch_events_sizes_sum" => c.watch_event_bytes += value,
                "apiserver_response_sizes_sum" => {
                    *c.response_bytes.entry(label("verb")).or_default() += value;
                }
                "apiserver_longrunning_requests" => c.open_watches += value,
                _ => {}
            }
        }
        c
    }
}

/// What the apiserver served during a mode's run (after − before).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Served {
    pub list: i64,
    /// WatchLists included (they are watches).
    pub watch: i64,
    pub get: i64,
    /// GETs of discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/G/V`: no resource).
    pub discovery: i64,
    /// POST, PUT, PATCH and DELETE, the reviews excepted.
    pub writes: i64,
    pub token_reviews: i64,
    pub subject_access_reviews: i64,
    pub watch_events: i64,
    pub watch_event_bytes: i64,
    pub watch_events_by_resource: BTreeMap<String, i64>,
    /// `apiserver_response_sizes` of GET, LIST and WATCH (a watch's when it ended).
    pub bytes_written: i64,
    pub bytes_by_verb: BTreeMap<String, i64>,
    /// Watches open at the end of the run (clients still running), and the most seen.
    pub open_watches: i64,
    pub open_watches_max: i64,
    /// LIST, WATCH and GET by resource.
    pub reads_by_resource: BTreeMap<String, BTreeMap<String, i64>>,
}

impl Served {
    pub fn between(before: &Counters, after: &Counters) -> Served {
        let mut s = Served::default();
        for ((resource, verb), n) in &after.requests {
            let n =
                (n - before.requests.get(&(resource.clone(), verb.clone())).unwrap_or(&0.0)) as i64;
            if n == 0 {
                continue;
            }
            match (resource.as_str(), verb.as_str()) {
                ("", "GET") => s.discovery += n,
                ("tokenreviews", _) => s.token_reviews += n,
                ("subjectaccessreviews", _) => s.subject_access_reviews += n,
                (_, "LIST" | "WATCH" | "GET") => {
                    match verb.as_str() {
                        "LIST" => s.list += n,
                        "WATCH" => s.watch += n,
                        _ => s.get += n,
                    }
                    *s.reads_by_resource
                        .entry(resource.clone())
                        .or_default()
                        .entry(verb.clone())
                        .or_default() += n;
                }
                _ => s.writes += n,
            }
        }
        s.watch_events = (after.watch_events - before.watch_events) as i64;
        s.watch_event_bytes = (after.watch_event_bytes - before.watch_event_bytes) as i64;
        for (resource, n) in &after.watch_events_by_resource {
            let n = (n - before.watch_events_by_resource.get(resource).unwrap_or(&0.0)) as i64;
            if n != 0 {
                s.watch_events_by_resource.insert(resource.clone(), n);
            }
        }
        for (verb, n) in &after.response_bytes {
            let n = (n - before.response_bytes.get(verb).unwrap_or(&0.0)) as i64;
            if n != 0 {
                s.bytes_by_verb.insert(verb.clone(), n);
                s.bytes_written += n;
            }
        }
        s
    }
}

/// The clients' final views against the apiserver's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Views {
    pub checked: usize,
    pub equal: usize,
    /// The first few that differ: class, collection and how.
    pub differing: Vec<String>,
}

/// kubeplex's side of the node tier, summed over the nodes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TierReport {
    /// `kubeplex_upstream_calls_total` (`resource encoding verb`) and the reads passed
    /// through, during the run.
    pub upstream_calls: BTreeMap<String, i64>,
    /// `kubeplex_auth_decisions_total` by `kind result source`.
    pub auth_decisions: BTreeMap<String, i64>,
    /// `kubeplex_requests_total` by `resource verb source code`: what the agents got, and from
    /// where (cache, upstream, denied).
    pub served: BTreeMap<String, i64>,
    /// Every node's caches once the profiles ran (`/debug/caches`): `resource encoding` and
    /// what else identifies the cache, with objects and watchers.
    pub caches: Vec<CacheReport>,
    /// Caches that had no watcher then (`node resource`): none should.
    pub caches_without_watchers: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CacheReport {
    pub node: String,
    pub cache: String,
    pub objects: u64,
    pub watchers: u64,
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    pub mode: &'static str,
    pub seconds: f64,
    pub served: Served,
    /// What the apiserver served after start-up: from the moment every kubelet had synced its
    /// pods to the end of the churn (a running cluster, where agents and caches are up).
    pub steady: Served,
    /// From a pod's binding to its kubelet's informer holding it.
    pub binding_to_kubelet: Summary,
    /// From a pod's binding to its kubelet reporting it Running.
    pub binding_to_running: Summary,
    /// From the kubelet seeing a new pod to its status manager's first status write.
    pub kubelet_to_first_status: Summary,
    pub classes: Vec<ClassReport>,
    pub writes: BTreeMap<&'static str, OutcomeReport>,
    pub churn: ChurnReport,
    pub views: Views,
    pub kubeplex: Option<TierReport>,
    /// The pool tier's side (the pool mode), summed over its replicas.
    pub pool: Option<TierReport>,
    pub failover: Option<FailoverReport>,
}

/// A pool replica killed mid-run, and the node tiers' way back to it (the pool mode).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FailoverReport {
    /// Seconds into the run.
    pub killed_at_s: f64,
    pub restarted_at_s: f64,
    /// From its restart until every node tier used its first upstream again (sampled every
    /// second); `None`: not by the end of the churn.
    pub all_back_after_s: Option<f64>,
    /// `kubeplex_upstream_switches_total`, over the node tier.
    pub switches_away: u64,
    pub switches_back: u64,
    /// Node tiers on their first upstream at the end.
    pub nodes_on_first_upstream: usize,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct NodesReport {
    pub nodes: usize,
    pub pods: usize,
    pub apps: usize,
    pub pod_rate: f64,
    pub seconds: f64,
    pub modes: Vec<ModeReport>,
    /// node tier / direct, per figure, when both ran.
    pub ratios: BTreeMap<&'static str, Option<f64>>,
    /// node tier with the pool / direct, per figure, when both ran.
    pub pool_ratios: BTreeMap<&'static str, Option<f64>>,
}

/// The figures compared across modes, in the order they are printed.
fn figures(m: &ModeReport) -> Vec<(&'static str, f64)> {
    let s = &m.served;
    vec![
        ("LIST", s.list as f64),
        ("WATCH", s.watch as f64),
        ("LIST+WATCH", (s.list + s.watch) as f64),
        ("GET", s.get as f64),
        ("discovery GETs", s.discovery as f64),
        ("writes", s.writes as f64),
        ("TokenReviews", s.token_reviews as f64),
        ("SubjectAccessReviews", s.subject_access_reviews as f64),
        ("watch events sent", s.watch_events as f64),
        ("watch event bytes", s.watch_event_bytes as f64),
        ("bytes written (GET/LIST/WATCH)", s.bytes_written as f64),
        ("open watches at the end", s.open_watches as f64),
        ("open watches, most", s.open_watches_max as f64),
        ("after start-up: LIST+WATCH", (m.steady.list + m.steady.watch) as f64),
        ("after start-up: watch events", m.steady.watch_events as f64),
        ("after start-up: watch event bytes", m.steady.watch_event_bytes as f64),
        ("after start-up: bytes written", m.steady.bytes_written as f64),
        ("binding→kubelet p50 ms", m.binding_to_kubelet.p50_ms),
        ("binding→kubelet p99 ms", m.binding_to_kubelet.p99_ms),
        ("binding→kubelet max ms", m.binding_to_kubelet.max_ms),
        ("binding→Running p50 ms", m.binding_to_running.p50_ms),
        ("binding→Running p99 ms", m.binding_to_running.p99_ms),
        ("kubelet→first status p50 ms", m.kubelet_to_first_status.p50_ms),
        ("kubelet→first status p90 ms", m.kubelet_to_first_status.p90_ms),
    ]
}

impl NodesReport {
    pub fn with_ratios(mut self) -> NodesReport {
        let of = |mode: &str| self.modes.iter().find(|m| m.mode == mode).map(figures);
        let ratios = |other: Option<Vec<(&'static str, f64)>>| {
            let mut out = BTreeMap::new();
            if let (Some(d), Some(t)) = (of("direct"), other) {
                for ((name, d), (_, t)) in d.into_iter().zip(t) {
                    out.insert(name, (d != 0.0).then(|| t / d));
                }
            }
            out
        };
        self.ratios = ratios(of("node-tier"));
        self.pool_ratios = ratios(of("pool"));
        self
    }
}

impl std::fmt::Display for NodesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "node scenario: {} nodes (kubelet, kube-proxy, CNI-like and log-agent-like clients each), {} pods in {} apps, {:.1} pod bindings/s, {:.0} s",
            self.nodes, self.pods, self.apps, self.pod_rate, self.seconds
        )?;
        write!(f, "  {:<34}", "the apiserver served")?;
        for m in &self.modes {
            write!(f, " {:>14}", m.mode)?;
        }
        if !self.ratios.is_empty() {
            write!(f, " {:>11}", "tier/direct")?;
        }
        if !self.pool_ratios.is_empty() {
            write!(f, " {:>11}", "pool/direct")?;
        }
        writeln!(f)?;
        let rows: Vec<Vec<(&str, f64)>> = self.modes.iter().map(figures).collect();
        for (i, (name, _)) in rows.first().map(Vec::as_slice).unwrap_or_default().iter().enumerate()
        {
            write!(f, "  {name:<34}")?;
            for row in &rows {
                let v = row[i].1;
                if name.ends_with("ms") {
                    write!(f, " {v:>14.1}")?;
                } else {
                    write!(f, " {v:>14.0}")?;
                }
            }
            for ratios in [&self.ratios, &self.pool_ratios] {
                match ratios.get(name) {
                    Some(Some(r)) => write!(f, " {r:>11.2}")?,
                    Some(None) => write!(f, " {:>11}", "-")?,
                    None => {}
                }
            }
            writeln!(f)?;
        }
        for m in &self.modes {
            write_mode(f, m)?;
        }
        Ok(())
    }
}

fn write_mode(f: &mut std::fmt::Formatter<'_>, m: &ModeReport) -> std::fmt::Result {
    writeln!(f, "{} ({:.1} s):", m.mode, m.seconds)?;
    let reads: Vec<String> = m
        .served
        .reads_by_resource
        .iter()
        .map(|(r, verbs)| {
            let v: Vec<String> = verbs.iter().map(|(verb, n)| format!("{verb} {n}")).collect();
            format!("{r} {}", v.join("/"))
        })
        .collect();
    writeln!(f, "  reads by resource: {}", reads.join(", "))?;
    let bytes: Vec<String> =
        m.served.bytes_by_verb.iter().map(|(v, n)| format!("{v} {n}")).collect();
    writeln!(f, "  bytes by verb: {}", bytes.join(", "))?;
    let events: Vec<String> =
        m.served.watch_events_by_resource.iter().map(|(r, n)| format!("{r} {n}")).collect();
    writeln!(f, "  watch events by resource: {}", events.join(", "))?;
    for c in &m.classes {
        writeln!(
            f,
            "  {:<52} {:>4} clients: {:>4} lists {:>4} watches {:>3} errors {:>2} expired, {}/{} synced (p50 {:.0} ms, max {:.0} ms), {} events",
            c.class, c.clients, c.lists, c.watches, c.errors, c.expired, c.synced, c.clients,
            c.sync_time.p50_ms, c.sync_time.max_ms, c.events
        )?;
    }
    let writes: Vec<String> = m
        .writes
        .iter()
        .map(|(k, o)| format!("{k} {} ok/{} failed/{} refused", o.ok, o.failed, o.refused))
        .collect();
    writeln!(f, "  agents' writes and named reads: {}", writes.join(", "))?;
    let c = &m.churn;
    writeln!(
        f,
        "  controllers: {} pods bound, {} deleted, {} endpointslice and {} service updates, {} failed",
        c.pods_created, c.pods_deleted, c.endpointslice_updates, c.service_updates, c.failed
    )?;
    writeln!(f, "  binding → kubelet sees the pod: {}", m.binding_to_kubelet)?;
    writeln!(f, "  binding → kubelet reports it Running: {}", m.binding_to_running)?;
    writeln!(f, "  kubelet sees the pod → its first status write: {}", m.kubelet_to_first_status)?;
    writeln!(
        f,
        "  final views equal to the apiserver's: {}/{}{}",
        m.views.equal,
        m.views.checked,
        if m.views.differing.is_empty() {
            String::new()
        } else {
            format!(" — {}", m.views.differing.join("; "))
        }
    )?;
    if let Some(o) = &m.failover {
        let back = o
            .all_back_after_s
            .map_or("not by the end".to_string(), |s| format!("{s:.0} s after its restart"));
        writeln!(
            f,
            "  pool replica pool-0 killed at {:.0} s, started again at {:.0} s; every node tier back on its first upstream: {back}; switches away {}, back {}; on their first upstream at the end: {}",
            o.killed_at_s, o.restarted_at_s, o.switches_away, o.switches_back, o.nodes_on_first_upstream
        )?;
    }
    if let Some(p) = &m.pool {
        let calls: Vec<String> = p.upstream_calls.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(f, "  pool upstream calls (all replicas): {}", calls.join(", "))?;
        let auth: Vec<String> = p.auth_decisions.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(f, "  pool auth decisions (all replicas): {}", auth.join(", "))?;
    }
    if let Some(k) = &m.kubeplex {
        let calls: Vec<String> = k.upstream_calls.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(f, "  kubeplex upstream calls (all nodes): {}", calls.join(", "))?;
        let auth: Vec<String> = k.auth_decisions.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(f, "  kubeplex auth decisions (all nodes): {}", auth.join(", "))?;
        let served: Vec<String> = k.served.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(f, "  kubeplex answered (resource verb source code): {}", served.join(", "))?;
        let mut per_cache: BTreeMap<&str, (usize, u64, u64)> = BTreeMap::new();
        for c in &k.caches {
            let e = per_cache.entry(&c.cache).or_default();
            *e = (e.0 + 1, e.1 + c.objects, e.2 + c.watchers);
        }
        for (cache, (nodes, objects, watchers)) in per_cache {
            writeln!(f, "  kubeplex cache {cache}: on {nodes} nodes, {objects} objects, {watchers} watchers in all")?;
        }
        if k.caches_without_watchers.is_empty() {
            writeln!(f, "  every kubeplex cache had watchers")?;
        } else {
            writeln!(f, "  caches without watchers: {}", k.caches_without_watchers.join(", "))?;
        }
    }
    Ok(())
}
