//! `scale`: a pool tier serving thousands of nodes (issue 30). N emulated nodes, many per
//! process, each one HTTP/2 connection per agent (or per node tier) as real ones hold them,
//! against an apiserver — the real one of `scripts/realcluster` (`--kubeconfig` with its CA to
//! sign the nodes' certificates), or the fake started here (`--sim`, the tests') — first
//! directly ([`node`]: what the kubelet and kube-proxy send), then through pool replicas (real
//! kubeplex processes with the shipped pool configuration; what each node's node tier sends
//! its pool), while a writer changes endpoint slices, services and pods ([`writer`]).
//!
//! Each mode reports what the apiserver served (requests by verb and resource, watch events and
//! bytes, open watches, its and etcd's CPU-seconds and RSS), the pool replicas' CPU-seconds and
//! RSS, the time until every node's watches synced, the time from a change to each node seeing
//! it, and whether every watcher's objects equal the apiserver's at the end. Every loop is
//! bounded in count and time; the nodes at most [`MAX_NODES`].

pub mod cluster;
mod disrupt;
mod link;
mod node;
mod report;
pub mod soak;
mod watcher;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::node::report::Counters;
use crate::node::tier::{prepare_dir, Tier, TierConfig};
use crate::target::{cpu_seconds, rss_bytes, Target};
use cluster::{Cluster, Shape, Truth, Who};
pub use report::{ModeReport, ScaleReport};
use watcher::Scope;

/// The most nodes a run emulates.
pub const MAX_NODES: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Direct,
    Pool,
    /// Direct, then through the pool.
    Both,
}

/// Whose agents act for the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agents {
    /// The scenario's own ([`node`]).
    Emulated,
    /// Real ones someone else starts (scripts/realcluster/calibrate.py: kubemark's hollow
    /// kubelets and kube-proxies, named as the scenario's nodes) when the file
    /// `agents-start` appears in the work directory: only the cluster's objects and the writer
    /// run here, directly. What the apiserver served them is compared with what it served the
    /// emulated ones (the calibration).
    External,
}

#[derive(Debug, Clone)]
pub struct ScaleSpec {
    pub shape: Shape,
    pub mode: Mode,
    pub agents: Agents,
    /// The writer starts no sooner than this long after the nodes start: a start-up window of
    /// a known length, the same whoever's agents run.
    pub hold: Duration,
    pub replicas: usize,
    /// How long the writer writes, once every node has synced.
    pub duration: Duration,
    /// Changes a second.
    pub write_rate: f64,
    /// After the writer stops, before the views are compared.
    pub settle: Duration,
    /// The nodes start spread over this long (0: all at once).
    pub ramp: Duration,
    /// How long the nodes may take to sync before the writer starts anyway.
    pub sync_timeout: Duration,
    /// Through the pool, after the steady run: every node tier started again, spread over
    /// this long (a DaemonSet rollout).
    pub rollout: Option<Duration>,
    /// Through the pool, after that: pool replica 0 killed, and started again after this long
    /// (a replica's pod replaced).
    pub kill_replica: Option<Duration>,
    /// Through the pool, after those: the soak (its churn and schedule of disruptions).
    pub soak: Option<soak::SoakSpec>,
    pub tier: TierConfig,
    pub work_dir: PathBuf,
}

/// Runs the scenario in the spec's mode(s) against `cluster`.
pub async fn run(spec: ScaleSpec, cluster: Cluster) -> anyhow::Result<ScaleReport> {
    anyhow::ensure!(spec.shape.nodes <= MAX_NODES, "at most {MAX_NODES} nodes");
    anyhow::ensure!(
        spec.agents == Agents::Emulated || spec.mode == Mode::Direct,
        "external agents talk to the apiserver directly: --mode direct"
    );
    std::fs::create_dir_all(&spec.work_dir)?;
    let cluster = Arc::new(cluster);
    let t = Instant::now();
    let created =
        cluster::ensure(&cluster, &spec.shape).await.context("creating the cluster's objects")?;
    tracing::info!(created, seconds = t.elapsed().as_secs_f64(), "the cluster's objects are there");
    let modes: &[bool] = match spec.mode {
        Mode::Direct => &[false],
        Mode::Pool => &[true],
        Mode::Both => &[false, true],
    };
    let mut reports = Vec::new();
    for &pool in modes {
        let name = if pool { "pool" } else { "direct" };
        reports.push(
            run_mode(&spec, &cluster, pool).await.with_context(|| format!("the {name} run"))?,
        );
        // The apiserver done with the last mode's watches before the next starts.
        wait_quiet(&cluster).await;
    }
    Ok(ScaleReport {
        shape: spec.shape,
        write_rate: spec.write_rate,
        seconds: spec.duration.as_secs_f64(),
        modes: reports,
    })
}

/// Waits (up to 2 minutes) until the control plane uses under 0.3 cores over 5 s: a mode
/// started while the apiserver still works off the last one's would be measured on a busy one.
async fn wait_quiet(cluster: &Cluster) {
    if cluster.sim.is_some() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let before: f64 = cpu(&cluster.control_plane).iter().sum();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let used: f64 = cpu(&cluster.control_plane).iter().sum::<f64>() - before;
        if used < 1.5 {
            return;
        }
        tracing::info!(cores = used / 5.0, "waiting for the control plane to be quiet");
    }
}

/// The CPU-seconds of each process.
fn cpu(procs: &[(String, u32)]) -> Vec<f64> {
    procs.iter().map(|(_, pid)| cpu_seconds(*pid).unwrap_or(0.0)).collect()
}

async fn run_mode(
    spec: &ScaleSpec,
    cluster: &Arc<Cluster>,
    pool: bool,
) -> anyhow::Result<ModeReport> {
    let mode = if pool { "pool" } else { "direct" };
    let dir = spec.work_dir.join(mode);
    std::fs::create_dir_all(&dir)?;
    let n = spec.shape.nodes;
    let shape = spec.shape;
    let before = Counters::read(&cluster.metrics().await?);
    let open_before = before.open_watches;
    let cpu_before = cpu(&cluster.control_plane);
    let started = Instant::now();
    tracing::info!(mode, nodes = n, "starting");

    let relay = match (&spec.soak, pool) {
        (Some(_), true) => Some(soak::Relay::start(authority(&cluster.server).to_string()).await?),
        _ => None,
    };
    // The pool replicas, in front of the apiserver with the pool's identity.
    let mut replicas = if pool {
        prepare_dir(&spec.tier, &dir, &cluster.pki)?;
        // Each node tier's token, bound to its node (before the clock of the run starts).
        cluster.prepare_node_tiers(n).await.context("the node tiers' tokens")?;
        // A soak's outages cut the pool's way to the apiserver: a relay here.
        let kubeconfig = match &relay {
            Some(r) => {
                let authority = authority(&cluster.server);
                let via = cluster.server.replacen(authority, &r.addr.to_string(), 1);
                cluster.kubeconfig_relayed(Who::Pool, &via)?
            }
            None => cluster.kubeconfig(Who::Pool, &cluster.server)?,
        };
        Some(Tier::start_pool_with(&spec.tier, spec.replicas, &dir, &kubeconfig).await?)
    } else {
        None
    };
    let pool_ready_s = started.elapsed().as_secs_f64();
    let replica_pids: Vec<(String, u32)> = replicas
        .as_ref()
        .map(|r| r.nodes.iter().filter_map(|k| Some((k.node.clone(), k.pid()?))).collect())
        .unwrap_or_default();
    let replicas_rss_ready: Vec<u64> =
        replica_pids.iter().map(|(_, p)| rss_bytes(*p).unwrap_or(0)).collect();
    let replicas_heap_ready = replica_sums(replicas.as_ref(), HEAP_IN_USE).await;

    // Each node's connections: Targets of its own (one connection each); none for agents
    // that are not ours.
    let emulated = spec.agents == Agents::Emulated;
    let moves = Arc::new(link::Moves::default());
    let mut conns = Vec::with_capacity(n);
    for i in (0..n).filter(|_| emulated) {
        conns.push(connect(cluster, replicas.as_ref(), i, shape.cni, &moves)?);
    }
    let classes: Arc<Mutex<node::Classes>> = Default::default();
    let views: node::Views = Default::default();
    let writes = Arc::new(node::Writes::default());
    let mut nodes = JoinSet::new();
    let since = Instant::now();
    let nodes_start = wall_now();
    if !emulated {
        // The external agents' cue (calibrate.py polls for it).
        std::fs::write(spec.work_dir.join("agents-start"), format!("{nodes_start}\n"))
            .context("writing the agents' cue")?;
        tracing::info!(mode, nodes = n, "external agents may start");
    }
    let step = spec.ramp.checked_div(n.max(1) as u32).unwrap_or_default();
    let mut links = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for (i, c) in conns.into_iter().enumerate() {
        let start = since + step * i as u32;
        links.push(c.link());
        let (classes, views, writes) = (classes.clone(), views.clone(), writes.clone());
        handles.push(nodes.spawn(async move {
            tokio::time::sleep_until(start).await;
            node::run(i, shape, c, classes, views, writes, since, false).await
        }));
    }
    let watches = if emulated { n * node::watches_per_node(pool, &shape) } else { 0 };
    let synced = || synced_watches(&classes);
    let mut open_max = 0.0f64;
    let deadline = Instant::now() + spec.sync_timeout;
    let mut told = Instant::now();
    while synced() < watches as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if told.elapsed() >= Duration::from_secs(10) {
            told = Instant::now();
            tracing::info!(mode, synced = synced(), watches, "nodes syncing");
        }
    }
    let all_synced_s = (synced() == watches as u64).then(|| since.elapsed().as_secs_f64());
    if all_synced_s.is_none() {
        tracing::warn!(
            synced = synced(),
            watches,
            "not every watch synced in time; writing anyway"
        );
    }
    // The steady run starts once the kubelets have written their existing pods' first status
    // syncs (each pod's token, GETs and patches: ~3 writes a pod), so that both modes' steady
    // minutes hold the same writes: through the pool every watch syncs sooner, and those
    // writes would otherwise fall in its steady minute where directly they fall in the
    // start-up. Bounded by the sync timeout.
    let starts = if emulated { (n * spec.shape.pods_per_node) as u64 } else { 0 };
    let started = || {
        writes.existing_status_ok.load(Ordering::Relaxed)
            + writes.pod_failed.load(Ordering::Relaxed)
    };
    let deadline = Instant::now() + spec.sync_timeout;
    while started() < starts && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let starts_written_s = (started() >= starts).then(|| since.elapsed().as_secs_f64());
    tokio::time::sleep_until(since + spec.hold).await;
    // Sampled before the writer starts: the apiserver's figures of the start-up.
    let at_sync_text = cluster.metrics().await?;
    let at_sync = Counters::read(&at_sync_text);
    open_max = open_max.max(at_sync.open_watches);
    let cpu_at_sync = cpu(&cluster.control_plane);
    let replicas_cpu_at_sync = cpu(&replica_pids);
    let replica_events_at_sync = replica_events(replicas.as_ref(), None).await;

    let counts = Arc::new(writer::WriteCounts::default());
    let writer_start = wall_now();
    let until = Instant::now() + spec.duration;
    let mut writer = tokio::spawn(writer::run(
        cluster.clone(),
        spec.shape,
        spec.write_rate,
        until,
        counts.clone(),
    ));
    let mut sample = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = &mut writer => break,
            _ = sample.tick() => {
                if let Ok(text) = cluster.metrics().await {
                    open_max = open_max.max(Counters::read(&text).open_watches);
                }
            }
        }
    }
    tokio::time::sleep(spec.settle).await;
    let phases = report::Phases { nodes_start, writer_start, steady_end: wall_now() };
    let steady_end = Counters::read(&cluster.metrics().await?);
    let cpu_steady_end = cpu(&cluster.control_plane);
    let replicas_cpu_end = cpu(&replica_pids);
    let replicas_rss: Vec<u64> =
        replica_pids.iter().map(|(_, p)| rss_bytes(*p).unwrap_or(0)).collect();
    let replica_events_end = replica_events(replicas.as_ref(), Some(&dir)).await;
    let replicas_cache_bytes = replica_sums(replicas.as_ref(), CACHE_BYTES).await;
    let replicas_custom_bytes = replica_custom_sums(replicas.as_ref(), CACHE_BYTES).await;
    let replicas_custom_history = replica_custom_sums(replicas.as_ref(), HISTORY_BYTES).await;
    let replicas_heap = replica_sums(replicas.as_ref(), HEAP_IN_USE).await;
    let replicas_history_bytes = replica_sums(replicas.as_ref(), HISTORY_BYTES).await;

    // Through the pool: the node tiers' rollout, then a replica's restart, then the soak.
    let mut disruptions = Vec::new();
    let mut soaked = None;
    if let Some(r) = replicas.as_mut() {
        let mut run = disrupt::Run {
            spec,
            cluster,
            replicas: r,
            nodes: &mut nodes,
            handles: &mut handles,
            links: &mut links,
            moves: &moves,
            classes: &classes,
            views: &views,
            writes: &writes,
            counts: &counts,
            since,
            writing: false,
        };
        if let Some(within) = spec.rollout {
            disruptions.push(run.rollout(within).await?);
        }
        if let Some(down) = spec.kill_replica {
            disruptions.push(run.kill_replica(down).await?);
        }
        if let Some(s) = &spec.soak {
            soaked = Some(soak::soak(&mut run, s, relay.as_ref()).await?);
        }
    }

    // The views against the apiserver's objects, once the agents write no more: a kubelet
    // still working through its pods' status syncs (at 1,000 nodes the apiserver takes minutes
    // over the start-up's) would move a pod past its watcher's view while the apiserver's is
    // read. What is under way (and a disruption's writes) lands meanwhile.
    let scopes = node::whole_scopes(pool, &shape);
    writes.stop();
    tokio::time::sleep(spec.settle).await;
    let truth =
        Truth::read(&cluster.admin, &scopes).await.context("reading the apiserver's objects")?;
    let mut checked = 0u64;
    let mut wrong = 0u64;
    let mut examples = Vec::new();
    for (scope, view) in views.lock().unwrap_or_else(|p| p.into_inner()).values() {
        let v = view.lock().unwrap_or_else(|p| p.into_inner());
        let want = match scope {
            Scope::NodePods(node) => truth.node_pods(node),
            Scope::Node(node) => truth.node(node),
            Scope::Whole(path) => truth.whole(path).cloned().unwrap_or_default(),
        };
        checked += 1;
        if !v.synced || v.items != want {
            wrong += 1;
            if examples.len() < 5 {
                let missing = want.keys().filter(|k| !v.items.contains_key(*k)).count();
                let extra = v.items.keys().filter(|k| !want.contains_key(*k)).count();
                let stale =
                    want.iter().filter(|(k, rv)| v.items.get(*k).is_some_and(|r| r != *rv)).count();
                examples.push(format!(
                    "{scope:?}: synced {}, {missing} missing, {extra} extra, {stale} at another RV",
                    v.synced
                ));
            }
        }
    }

    nodes.shutdown().await;
    if let Some(r) = replicas.as_mut() {
        r.stop().await;
    }
    // Ended watches are counted when they end.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = Counters::read(&cluster.metrics().await?);
    let cpu_after = cpu(&cluster.control_plane);
    let control_plane_rss: Vec<u64> =
        cluster.control_plane.iter().map(|(_, p)| rss_bytes(*p).unwrap_or(0)).collect();
    let classes = classes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(report::mode_report(report::Readings {
        mode,
        nodes: n,
        watches,
        pool_ready_s,
        all_synced_s,
        starts_written_s,
        before,
        at_sync,
        steady_end,
        after,
        open_max: open_max - open_before,
        control_plane: cluster.control_plane.clone(),
        cpu: [cpu_before, cpu_at_sync, cpu_steady_end, cpu_after],
        control_plane_rss,
        replicas: replica_pids,
        replicas_cpu: [replicas_cpu_at_sync, replicas_cpu_end],
        replicas_rss,
        replicas_rss_ready,
        replicas_cache_bytes,
        replicas_custom_bytes,
        replicas_custom_history,
        replicas_heap_ready,
        replicas_heap,
        replicas_history_bytes,
        classes,
        writes,
        counts,
        views: (checked, wrong, examples),
        pool_events_received: replica_events_end - replica_events_at_sync,
        disruptions,
        soak: soaked,
        phases,
    }))
}

/// `host:port` of a URL (`https://127.0.0.1:6443` → `127.0.0.1:6443`).
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest)
}

/// Seconds since the Unix epoch (the apiserver's audit log's clock).
fn wall_now() -> f64 {
    watcher::now_micros() as f64 / 1e6
}

/// Node `i`'s connections: directly, its agents' own; through the pool, its node tier's to the
/// replicas, its own (`i` mod replicas) first, as a Service spreads them.
fn connect(
    cluster: &Cluster,
    replicas: Option<&Tier>,
    i: usize,
    cni: bool,
    moves: &Arc<link::Moves>,
) -> anyhow::Result<node::Conns> {
    let open = |who, server: &str| -> anyhow::Result<Arc<Target>> {
        Ok(Arc::new(Target::open(None, Some(&cluster.kubeconfig(who, server)?), false)?))
    };
    Ok(match replicas {
        Some(r) => {
            let k = r.nodes.len().max(1);
            let mut targets = Vec::with_capacity(k);
            for j in 0..k {
                let server = format!("https://{}", r.nodes[(i + j) % k].addr);
                targets.push(open(Who::NodeTier(i), &server)?);
            }
            let token = |cni| cluster.agent_token(i, cni).context("an agent's token");
            node::Conns::Pool {
                tier: link::Link::new(targets, moves.clone()),
                kube_proxy: token(false)?,
                cni: token(true)?,
            }
        }
        None => node::Conns::Direct {
            kubelet: link::Link::new(vec![open(Who::Kubelet(i), &cluster.server)?], moves.clone()),
            kube_proxy: link::Link::new(
                vec![open(Who::KubeProxy(i), &cluster.server)?],
                moves.clone(),
            ),
            cni: match cni {
                true => {
                    Some(link::Link::new(vec![open(Who::Cni(i), &cluster.server)?], moves.clone()))
                }
                false => None,
            },
        },
    })
}

/// Watches that synced at least once (a restarted node's count again).
fn synced_watches(classes: &Mutex<node::Classes>) -> u64 {
    classes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .map(|c| c.synced.load(Ordering::Relaxed))
        .sum()
}

/// The bytes of the objects a pool replica's caches hold.
const CACHE_BYTES: Series = ("kubeplex_cache_bytes", None);
/// The bytes of the events a pool replica's caches keep for resuming watches.
const HISTORY_BYTES: Series = ("kubeplex_watch_history_bytes", None);
/// The C allocator's heap handed out (kubeplex's allocations, not what glibc keeps besides).
const HEAP_IN_USE: Series = ("kubeplex_allocator_heap_bytes", Some(("state", "in_use")));

/// A metric's name, and a label it must have.
type Series = (&'static str, Option<(&'static str, &'static str)>);

/// Each pool replica's sum of a series.
async fn replica_sums(replicas: Option<&Tier>, (name, label): Series) -> Vec<f64> {
    let wanted = |labels: &Labels| label.is_none_or(|(k, v)| labels.get(k).is_some_and(|l| l == v));
    replica_sums_where(replicas, name, wanted).await
}

/// Each pool replica's sum of a series over the custom resources' caches (Cilium's, the CRDs
/// the scenario installs: their `resource` label names the group `cilium.io`).
async fn replica_custom_sums(replicas: Option<&Tier>, (name, _): Series) -> Vec<f64> {
    let custom =
        |labels: &Labels| labels.get("resource").is_some_and(|r| r.contains(".cilium.io/"));
    replica_sums_where(replicas, name, custom).await
}

type Labels = std::collections::BTreeMap<String, String>;

/// Each pool replica's sum of the series `name` whose labels `wanted` accepts.
async fn replica_sums_where(
    replicas: Option<&Tier>,
    name: &str,
    wanted: impl Fn(&Labels) -> bool,
) -> Vec<f64> {
    let mut sums = Vec::new();
    for k in replicas.iter().flat_map(|r| &r.nodes) {
        let text = k.metrics().await.unwrap_or_default();
        let series = crate::node::report::series(&text);
        sums.push(series.iter().filter(|(n, l, _)| n == name && wanted(l)).map(|s| s.2).sum());
    }
    sums
}

/// The watch events the pool replicas received from the apiserver so far
/// (`kubeplex_watch_events_received_total`); with `dir`, each replica's `/metrics` is kept
/// there too.
async fn replica_events(replicas: Option<&Tier>, dir: Option<&std::path::Path>) -> u64 {
    let mut sum = 0.0;
    for k in replicas.iter().flat_map(|r| &r.nodes) {
        let Ok(text) = k.metrics().await else { continue };
        if let Some(dir) = dir {
            let _ = std::fs::write(dir.join(format!("{}-metrics.txt", k.node)), &text);
        }
        for (name, _, value) in crate::node::report::series(&text) {
            if name == "kubeplex_watch_events_received_total" {
                sum += value;
            }
        }
    }
    sum as u64
}
