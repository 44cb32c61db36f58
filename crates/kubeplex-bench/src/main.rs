//! `kubeplex-bench`: load any apiserver — directly, or through kubeplex — and print figures
//! (see the library, `kubeplex_bench`). Loopback targets only, unless `--allow-remote`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kubeplex_bench as bench;
use kubeplex_bench::list::{self, ListSpec, Rv};
use kubeplex_bench::mix::{self, MixSpec};
use kubeplex_bench::node;
use kubeplex_bench::seed::{self, Kind};
use kubeplex_bench::target::{calls_by_verb, scrape, Target};
use kubeplex_bench::watch::{self, WatchSpec};
use serde::Serialize;

#[derive(Parser)]
#[command(name = "kubeplex-bench", about = "Load an apiserver (or kubeplex) and print figures")]
struct Cli {
    #[command(flatten)]
    target: TargetArgs,
    /// Print reports as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct TargetArgs {
    /// The server's URL (no credentials), e.g. http://127.0.0.1:8001.
    #[arg(long, global = true)]
    server: Option<String>,
    /// A kubeconfig for the server (its current context).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Allow a server that is not on a loopback address.
    #[arg(long, global = true)]
    allow_remote: bool,
    /// The upstream's /metrics URL: report the list and watch calls it received during the run.
    #[arg(long, global = true)]
    upstream_metrics: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Create N objects (idempotent), labelled kubeplex-bench=true.
    Seed {
        #[arg(long, value_enum, default_value = "pods")]
        kind: Kind,
        #[arg(long, default_value = "bench")]
        namespace: String,
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Pad each object to about this many bytes of JSON.
        #[arg(long, default_value_t = 0)]
        size: usize,
        #[arg(long, default_value_t = 20)]
        nodes: usize,
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
    },
    /// Delete the seeded objects.
    Cleanup {
        #[arg(long, value_enum, default_value = "pods")]
        kind: Kind,
        #[arg(long, default_value = "bench")]
        namespace: String,
    },
    /// C clients repeating a list.
    List(ListArgs),
    /// W watchers while a writer changes objects at E/s.
    Watch(WatchArgs),
    /// C clients each listing at resourceVersion=0 and watching from there: how many calls the
    /// upstream receives for them (needs --upstream-metrics).
    UpstreamCalls {
        #[arg(long, value_enum, default_value = "pods")]
        kind: Kind,
        #[arg(long, default_value = "bench")]
        namespace: String,
        #[arg(long, default_value_t = 100)]
        clients: usize,
    },
    /// A realistic set of nodes' clients started together (kubelets, kube-proxies, agents, a
    /// ConfigMap informer, kubectl): the LIST and WATCH calls the upstream received for them
    /// (needs --upstream-metrics).
    Mix(MixArgs),
    /// N nodes' agents as the 1.36 ones read and write (kubelet, kube-proxy, a CNI-like and a
    /// log-agent-like agent) against a fake apiserver started here (Node authorizer, RBAC),
    /// directly and through N kubeplex processes in node mode: what the apiserver served in
    /// each case. Takes no --server.
    Nodes(NodesArgs),
    /// Thousands of emulated nodes (their kubelets' and kube-proxies' watches and writes, or
    /// their node tiers') against the apiserver of --kubeconfig (its CA signs their
    /// certificates: --ca-cert, --ca-key) or a fake one (--sim): directly and through pool
    /// replicas; what the apiserver and the pool spent, and when each node saw each change.
    Scale(ScaleArgs),
}

#[derive(Args)]
struct ScaleArgs {
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    #[arg(long, default_value_t = 30)]
    pods_per_node: usize,
    /// Services without a selector, each with an EndpointSlice the writer keeps.
    #[arg(long, default_value_t = 100)]
    services: usize,
    #[arg(long, default_value_t = 20)]
    endpoints_per_slice: usize,
    /// Each node runs a CNI-like agent too: its node's pods, every node, namespace, service
    /// and endpointslice, in JSON (a client-go ≥ 1.35 informer each, with its own
    /// ServiceAccount).
    #[arg(long)]
    cni: bool,
    #[arg(long, value_enum, default_value = "both")]
    mode: kubeplex_bench::scale::Mode,
    /// Whose agents act for the nodes: the emulated ones, or real ones started by someone else
    /// when `agents-start` appears in the work directory (scripts/realcluster/calibrate.py
    /// starts kubemark's; --mode direct).
    #[arg(long, value_enum, default_value = "emulated")]
    agents: kubeplex_bench::scale::Agents,
    /// The writer starts no sooner than this many seconds after the nodes start.
    #[arg(long, default_value = "0", value_parser = seconds)]
    hold: Duration,
    /// Pool replicas (deploy/overlays/pool runs two).
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    /// The writer's seconds, once every node synced.
    #[arg(long, default_value = "60", value_parser = seconds)]
    duration: Duration,
    #[arg(long, default_value_t = 4.0)]
    write_rate: f64,
    #[arg(long, default_value = "5", value_parser = seconds)]
    settle: Duration,
    /// Spread the nodes' start over this long (0: all at once, as after a pool restart).
    #[arg(long, default_value = "0", value_parser = seconds)]
    ramp: Duration,
    #[arg(long, default_value = "180", value_parser = seconds)]
    sync_timeout: Duration,
    /// Through the pool, after the steady run: every node tier started again within this
    /// many seconds (a DaemonSet rollout).
    #[arg(long, value_parser = seconds)]
    rollout: Option<Duration>,
    /// Through the pool, after that: pool replica 0 killed and started again after this many
    /// seconds.
    #[arg(long, value_parser = seconds)]
    kill_replica: Option<Duration>,
    /// Start a fake apiserver here instead of --kubeconfig's.
    #[arg(long)]
    sim: bool,
    /// The real apiserver's client CA, to sign the nodes' certificates (and its key, PKCS#8).
    #[arg(long)]
    ca_cert: Option<PathBuf>,
    #[arg(long)]
    ca_key: Option<PathBuf>,
    /// The pool's user on the real apiserver (its RBAC: deploy/base/pool/pool.yaml's, bound
    /// to this user, as scripts/realcluster/agents.py applies it).
    #[arg(long, default_value = "agents-harness-kubeplex-pool")]
    pool_user: String,
    /// Delete the run's namespace and nodes, and stop.
    #[arg(long)]
    cleanup: bool,
    #[command(flatten)]
    files: TierFiles,
}

#[derive(Args)]
struct NodesArgs {
    /// Nodes, each with its agents (and in the node tier its own kubeplex process).
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Allow more than 20 nodes (up to 500).
    #[arg(long)]
    allow_large: bool,
    #[arg(long, value_enum, default_value = "both")]
    mode: node::Mode,
    /// Pods bound to each node before the run.
    #[arg(long, default_value_t = 10)]
    pods_per_node: usize,
    /// Apps (pods, a Service, an EndpointSlice, a ConfigMap and a Secret each).
    #[arg(long, default_value_t = 20)]
    apps: usize,
    #[arg(long, default_value_t = 4)]
    namespaces: usize,
    #[arg(long, default_value = "60", value_parser = seconds)]
    duration: Duration,
    /// Rollout steps a second (a pod deleted, a new one bound to a node).
    #[arg(long, default_value_t = 2.0)]
    pod_rate: f64,
    /// A Service changes this often (seconds; 0: never).
    #[arg(long, default_value = "10", value_parser = seconds)]
    service_every: Duration,
    /// Each kubelet patches its node status this often (seconds; the kubelet's report
    /// frequency is 5 minutes, plus each change).
    #[arg(long, default_value = "60", value_parser = seconds)]
    node_status_every: Duration,
    /// After the controllers stop, before the clients' views are compared (seconds).
    #[arg(long, default_value = "3", value_parser = seconds)]
    settle: Duration,
    /// The node configuration each kubeplex runs with (its caches among the rest).
    #[arg(long, default_value = "config/node.yaml")]
    node_config: PathBuf,
    #[command(flatten)]
    files: TierFiles,
}

/// What the scenarios that start kubeplex tiers read, and where they write.
#[derive(Args)]
struct TierFiles {
    /// The kubeplex binary the tiers run.
    #[arg(long, default_value = "target/release/kubeplex")]
    kubeplex_bin: PathBuf,
    /// The node DaemonSet manifest: kubeplex's RBAC is read from it (for the fake apiserver).
    #[arg(long, default_value = "deploy/base/node/daemonset.yaml")]
    daemonset: PathBuf,
    /// The pool tier's configuration (the pool mode).
    #[arg(long, default_value = "deploy/base/pool/kubeplex.yaml")]
    pool_config: PathBuf,
    /// The pool tier's manifest: its RBAC, and the node tiers' group's, are read from it.
    #[arg(long, default_value = "deploy/base/pool/pool.yaml")]
    pool_manifest: PathBuf,
    /// Certificates, kubeconfigs and kubeplex logs (default: a new temporary directory,
    /// removed at the end unless --keep).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    #[arg(long)]
    keep: bool,
}

#[derive(Args)]
struct MixArgs {
    /// Simulated nodes `node-0` ..: a kubelet and a kube-proxy each.
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Cluster-wide agents (all pods, JSON, list then watch).
    #[arg(long, default_value_t = 3)]
    agents: usize,
    /// `kubectl get pods -A` runs, spread over the run.
    #[arg(long, default_value_t = 5)]
    kubectl: usize,
    /// Pod changes per second (the pods `bench-i` of --namespace, seeded beforehand).
    #[arg(long, default_value_t = 3.0)]
    writes_per_second: f64,
    /// Pods the writer changes in turn.
    #[arg(long, default_value_t = 100)]
    objects: usize,
    /// Namespace of the writer's pods and of the ConfigMap informer.
    #[arg(long, default_value = "bench")]
    namespace: String,
    #[arg(long, default_value = "20", value_parser = seconds)]
    duration: Duration,
    /// Where the writer's changes go (default: the server measured), e.g. the upstream behind
    /// kubeplex, as a controller's writes would.
    #[arg(long)]
    writer_server: Option<String>,
    /// kubeplex's admin /metrics URL: also report its own upstream calls (list, watch,
    /// watchlist, and the freshness proofs' proof_list and proof_watch).
    #[arg(long)]
    proxy_metrics: Option<String>,
}

#[derive(Args)]
struct ListArgs {
    #[arg(long, value_enum, default_value = "pods")]
    kind: Kind,
    /// Namespace to list ("" for all namespaces).
    #[arg(long, default_value = "bench")]
    namespace: String,
    #[arg(long, value_enum, default_value = "zero")]
    rv: Rv,
    /// Page size for --rv paged.
    #[arg(long, default_value_t = 500)]
    limit: usize,
    #[arg(long)]
    label_selector: Option<String>,
    #[arg(long)]
    field_selector: Option<String>,
    #[arg(long)]
    protobuf: bool,
    #[arg(long)]
    gzip: bool,
    #[arg(long, default_value_t = 1)]
    clients: usize,
    #[arg(long, default_value = "10", value_parser = seconds)]
    duration: Duration,
    /// Stop after this many lists.
    #[arg(long)]
    requests: Option<u64>,
}

#[derive(Args)]
struct WatchArgs {
    #[arg(long, value_enum, default_value = "configmaps")]
    kind: Kind,
    #[arg(long, default_value = "bench")]
    namespace: String,
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Changes per second.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    #[arg(long, default_value = "10", value_parser = seconds)]
    duration: Duration,
    /// `metadata.name=X` or `spec.nodeName=node-K` (pods).
    #[arg(long)]
    field_selector: Option<String>,
    /// Objects the writer changes: bench-000000 .. (seeded beforehand).
    #[arg(long, default_value_t = 100)]
    objects: usize,
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// PID of the measured server, for its RSS.
    #[arg(long)]
    pid: Option<u32>,
    /// Where the writer's changes go (default: the server measured), e.g. the upstream behind
    /// kubeplex, as a controller's writes would.
    #[arg(long)]
    writer_server: Option<String>,
    /// Multiplex the watchers over this many HTTP/2 connections (plain HTTP).
    #[arg(long)]
    h2_connections: Option<usize>,
    #[arg(long, default_value = "10", value_parser = seconds)]
    settle: Duration,
}

fn seconds(s: &str) -> Result<Duration, String> {
    let s = s.trim_end_matches('s');
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?}: expected seconds (0 to 86400)"))
}

fn collection(kind: Kind, namespace: &str) -> String {
    if namespace.is_empty() {
        format!("/api/v1/{}", kind.resource())
    } else {
        format!("/api/v1/namespaces/{namespace}/{}", kind.resource())
    }
}

#[derive(Serialize)]
struct Calls {
    resource: String,
    calls: std::collections::BTreeMap<String, i64>,
}

impl std::fmt::Display for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.calls.iter().map(|(v, n)| format!("{v} {n}")).collect();
        let parts = if parts.is_empty() { "none".to_string() } else { parts.join(", ") };
        write!(f, "upstream calls for {} during the run: {parts}", self.resource)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Command::Nodes(a) = cli.command {
        return nodes(a, cli.json).await;
    }
    if let Command::Scale(a) = cli.command {
        return scale(a, cli.target.kubeconfig, cli.json).await;
    }
    let t = &cli.target;
    let target = Arc::new(
        Target::open(t.server.as_deref(), t.kubeconfig.as_deref(), t.allow_remote)
            .context("opening the target")?,
    );
    let resource = match &cli.command {
        Command::Seed { kind, .. }
        | Command::Cleanup { kind, .. }
        | Command::UpstreamCalls { kind, .. } => kind.resource(),
        Command::List(a) => a.kind.resource(),
        Command::Watch(a) => a.kind.resource(),
        // The mix reads the upstream's counts for each of its resources itself.
        Command::Mix(_) | Command::Nodes(_) | Command::Scale(_) => "",
    };
    let before = match &t.upstream_metrics {
        Some(url) if !resource.is_empty() => {
            Some(calls_by_verb(&scrape(url, t.allow_remote).await?, resource))
        }
        _ => None,
    };
    match cli.command {
        Command::Seed { kind, namespace, count, size, nodes, concurrency } => {
            let report =
                seed::seed(target.clone(), kind, &namespace, count, size, nodes, concurrency)
                    .await?;
            bench::print(&report, cli.json);
        }
        Command::Cleanup { kind, namespace } => {
            seed::cleanup(&target, kind, &namespace).await?;
            if !cli.json {
                println!("deleted the seeded {} in {namespace}", kind.resource());
            }
        }
        Command::List(a) => {
            let spec = ListSpec {
                collection: collection(a.kind, &a.namespace),
                rv: a.rv,
                limit: a.limit,
                label_selector: a.label_selector,
                field_selector: a.field_selector,
                protobuf: a.protobuf,
                gzip: a.gzip,
                clients: a.clients.clamp(1, 10_000),
                duration: a.duration,
                requests: a.requests,
            };
            bench::print(&list::run(target.clone(), spec).await?, cli.json);
        }
        Command::Watch(a) => {
            let spec = WatchSpec {
                collection: collection(a.kind, &a.namespace),
                names: (0..a.objects).map(|i| format!("bench-{i:06}")).collect(),
                watchers: a.watchers.min(50_000),
                rate: a.rate.clamp(0.01, 100_000.0),
                duration: a.duration,
                field_selector: a.field_selector,
                nodes: a.nodes,
                pid: a.pid,
                settle: a.settle,
                h2_connections: a.h2_connections.map(|n| n.clamp(1, 10_000)),
            };
            let writer = match &a.writer_server {
                Some(url) => Arc::new(Target::open(Some(url), None, t.allow_remote)?),
                None => target.clone(),
            };
            bench::print(&watch::run(target.clone(), writer, spec).await?, cli.json);
        }
        Command::UpstreamCalls { kind, namespace, clients } => {
            anyhow::ensure!(before.is_some(), "upstream-calls needs --upstream-metrics");
            let spec = ListSpec {
                collection: collection(kind, &namespace),
                rv: Rv::Zero,
                limit: 500,
                label_selector: None,
                field_selector: None,
                protobuf: false,
                gzip: false,
                clients: clients.clamp(1, 10_000),
                duration: Duration::from_secs(60),
                requests: Some(clients as u64),
            };
            bench::print(&list::run(target.clone(), spec).await?, cli.json);
            let spec = WatchSpec {
                collection: collection(kind, &namespace),
                names: vec!["bench-000000".into()],
                watchers: clients.min(10_000),
                rate: 2.0,
                duration: Duration::from_secs(1),
                field_selector: None,
                nodes: 1,
                pid: None,
                settle: Duration::from_secs(5),
                h2_connections: None,
            };
            bench::print(&watch::run(target.clone(), target.clone(), spec).await?, cli.json);
        }
        Command::Mix(a) => {
            let Some(upstream_metrics) = t.upstream_metrics.clone() else {
                anyhow::bail!("mix needs --upstream-metrics");
            };
            let spec = MixSpec {
                nodes: a.nodes.min(mix::MAX_NODES),
                agents: a.agents.min(mix::MAX_AGENTS),
                kubectl: a.kubectl.min(mix::MAX_KUBECTL),
                writes_per_second: a.writes_per_second.clamp(0.0, 10_000.0),
                duration: a.duration,
                namespace: a.namespace,
                objects: a.objects,
                upstream_metrics,
                proxy_metrics: a.proxy_metrics,
                allow_remote: t.allow_remote,
            };
            let writer = match &a.writer_server {
                Some(url) => Arc::new(Target::open(Some(url), None, t.allow_remote)?),
                None => target.clone(),
            };
            bench::print(&mix::run(target.clone(), writer, spec).await?, cli.json);
        }
        Command::Nodes(_) | Command::Scale(_) => unreachable!("run before a target is opened"),
    }
    if let (Some(url), Some(before)) = (&t.upstream_metrics, before) {
        let after = calls_by_verb(&scrape(url, t.allow_remote).await?, resource);
        let calls = after
            .iter()
            .map(|(verb, n)| {
                (verb.clone(), *n as i64 - before.get(verb).copied().unwrap_or(0) as i64)
            })
            .filter(|(_, n)| *n != 0)
            .collect();
        bench::print(&Calls { resource: resource.to_string(), calls }, cli.json);
    }
    Ok(())
}

/// `nodes`: its own fake apiserver and kubeplex processes; ctrl-c or SIGTERM stop it, and the
/// processes it started with it.
async fn nodes(a: NodesArgs, json: bool) -> anyhow::Result<()> {
    let limit = if a.allow_large { node::MAX_NODES } else { node::DEFAULT_MAX_NODES };
    anyhow::ensure!(
        (1..=limit).contains(&a.nodes),
        "--nodes must be 1 to {limit} (--allow-large for up to {})",
        node::MAX_NODES
    );
    anyhow::ensure!(a.apps > 0 && a.apps <= 10_000, "--apps must be 1 to 10000");
    anyhow::ensure!(a.pods_per_node <= 1_000, "--pods-per-node must be at most 1000");
    let (work_dir, temporary) = match a.files.work_dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("kubeplex-bench-nodes-{}", std::process::id())),
            true,
        ),
    };
    let spec = node::NodeSpec {
        nodes: a.nodes,
        pods_per_node: a.pods_per_node,
        apps: a.apps,
        namespaces: a.namespaces.clamp(1, 1_000),
        duration: a.duration,
        pod_rate: a.pod_rate.clamp(0.0, 1_000.0),
        service_every: a.service_every,
        node_status_every: a.node_status_every,
        settle: a.settle,
        mode: a.mode,
        tier: node::TierConfig {
            bin: a.files.kubeplex_bin,
            config: a.node_config,
            pool_config: a.files.pool_config,
        },
        daemonset: a.files.daemonset,
        pool_manifest: a.files.pool_manifest,
        work_dir: work_dir.clone(),
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // Dropping the run on a signal drops its kubeplex processes, which are killed with it.
    let result = tokio::select! {
        r = node::run(spec) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        _ = terminate.recv() => Err(anyhow::anyhow!("terminated")),
    };
    if temporary && !a.files.keep {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        eprintln!("certificates, kubeconfigs and kubeplex logs: {}", work_dir.display());
    }
    bench::print(&result?, json);
    Ok(())
}

async fn scale(a: ScaleArgs, kubeconfig: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    use kubeplex_bench::scale::{self, cluster};
    anyhow::ensure!(a.nodes <= scale::MAX_NODES, "at most {} nodes", scale::MAX_NODES);
    let (work_dir, temporary) = match a.files.work_dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("kubeplex-bench-scale-{}", std::process::id())),
            !a.files.keep,
        ),
    };
    std::fs::create_dir_all(&work_dir)?;
    let cluster = if a.sim {
        cluster::Cluster::sim(a.nodes, &a.files.daemonset, &a.files.pool_manifest, &work_dir)
            .await?
    } else {
        let (Some(kc), Some(cert), Some(key)) =
            (kubeconfig.as_deref(), a.ca_cert.as_deref(), a.ca_key.as_deref())
        else {
            anyhow::bail!("give --kubeconfig, --ca-cert and --ca-key (a real apiserver), or --sim");
        };
        cluster::Cluster::real(kc, cert, key, &a.pool_user, &work_dir)?
    };
    if a.cleanup {
        cluster::remove(&cluster).await?;
        println!("removed the run's namespace {} and nodes", cluster::NAMESPACE);
        return Ok(());
    }
    let spec = scale::ScaleSpec {
        shape: cluster::Shape {
            nodes: a.nodes,
            pods_per_node: a.pods_per_node,
            services: a.services,
            endpoints_per_slice: a.endpoints_per_slice,
            cni: a.cni,
        },
        mode: a.mode,
        agents: a.agents,
        hold: a.hold,
        replicas: a.replicas.clamp(1, 8),
        duration: a.duration,
        write_rate: a.write_rate,
        settle: a.settle,
        ramp: a.ramp,
        sync_timeout: a.sync_timeout,
        rollout: a.rollout,
        kill_replica: a.kill_replica,
        tier: node::TierConfig {
            bin: a.files.kubeplex_bin,
            config: "config/node.yaml".into(),
            pool_config: a.files.pool_config,
        },
        work_dir: work_dir.clone(),
    };
    let result = scale::run(spec, cluster).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        eprintln!("work directory: {}", work_dir.display());
    }
    bench::print(&result?, json);
    Ok(())
}
