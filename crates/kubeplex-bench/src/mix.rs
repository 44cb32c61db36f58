//! `mix`: a realistic set of nodes' clients, all started together (a cold start), against a
//! target — the upstream directly, or kubeplex in front of it — and what reached the upstream:
//! its own `apiserver_request_total` LIST and WATCH counts for the run, set against the
//! clients' list and watch requests (the offload ratio).
//!
//! Per simulated node: a kubelet (its pods, protobuf, `spec.nodeName` selector, WatchList) and a
//! kube-proxy (services and endpointslices, protobuf, WatchList, kube-proxy's label selector).
//! Cluster-wide: agents (all pods, JSON, LIST at `resourceVersion=0` then WATCH), one
//! namespaced ConfigMap informer (the same way), and `kubectl get pods -A` runs (Tables, paged
//! by 500, resourceVersion unset) spread over the run. A writer patches pods — and nothing
//! else, so the other resources stay quiet, as services and endpointslices mostly are.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use super::hist::Summary;
use super::informer::{self, Informer, Start, Tally, Watched};
use super::target::{calls_by_verb, scrape, Target};

/// The resources the mix reads, as `apiserver_request_total` names them.
pub const RESOURCES: [&str; 4] = ["pods", "services", "endpointslices", "configmaps"];
/// kube-proxy ignores headless services and services another proxy implements
/// (`pkg/proxy`: `!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless`),
/// on both its informers.
const KUBE_PROXY_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";
/// Upper bounds on the mix's size, so a typo cannot open a million connections.
pub const MAX_NODES: usize = 5_000;
pub const MAX_AGENTS: usize = 1_000;
pub const MAX_KUBECTL: usize = 10_000;
/// Pages one `kubectl get` may follow.
const MAX_KUBECTL_PAGES: usize = 1_000;

#[derive(Debug, Clone)]
pub struct MixSpec {
    pub nodes: usize,
    pub agents: usize,
    /// `kubectl get pods -A` runs, spread evenly over the run (the first at its start).
    pub kubectl: usize,
    pub writes_per_second: f64,
    pub duration: Duration,
    /// Namespace of the ConfigMap informer and of the pods the writer patches.
    pub namespace: String,
    /// The writer patches pods `bench-000000` .. of `namespace` (seeded beforehand).
    pub objects: usize,
    /// The upstream's `/metrics` (its `apiserver_request_total`).
    pub upstream_metrics: String,
    /// kubeplex's admin `/metrics`, when the target is kubeplex: its own upstream calls by
    /// cache and kind (list, watch, watchlist, proof_list, proof_watch).
    pub proxy_metrics: Option<String>,
    pub allow_remote: bool,
}

/// One class of clients and what they did.
#[derive(Debug, Clone, Serialize)]
pub struct ClassReport {
    pub class: String,
    pub clients: usize,
    pub lists: u64,
    pub watches: u64,
    pub errors: u64,
    pub events: u64,
    pub expired: u64,
    pub synced: u64,
    /// From the run's start to each client's first sync (kubectl: to its last page).
    pub sync_time: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct MixReport {
    pub target: String,
    pub seconds: f64,
    pub nodes: usize,
    pub agents: usize,
    pub kubectl: usize,
    pub classes: Vec<ClassReport>,
    pub client_lists: u64,
    pub client_watches: u64,
    /// The upstream's requests during the run, by resource and verb (the writer's PATCHes too).
    pub upstream: BTreeMap<String, BTreeMap<String, i64>>,
    pub upstream_lists: i64,
    pub upstream_watches: i64,
    /// With `--proxy-metrics`: kubeplex's own upstream calls during the run,
    /// `resource encoding verb` (list, watch, watchlist, proof_list, proof_watch), and the
    /// lists and watches it passed through, `resource VERB passed through`.
    pub proxy_calls: Option<BTreeMap<String, i64>>,
    /// Client list+watch requests per upstream list+watch request (`None`: none reached it).
    pub offload_ratio: Option<f64>,
    pub writes: u64,
    pub write_errors: u64,
}

impl std::fmt::Display for MixReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "client mix against {} for {:.1} s: {} nodes (kubelet + kube-proxy each), {} agents, {} kubectl runs, {} writes ({} failed)",
            self.target, self.seconds, self.nodes, self.agents, self.kubectl, self.writes, self.write_errors
        )?;
        for c in &self.classes {
            writeln!(
                f,
                "  {:<58} {:>4} clients: {:>5} lists {:>5} watches {:>3} errors {:>3} expired, {}/{} synced, {} events; sync p50 {:.0} ms, max {:.0} ms",
                c.class, c.clients, c.lists, c.watches, c.errors, c.expired, c.synced, c.clients,
                c.events, c.sync_time.p50_ms, c.sync_time.max_ms
            )?;
        }
        writeln!(
            f,
            "  clients sent {} LIST + {} WATCH = {}",
            self.client_lists,
            self.client_watches,
            self.client_lists + self.client_watches
        )?;
        for (resource, verbs) in &self.upstream {
            let parts: Vec<String> = verbs.iter().map(|(v, n)| format!("{v} {n}")).collect();
            writeln!(f, "  upstream {resource:<15} {}", parts.join(", "))?;
        }
        write!(
            f,
            "  upstream received {} LIST + {} WATCH = {}",
            self.upstream_lists,
            self.upstream_watches,
            self.upstream_lists + self.upstream_watches
        )?;
        if let Some(calls) = &self.proxy_calls {
            let parts: Vec<String> = calls.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(f, "\n  kubeplex: {}", parts.join(", "))?;
        }
        match self.offload_ratio {
            Some(r) => write!(f, "\n  offload ratio (client / upstream list+watch): {r:.1}"),
            None => write!(f, "\n  offload ratio: no list or watch reached the upstream"),
        }
    }
}

/// A class of clients to start.
struct Class {
    name: String,
    informers: Vec<Informer>,
}

fn classes(spec: &MixSpec) -> Vec<Class> {
    let watch_list = |collection: &str, selectors, user_agent| Informer {
        collection: collection.to_string(),
        selectors,
        protobuf: true,
        start: Start::WatchList,
        user_agent,
    };
    let proxy_selector = || vec![("labelSelector", KUBE_PROXY_SELECTOR.to_string())];
    let nodes = 0..spec.nodes;
    vec![
        Class {
            name: "kubelet: pods, protobuf, spec.nodeName, WatchList".into(),
            informers: nodes
                .clone()
                .map(|n| {
                    let node = vec![("fieldSelector", format!("spec.nodeName=node-{n}"))];
                    watch_list("/api/v1/pods", node, "kubelet/v1.36.0")
                })
                .collect(),
        },
        Class {
            name: "kube-proxy: services, protobuf, WatchList".into(),
            informers: nodes
                .clone()
                .map(|_| watch_list("/api/v1/services", proxy_selector(), "kube-proxy/v1.36.0"))
                .collect(),
        },
        Class {
            name: "kube-proxy: endpointslices, protobuf, WatchList".into(),
            informers: nodes
                .map(|_| {
                    let c = "/apis/discovery.k8s.io/v1/endpointslices";
                    watch_list(c, proxy_selector(), "kube-proxy/v1.36.0")
                })
                .collect(),
        },
        Class {
            name: "agent: all pods, JSON, LIST rv=0 + WATCH".into(),
            informers: (0..spec.agents)
                .map(|_| Informer {
                    collection: "/api/v1/pods".into(),
                    selectors: Vec::new(),
                    protobuf: false,
                    start: Start::ListWatch,
                    user_agent: "agent/v0.36.0",
                })
                .collect(),
        },
        Class {
            name: format!("configmap informer: {}, JSON, LIST rv=0 + WATCH", spec.namespace),
            informers: vec![Informer {
                collection: format!("/api/v1/namespaces/{}/configmaps", spec.namespace),
                selectors: Vec::new(),
                protobuf: false,
                start: Start::ListWatch,
                user_agent: "controller/v0.36.0",
            }],
        },
    ]
}

/// Runs the mix for `spec.duration` and reads the upstream's counts before and after.
pub async fn run(
    target: Arc<Target>,
    writer: Arc<Target>,
    spec: MixSpec,
) -> anyhow::Result<MixReport> {
    let upstream_before = upstream_calls(&spec).await?;
    let proxy_before = match &spec.proxy_metrics {
        Some(url) => Some(proxy_calls(&scrape(url, spec.allow_remote).await?)),
        None => None,
    };
    let started = Instant::now();
    let deadline = started + spec.duration;
    let mut tasks = tokio::task::JoinSet::new();
    let mut tallies = Vec::new();
    for class in classes(&spec) {
        let tally = Arc::new(Tally::default());
        tallies.push((class.name, class.informers.len(), tally.clone()));
        for informer in class.informers {
            let (target, tally) = (target.clone(), tally.clone());
            // Every client starts at once; the run's end drops them, connections and all.
            tasks.spawn(async move {
                let run = informer::run(target, Watched::counting(informer), tally, started, None);
                let _ = tokio::time::timeout_at(deadline, run).await;
            });
        }
    }
    let kubectl = Arc::new(Tally::default());
    tallies.push(("kubectl get pods -A: Table, limit=500".into(), spec.kubectl, kubectl.clone()));
    for k in 0..spec.kubectl {
        let at = started + spec.duration.mul_f64(k as f64 / spec.kubectl as f64);
        let (target, tally) = (target.clone(), kubectl.clone());
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let _ = tokio::time::timeout_at(deadline, kubectl_get(&target, &tally)).await;
        });
    }
    let writes = Arc::new(WriteCounts::default());
    {
        let (writer, writes, spec) = (writer.clone(), writes.clone(), spec.clone());
        tasks.spawn(async move {
            let _ = tokio::time::timeout_at(deadline, write(&writer, &spec, &writes)).await;
        });
    }
    while tasks.join_next().await.is_some() {}
    let seconds = started.elapsed().as_secs_f64();
    // The target's own work for the run (a freshness probe under way) has been counted by the
    // upstream when it started; a moment lets the last requests' counters land.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let upstream_after = upstream_calls(&spec).await?;
    let proxy_after = match &spec.proxy_metrics {
        Some(url) => Some(proxy_calls(&scrape(url, spec.allow_remote).await?)),
        None => None,
    };

    let classes: Vec<ClassReport> = tallies
        .into_iter()
        .map(|(class, clients, t)| ClassReport {
            class,
            clients,
            lists: t.lists.load(Ordering::Relaxed),
            watches: t.watches.load(Ordering::Relaxed),
            errors: t.errors.load(Ordering::Relaxed),
            events: t.events.load(Ordering::Relaxed),
            expired: t.expired.load(Ordering::Relaxed),
            synced: t.synced.load(Ordering::Relaxed),
            sync_time: t.sync_time.lock().unwrap_or_else(|p| p.into_inner()).summary(),
        })
        .collect();
    let upstream: BTreeMap<String, BTreeMap<String, i64>> = upstream_after
        .iter()
        .map(|(resource, after)| {
            let empty = BTreeMap::new();
            let before = upstream_before.get(resource).unwrap_or(&empty);
            (resource.clone(), delta(before, after))
        })
        .collect();
    let verb_total =
        |verb: &str| upstream.values().map(|v| v.get(verb).copied().unwrap_or(0)).sum::<i64>();
    let (upstream_lists, upstream_watches) = (verb_total("LIST"), verb_total("WATCH"));
    let client_lists = classes.iter().map(|c| c.lists).sum();
    let client_watches = classes.iter().map(|c| c.watches).sum();
    let upstream_total = upstream_lists + upstream_watches;
    Ok(MixReport {
        target: target.url.clone(),
        seconds,
        nodes: spec.nodes,
        agents: spec.agents,
        kubectl: spec.kubectl,
        classes,
        client_lists,
        client_watches,
        upstream,
        upstream_lists,
        upstream_watches,
        proxy_calls: proxy_before.zip(proxy_after).map(|(b, a)| delta(&b, &a)),
        offload_ratio: (upstream_total > 0)
            .then(|| (client_lists + client_watches) as f64 / upstream_total as f64),
        writes: writes.ok.load(Ordering::Relaxed),
        write_errors: writes.failed.load(Ordering::Relaxed),
    })
}

/// `kubectl get pods -A`: a Table of all pods, resourceVersion unset, 500 rows a page.
async fn kubectl_get(target: &Target, tally: &Tally) {
    let started = Instant::now();
    let mut path = "/api/v1/pods?limit=500".to_string();
    for _ in 0..MAX_KUBECTL_PAGES {
        tally.lists.fetch_add(1, Ordering::Relaxed);
        let page =
            informer::get_list(target, &path, informer::ACCEPT_TABLE, "kubectl/v1.36.0").await;
        match page {
            Ok(page) => {
                tally.events.fetch_add(page.items, Ordering::Relaxed);
                let Some(token) = page.continue_token else {
                    tally.synced.fetch_add(1, Ordering::Relaxed);
                    let mut hist = tally.sync_time.lock().unwrap_or_else(|p| p.into_inner());
                    hist.record(started.elapsed());
                    return;
                };
                let token: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
                path = format!("/api/v1/pods?continue={token}&limit=500");
            }
            Err(e) => {
                tracing::debug!(error = %e, "kubectl get failed");
                tally.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

#[derive(Default)]
struct WriteCounts {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// Patches the pods `bench-i` of the namespace in turn at the spec's rate, one at a time.
async fn write(writer: &Target, spec: &MixSpec, counts: &WriteCounts) {
    if spec.writes_per_second.is_nan() || spec.writes_per_second <= 0.0 || spec.objects == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / spec.writes_per_second));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let total = (spec.writes_per_second * spec.duration.as_secs_f64()).ceil() as u64;
    for n in 0..total {
        tick.tick().await;
        let name = format!("bench-{:06}", n as usize % spec.objects);
        let path = format!("/api/v1/namespaces/{}/pods/{name}", spec.namespace);
        let patch = json!({"metadata": {"annotations": {"kubeplex-bench/mix": n.to_string()}}});
        let ct = [("Content-Type", "application/merge-patch+json")];
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        match writer.fetch(Method::PATCH, &path, &ct, Some(body)).await {
            Ok((status, _)) if status.is_success() => counts.ok.fetch_add(1, Ordering::Relaxed),
            other => {
                if counts.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(result = ?other.map(|(s, _)| s), path, "write failed");
                }
                0
            }
        };
    }
}

/// The upstream's request counts for the mix's resources, by resource and verb.
async fn upstream_calls(spec: &MixSpec) -> anyhow::Result<BTreeMap<String, BTreeMap<String, u64>>> {
    let text = scrape(&spec.upstream_metrics, spec.allow_remote).await?;
    Ok(RESOURCES.iter().map(|r| (r.to_string(), calls_by_verb(&text, r))).collect())
}

/// kubeplex's own upstream calls, `resource encoding verb` (`kubeplex_upstream_calls_total`),
/// and the list and watch requests it passed through, `resource VERB`
/// (`kubeplex_requests_total{source="upstream"}`).
pub fn proxy_calls(metrics: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some((name, rest)) = line.split_once('{') else { continue };
        let Some((labels, value)) = rest.rsplit_once("} ") else { continue };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
                .unwrap_or("")
        };
        let key = match name {
            "kubeplex_upstream_calls_total" => {
                format!("{} {} {}", label("resource"), label("encoding"), label("verb"))
            }
            "kubeplex_requests_total"
                if label("source") == "upstream" && matches!(label("verb"), "LIST" | "WATCH") =>
            {
                format!("{} {} passed through", label("resource"), label("verb"))
            }
            _ => continue,
        };
        let value = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        *out.entry(key).or_insert(0) += value;
    }
    out
}

/// `after - before` per key, keeping the keys that moved.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), *n as i64 - before.get(k).copied().unwrap_or(0) as i64))
        .filter(|(_, n)| *n != 0)
        .collect()
}

#[cfg(test)]
mod tests;
