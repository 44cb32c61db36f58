//! `nodes`: N nodes whose agents read as the Kubernetes 1.36 ones do (see [`kubelet`] and
//! [`agents`]), each agent a client of its own, against a fake apiserver with the Node and RBAC
//! authorizers on — first directly, then through a node tier of N kubeplex processes (one per
//! node, in node mode, with the shipped node configuration) — while controllers bind pods,
//! roll them out and change endpoint slices and services ([`churn`]). It reports what the
//! apiserver served in each mode (requests by verb, watch events, bytes, open watches, reviews),
//! the time from a pod's binding to its kubelet seeing it, whether every client's final view
//! equals the apiserver's, and kubeplex's own upstream calls and caches.
//!
//! Each mode starts a fresh fake apiserver in this process with the same cluster, so the two
//! are measured from the same start. Everything is bounded: nodes, the run's length, every loop.

pub(crate) mod agents;
mod churn;
pub(crate) mod cluster;
mod kubelet;
pub(crate) mod pki;
pub(crate) mod report;
mod shared;
pub(crate) mod tier;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kubeplex_net::scratch::Pki;
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub use report::NodesReport;
use report::{CacheReport, Counters, FailoverReport, ModeReport, Served, TierReport, Views};
use shared::Shared;
pub use tier::TierConfig;

use crate::mix::ClassReport;
use crate::target::Target;

/// At most this many nodes without `allow_large` (each a kubeplex process in the node tier).
pub const DEFAULT_MAX_NODES: usize = 20;
/// And never more than this.
pub const MAX_NODES: usize = 500;

/// Which side of the comparison a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every agent talks to the apiserver.
    Direct,
    /// Every agent of node i talks to node i's kubeplex.
    NodeTier,
    /// Every agent of node i talks to node i's kubeplex, whose upstreams are a pool tier of two
    /// kubeplex replicas (then the apiserver); one replica is killed mid-run and started again.
    Pool,
    /// Direct, then the node tier.
    Both,
    /// Direct, the node tier, then the node tier with the pool.
    All,
}

/// Pool replicas in the pool mode.
pub const POOL_REPLICAS: usize = 2;
/// The longest the fake apiserver's Node authorizer takes to have a binding in its graph
/// (1.36 under the load of 10 hollow nodes: about a second).
const GRAPH_LAG_MAX: Duration = Duration::from_millis(1000);

/// How long a killed pool replica stays down before it is started again.
const POOL_DOWN: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub nodes: usize,
    /// Pods bound to each node before the run.
    pub pods_per_node: usize,
    /// Apps (a Deployment's pods, its Service, EndpointSlice, ConfigMap and Secret each).
    pub apps: usize,
    pub namespaces: usize,
    pub duration: Duration,
    /// Rollout steps a second: each deletes a pod and binds a new one.
    pub pod_rate: f64,
    /// A Service changes this often (0: never).
    pub service_every: Duration,
    /// Each kubelet patches its node status this often.
    pub node_status_every: Duration,
    /// After the controllers stop, before the views are compared.
    pub settle: Duration,
    pub mode: Mode,
    pub tier: TierConfig,
    /// The node DaemonSet manifest, for kubeplex's RBAC.
    pub daemonset: PathBuf,
    /// The pool tier's manifest, for the pool's and the node tiers' RBAC there.
    pub pool_manifest: PathBuf,
    /// Where certificates, kubeconfigs and kubeplex logs go.
    pub work_dir: PathBuf,
}

/// Runs the scenario in the spec's mode(s).
pub async fn run(spec: NodeSpec) -> anyhow::Result<NodesReport> {
    std::fs::create_dir_all(&spec.work_dir)
        .with_context(|| format!("creating {}", spec.work_dir.display()))?;
    let modes: &[&'static str] = match spec.mode {
        Mode::Direct => &["direct"],
        Mode::NodeTier => &["node-tier"],
        Mode::Pool => &["pool"],
        Mode::Both => &["direct", "node-tier"],
        Mode::All => &["direct", "node-tier", "pool"],
    };
    let mut reports = Vec::new();
    for mode in modes {
        reports.push(run_mode(&spec, mode).await.with_context(|| format!("the {mode} run"))?);
    }
    Ok(NodesReport {
        nodes: spec.nodes,
        pods: spec.nodes * spec.pods_per_node,
        apps: spec.apps,
        pod_rate: spec.pod_rate,
        seconds: spec.duration.as_secs_f64(),
        modes: reports,
        ratios: BTreeMap::new(),
        pool_ratios: BTreeMap::new(),
    }
    .with_ratios())
}

/// Where node i's agents connect, and as whom.
struct Endpoints {
    kubelet: Arc<Target>,
    kube_proxy: Arc<Target>,
    cni: Arc<Target>,
    logs: Arc<Target>,
}

async fn run_mode(spec: &NodeSpec, mode: &'static str) -> anyhow::Result<ModeReport> {
    let dir = spec.work_dir.join(mode);
    std::fs::create_dir_all(&dir)?;
    let policy = cluster::policy(spec.nodes, &spec.daemonset, &spec.pool_manifest)?;
    let (mut churn, pods) = churn::Churn::initial(spec);
    let mut objects = cluster::objects(spec);
    objects.extend(pods);
    // The Node authorizer's graph lags each binding as a loaded real apiserver's does (most
    // within the kubelet's first read, the rest up to about a second), not every one by the
    // most measured: that would make the agents' direct reads slower than they are.
    let sim = SimBuilder::new().seed(objects).auth(policy).node_graph_lag_measured(GRAPH_LAG_MAX);
    let sim = Arc::new(sim.start().await?);
    churn.link(&sim)?;
    let before = Counters::read(&sim.metrics_text());
    let started = tokio::time::Instant::now();

    // The node tier starts before its agents, as a DaemonSet's pods do: its caches' start-up
    // is part of what it costs the apiserver.
    let pki = Pki::new("kubeplex-bench-cluster-ca");
    let mut pool = match mode {
        "pool" => Some(
            tier::Tier::start_pool(
                &spec.tier,
                POOL_REPLICAS,
                &dir,
                &pki,
                &sim.url(),
                cluster::POOL_TOKEN,
            )
            .await?,
        ),
        _ => None,
    };
    let upstreams = pool.as_ref().map(|p| tier::PoolUpstreams {
        replicas: p.nodes.iter().map(|k| k.addr).collect(),
        ca: dir.join("client-ca.crt"),
    });
    let mut tier = match mode {
        "node-tier" | "pool" => Some(
            tier::Tier::start(
                &spec.tier,
                spec.nodes,
                &dir,
                &pki,
                &sim.url(),
                cluster::node_tier_token,
                upstreams.as_ref(),
            )
            .await?,
        ),
        _ => None,
    };
    let mut endpoints = Vec::with_capacity(spec.nodes);
    for i in 0..spec.nodes {
        endpoints.push(endpoints_of(&dir, &sim, tier.as_ref(), &pki, i)?);
    }

    let shared = Shared::new();
    let mut agents = JoinSet::new();
    let config = kubelet::KubeletConfig {
        node_status_every: spec.node_status_every,
        duration: spec.duration,
    };
    for (i, e) in endpoints.into_iter().enumerate() {
        let node = cluster::node_name(i);
        let (logs_tx, logs_rx) = mpsc::unbounded_channel();
        agents.spawn(kubelet::run(node.clone(), e.kubelet, shared.clone(), config, logs_tx));
        agents.spawn(agents::kube_proxy(node.clone(), e.kube_proxy, shared.clone()));
        agents.spawn(agents::cni(node, e.cni, shared.clone()));
        agents.spawn(agents::log_agent(e.logs, shared.clone(), logs_rx));
    }
    // Pods are bound once every kubelet watches its own (a node joins, then gets pods): the
    // binding latency is the steady state's, the agents' start-up is in their sync times.
    let kubelets_synced = crate::target::eventually(Duration::from_secs(60), || {
        shared.synced(kubelet::PODS) >= spec.nodes as u64
    })
    .await;
    if !kubelets_synced {
        tracing::warn!("not every kubelet synced its pods within 60 s; binding pods anyway");
    }
    // The start-up ends when every agent's informers have synced (a kubelet's named watches
    // come and go with its pods, and are part of what follows).
    let all_synced = crate::target::eventually(Duration::from_secs(60), || {
        shared.all_synced_but(kubelet::NAMED)
    })
    .await;
    if !all_synced {
        tracing::warn!("not every agent synced within 60 s; the steady state starts anyway");
    }
    let synced_text = sim.metrics_text();
    let _ = std::fs::write(dir.join("apiserver-metrics-synced.txt"), &synced_text);
    let steady_from = Counters::read(&synced_text);
    let counts = Arc::new(churn::ChurnCounts::default());
    let controllers = tokio::spawn(churn.run(sim.clone(), shared.clone(), counts.clone()));
    let mut open_max = 0.0f64;
    let mut sample = tokio::time::interval(Duration::from_secs(1));
    let mut controllers = std::pin::pin!(controllers);
    // The pool mode: a replica killed halfway, started again after POOL_DOWN.
    let kill_at = tokio::time::Instant::now() + spec.duration / 2;
    let mut failover = pool.as_ref().map(|_| FailoverReport::default());
    let replicas: Vec<std::net::SocketAddr> =
        pool.as_ref().map(|p| p.nodes.iter().map(|k| k.addr).collect()).unwrap_or_default();
    let mut killed: Option<tokio::time::Instant> = None;
    let mut restarted: Option<tokio::time::Instant> = None;
    let down = POOL_DOWN.min(spec.duration / 4);
    let mut churn_done = false;
    // After the churn, a failover under way is seen to its end, for at most this long.
    let mut give_up: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = &mut controllers, if !churn_done => {
                if failover.is_none() {
                    break;
                }
                churn_done = true;
                give_up = Some(tokio::time::Instant::now() + Duration::from_secs(40));
            }
            _ = sample.tick() => {
                open_max = open_max.max(Counters::read(&sim.metrics_text()).open_watches);
                let now = tokio::time::Instant::now();
                let (Some(p), Some(t), Some(report)) = (pool.as_mut(), tier.as_ref(), failover.as_mut()) else {
                    if churn_done { break } else { continue }
                };
                match (killed, restarted) {
                    (None, _) if now >= kill_at => {
                        let _ = std::fs::write(dir.join("apiserver-metrics-at-kill.txt"), sim.metrics_text());
                        p.kill(0).await;
                        killed = Some(now);
                        report.killed_at_s = (now - started).as_secs_f64();
                    }
                    (Some(k), None) if now >= k + down => {
                        p.restart(0).await.context("restarting pool-0")?;
                        let now = tokio::time::Instant::now();
                        restarted = Some(now);
                        report.restarted_at_s = (now - started).as_secs_f64();
                    }
                    (Some(_), Some(r)) if report.all_back_after_s.is_none() => {
                        let back = on_first_upstream(t, &replicas).await;
                        if back == t.nodes.len() {
                            report.all_back_after_s = Some((now - r).as_secs_f64());
                        }
                    }
                    _ => {}
                }
                let failover_done = report.all_back_after_s.is_some();
                if churn_done && (failover_done || give_up.is_some_and(|g| now >= g)) {
                    break;
                }
            }
        }
    }
    let steady = Served::between(&steady_from, &Counters::read(&sim.metrics_text()));
    tokio::time::sleep(spec.settle).await;
    let views = compare_views(&sim, &shared);
    let running = Counters::read(&sim.metrics_text());
    // kubeplex's counters start with the process: its start-up is part of the run.
    let pool_report = match &pool {
        Some(p) => Some(tier_report(p, &dir).await?),
        None => None,
    };
    let tier_report = match &tier {
        Some(t) => Some(tier_report(t, &dir).await?),
        None => None,
    };
    if let (Some(report), Some(t)) = (failover.as_mut(), tier.as_ref()) {
        for k in &t.nodes {
            for (name, labels, n) in report::series(&k.metrics().await?) {
                if name == "kubeplex_upstream_switches_total" {
                    match labels.get("direction").map(String::as_str) {
                        Some("away") => report.switches_away += n as u64,
                        Some("back") => report.switches_back += n as u64,
                        _ => {}
                    }
                }
            }
        }
        report.nodes_on_first_upstream = on_first_upstream(t, &replicas).await;
    }
    // The run's end: the agents go, then the tier, so that every watch has ended (and been
    // counted) when the apiserver is read.
    agents.shutdown().await;
    if let Some(t) = tier.as_mut() {
        t.stop().await;
    }
    if let Some(p) = pool.as_mut() {
        p.stop().await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_text = sim.metrics_text();
    // The fake apiserver's whole /metrics page, for a closer look than the report's sums
    // (requests by code, by resource).
    let _ = std::fs::write(dir.join("apiserver-metrics.txt"), &after_text);
    let after = Counters::read(&after_text);
    let mut served = Served::between(&before, &after);
    served.open_watches = (running.open_watches - before.open_watches) as i64;
    served.open_watches_max = (open_max.max(running.open_watches) - before.open_watches) as i64;
    let w = &shared.writes;
    let writes = BTreeMap::from([
        ("lease", w.lease.report()),
        ("node status", w.node_status.report()),
        ("pod GET", w.pod_get.report()),
        ("pod status", w.pod_status.report()),
        ("events", w.events.report()),
        ("pod ConfigMaps/Secrets read", w.pod_sources.report()),
        ("log agent GET", w.log_agent_get.report()),
    ]);
    let binding = shared.binding_latency.lock().unwrap_or_else(|p| p.into_inner()).summary();
    let pod_start = shared.pod_start.lock().unwrap_or_else(|p| p.into_inner()).summary();
    let first_status = shared.first_status.lock().unwrap_or_else(|p| p.into_inner()).summary();
    Ok(ModeReport {
        mode,
        seconds: started.elapsed().as_secs_f64(),
        served,
        steady,
        binding_to_kubelet: binding,
        binding_to_running: pod_start,
        kubelet_to_first_status: first_status,
        classes: classes(&shared),
        writes,
        churn: counts.report(),
        views,
        kubeplex: tier_report,
        pool: pool_report,
        failover,
    })
}

/// How many of the node tier's kubeplexes use their first upstream now: node i's is pool
/// replica i mod `replicas.len()` (`tier::Tier::start`).
async fn on_first_upstream(t: &tier::Tier, replicas: &[std::net::SocketAddr]) -> usize {
    let mut on = 0;
    for (i, k) in t.nodes.iter().enumerate() {
        let Some(first) = replicas.get(i % replicas.len().max(1)) else { continue };
        let Ok(text) = k.metrics().await else { continue };
        let active = format!("kubeplex_upstream_active{{server=\"https://{first}\"}} 1");
        on += usize::from(text.lines().any(|l| l == active));
    }
    on
}

/// Node `i`'s agents' targets: the apiserver with their tokens (the kubelet's standing in for
/// its certificate), or node i's kubeplex over TLS with the kubelet's client certificate and
/// the others' tokens.
fn endpoints_of(
    dir: &std::path::Path,
    sim: &Sim,
    tier: Option<&tier::Tier>,
    pki: &Pki,
    i: usize,
) -> anyhow::Result<Endpoints> {
    let node = cluster::node_name(i);
    let (server, ca) = match tier {
        Some(t) => (format!("https://{}", t.nodes[i].addr), Some(pki.ca_pem.as_str())),
        None => (sim.url(), None),
    };
    let kubelet_user = match tier {
        Some(_) => pki::cert_user(&pki.client(&format!("system:node:{node}"), &["system:nodes"])),
        None => pki::token_user(&cluster::kubelet_token(i)),
    };
    let open = |name: &str, user: Value| -> anyhow::Result<Arc<Target>> {
        let path = pki::write_kubeconfig(dir, &format!("{name}-{node}"), &server, ca, user)?;
        Ok(Arc::new(Target::open(None, Some(&path), false)?))
    };
    Ok(Endpoints {
        kubelet: open("kubelet", kubelet_user)?,
        kube_proxy: open("kube-proxy", pki::token_user(&cluster::kube_proxy_token(i)))?,
        cni: open("cni", pki::token_user(&cluster::cni_token(i)))?,
        logs: open("logs", pki::token_user(&cluster::logs_token(i)))?,
    })
}

fn classes(shared: &Shared) -> Vec<ClassReport> {
    shared
        .classes()
        .into_iter()
        .map(|c| {
            let t = &c.tally;
            let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            ClassReport {
                class: c.name.to_string(),
                clients: n(&c.clients) as usize,
                lists: n(&t.lists),
                watches: n(&t.watches),
                errors: n(&t.errors),
                events: n(&t.events),
                expired: n(&t.expired),
                synced: n(&t.synced),
                sync_time: t.sync_time.lock().unwrap_or_else(|p| p.into_inner()).summary(),
            }
        })
        .collect()
}

/// `(group, resource, namespace)` of a collection path.
fn collection_of(path: &str) -> (String, String, Option<String>) {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => &parts[2..],
        _ => &parts[3.min(parts.len())..],
    };
    let group =
        if parts.first() == Some(&"apis") { parts.get(1).copied().unwrap_or("") } else { "" };
    match rest {
        ["namespaces", ns, resource] => (group.into(), resource.to_string(), Some(ns.to_string())),
        [resource] => (group.into(), resource.to_string(), None),
        _ => (group.into(), String::new(), None),
    }
}

/// Every informer's store against the apiserver's current state for the same selection
/// (`Sim::select`: no request, so the figures are not touched).
fn compare_views(sim: &Sim, shared: &Shared) -> Views {
    let mut views = Views::default();
    for (class, w) in shared.views() {
        views.checked += 1;
        let (group, resource, ns) = collection_of(&w.spec.collection);
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &w.spec.selectors {
            query.append_pair(k, v);
        }
        let expected: Result<BTreeMap<String, String>, _> =
            sim.select(&group, &resource, ns.as_deref(), &query.finish()).map(|items| {
                items
                    .iter()
                    .map(|o| {
                        let m = &o["metadata"];
                        let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
                        (format!("{}/{}", s("namespace"), s("name")), s("resourceVersion"))
                    })
                    .collect()
            });
        let got = w.objects.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match expected {
            Ok(expected) if expected == got && w.synced.load(Ordering::Relaxed) => views.equal += 1,
            other => {
                if views.differing.len() < 10 {
                    let how = match other {
                        Ok(expected) => format!(
                            "{} objects, {} expected, {} differ, synced {}",
                            got.len(),
                            expected.len(),
                            expected.iter().filter(|(k, v)| got.get(*k) != Some(v)).count()
                                + got.keys().filter(|k| !expected.contains_key(*k)).count(),
                            w.synced.load(Ordering::Relaxed)
                        ),
                        Err(e) => e.message,
                    };
                    views.differing.push(format!("{class} {}: {how}", w.spec.collection));
                }
            }
        }
    }
    views
}

/// kubeplex's counters of interest summed over the tier: upstream calls (and reads passed
/// through), auth decisions, and the requests it answered.
async fn tier_calls(t: &tier::Tier) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut all = BTreeMap::new();
    for k in &t.nodes {
        let text = k.metrics().await?;
        for (key, n) in crate::mix::proxy_calls(&text) {
            *all.entry(key).or_insert(0) += n;
        }
        for (name, labels, n) in report::series(&text) {
            let label = |k: &str| labels.get(k).map_or("", String::as_str);
            let key = match name.as_str() {
                "kubeplex_auth_decisions_total" => {
                    format!("auth {} {} {}", label("kind"), label("result"), label("source"))
                }
                "kubeplex_requests_total" => format!(
                    "served {} {} {} {}",
                    label("resource"),
                    label("verb"),
                    label("source"),
                    label("code")
                ),
                _ => continue,
            };
            *all.entry(key).or_insert(0) += n as u64;
        }
    }
    Ok(all)
}

async fn tier_report(t: &tier::Tier, dir: &std::path::Path) -> anyhow::Result<TierReport> {
    let mut report = TierReport::default();
    for (key, n) in tier_calls(t).await?.into_iter().filter(|(_, n)| *n > 0) {
        if let Some(k) = key.strip_prefix("auth ") {
            report.auth_decisions.insert(k.to_string(), n as i64);
        } else if let Some(k) = key.strip_prefix("served ") {
            report.served.insert(k.to_string(), n as i64);
        } else {
            report.upstream_calls.insert(key, n as i64);
        }
    }
    for k in &t.nodes {
        let doc = k.caches().await?;
        // Kept with the run's files, for a closer look.
        let path = dir.join(format!("debug-caches-{}.json", k.node));
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)?;
        // And its /metrics page (its proofs, what it passed through and why).
        if let Ok(text) = k.metrics().await {
            std::fs::write(dir.join(format!("metrics-{}.txt", k.node)), text)?;
        }
        for c in doc["caches"].as_array().into_iter().flatten() {
            // Whatever else the document says about a cache (its scope, namespace) names it too.
            let mut name = format!(
                "{} {}",
                c["resource"].as_str().unwrap_or("?"),
                c["encoding"].as_str().unwrap_or("?")
            );
            for key in ["namespace", "field_selector", "label_selector"] {
                if let Some(s) = c.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()) {
                    name.push_str(&format!(" {key}={s}"));
                }
            }
            // The node's own name (a `{nodeName}` scope) reads as NODE, so nodes' caches sum.
            let name = name.replace(&k.node, "NODE");
            let watchers = c["watchers"].as_u64().unwrap_or(0);
            if watchers == 0 && !watched_soon(k, c).await {
                report.caches_without_watchers.push(format!("{} {name}", k.node));
            }
            report.caches.push(CacheReport {
                node: k.node.clone(),
                cache: name,
                objects: c["objects"].as_u64().unwrap_or(0),
                watchers,
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
pub(crate) mod tests;

/// Whether cache `c` of tier `k` (one of its `/debug/caches` entries, without a watcher when it
/// was read) has one within 3 s: an agent's watch ending (its timeout, a resync) is opened again
/// at once, and a snapshot taken in between is no cache without readers.
async fn watched_soon(k: &tier::Kubeplex, c: &Value) -> bool {
    let same = |o: &Value| {
        ["resource", "encoding", "namespace", "field_selector", "label_selector"]
            .iter()
            .all(|key| o.get(*key) == c.get(*key))
    };
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(doc) = k.caches().await else { continue };
        let watched = doc["caches"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| same(o) && o["watchers"].as_u64().unwrap_or(0) > 0);
        if watched {
            return true;
        }
    }
    false
}
