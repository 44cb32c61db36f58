//! `kubeplex-bench`'s command line: each command and its flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kubeplex_bench::list::Rv;
use kubeplex_bench::node;
use kubeplex_bench::seed::Kind;

#[derive(Parser)]
#[command(name = "kubeplex-bench", about = "Load an apiserver (or kubeplex) and print figures")]
pub struct Cli {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print reports as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args)]
pub struct TargetArgs {
    /// The server's URL (no credentials), e.g. http://127.0.0.1:8001.
    #[arg(long, global = true)]
    pub server: Option<String>,
    /// A kubeconfig for the server (its current context).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Allow a server that is not on a loopback address.
    #[arg(long, global = true)]
    pub allow_remote: bool,
    /// The upstream's /metrics URL: report the list and watch calls it received during the run.
    #[arg(long, global = true)]
    pub upstream_metrics: Option<String>,
}

#[derive(Subcommand)]
pub enum Command {
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
    Scale(Box<ScaleArgs>),
}

#[derive(Args)]
pub struct ScaleArgs {
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    #[arg(long, default_value_t = 30)]
    pub pods_per_node: usize,
    /// Services without a selector, each with an EndpointSlice the writer keeps.
    #[arg(long, default_value_t = 100)]
    pub services: usize,
    #[arg(long, default_value_t = 20)]
    pub endpoints_per_slice: usize,
    /// Each node runs a CNI-like agent too: its node's pods, every node, namespace, service
    /// and endpointslice, in JSON (a client-go ≥ 1.35 informer each, with its own
    /// ServiceAccount).
    #[arg(long)]
    pub cni: bool,
    /// The CNI agent is Cilium's (implies --cni): its node's pods, its Node, namespaces,
    /// services and endpointslices in protobuf, and every CiliumNode,
    /// CiliumEndpoint, CiliumIdentity and CiliumNetworkPolicy in JSON; the writer writes a
    /// CiliumEndpoint with every pod. On the real apiserver, Cilium's CRDs must be installed
    /// (scripts/realcluster/scale.sh --cilium does).
    #[arg(long)]
    pub cilium: bool,
    #[arg(long, value_enum, default_value = "both")]
    pub mode: kubeplex_bench::scale::Mode,
    /// Whose agents act for the nodes: the emulated ones, or real ones started by someone else
    /// when `agents-start` appears in the work directory (scripts/realcluster/calibrate.py
    /// starts kubemark's; --mode direct).
    #[arg(long, value_enum, default_value = "emulated")]
    pub agents: kubeplex_bench::scale::Agents,
    /// The writer starts no sooner than this many seconds after the nodes start.
    #[arg(long, default_value = "0", value_parser = seconds)]
    pub hold: Duration,
    /// Pool replicas (deploy/overlays/pool runs two).
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// The writer's seconds, once every node synced.
    #[arg(long, default_value = "60", value_parser = seconds)]
    pub duration: Duration,
    #[arg(long, default_value_t = 4.0)]
    pub write_rate: f64,
    #[arg(long, default_value = "5", value_parser = seconds)]
    pub settle: Duration,
    /// Spread the nodes' start over this long (0: all at once, as after a pool restart).
    #[arg(long, default_value = "0", value_parser = seconds)]
    pub ramp: Duration,
    #[arg(long, default_value = "180", value_parser = seconds)]
    pub sync_timeout: Duration,
    /// Through the pool, after the steady run: every node tier started again within this
    /// many seconds (a DaemonSet rollout).
    #[arg(long, value_parser = seconds)]
    pub rollout: Option<Duration>,
    /// Through the pool, after that: pool replica 0 killed and started again after this many
    /// seconds.
    #[arg(long, value_parser = seconds)]
    pub kill_replica: Option<Duration>,
    /// Through the pool, after those: a soak of this many seconds — the writer churning all
    /// along, a disruption every --soak-every (a rollout of the node tiers, a replica
    /// restarted, the apiserver restarted, etcd compacted, an upstream outage, a burst of cold
    /// node tiers), samples every --soak-sample to --soak-samples (scale::soak).
    #[arg(long, value_parser = seconds)]
    pub soak: Option<Duration>,
    #[arg(long, default_value = "300", value_parser = seconds)]
    pub soak_every: Duration,
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub soak_sample: Duration,
    /// The soak's upstream outage.
    #[arg(long, default_value = "60", value_parser = seconds)]
    pub soak_outage: Duration,
    /// The soak's disruptions in their order, repeated (default: rollout, replica-restart,
    /// apiserver-restart, compaction, outage, cold-burst).
    #[arg(long, value_delimiter = ',')]
    pub soak_schedule: Vec<kubeplex_bench::scale::soak::Kind>,
    /// The soak's samples (CSV; scripts/realcluster/svgplot.py renders them).
    #[arg(long, default_value = "soak-samples.csv")]
    pub soak_samples: PathBuf,
    /// A shell command that restarts the kube-apiserver and returns once it serves (the
    /// soak's apiserver restarts; none without it).
    #[arg(long)]
    pub restart_apiserver: Option<String>,
    /// A shell command that compacts etcd to its current revision (the soak's compactions;
    /// none without it).
    #[arg(long)]
    pub compact_etcd: Option<String>,
    /// Start a fake apiserver here instead of --kubeconfig's.
    #[arg(long)]
    pub sim: bool,
    /// The real apiserver's client CA, to sign the nodes' certificates (and its key, PKCS#8).
    #[arg(long)]
    pub ca_cert: Option<PathBuf>,
    #[arg(long)]
    pub ca_key: Option<PathBuf>,
    /// The pool's user on the real apiserver (its RBAC: deploy/base/pool/pool.yaml's, bound
    /// to this user, as scripts/realcluster/agents.py applies it).
    #[arg(long, default_value = "agents-harness-kubeplex-pool")]
    pub pool_user: String,
    /// Delete the run's namespace and nodes, and stop.
    #[arg(long)]
    pub cleanup: bool,
    #[command(flatten)]
    pub files: TierFiles,
}

#[derive(Args)]
pub struct NodesArgs {
    /// Nodes, each with its agents (and in the node tier its own kubeplex process).
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Allow more than 20 nodes (up to 500).
    #[arg(long)]
    pub allow_large: bool,
    #[arg(long, value_enum, default_value = "both")]
    pub mode: node::Mode,
    /// Pods bound to each node before the run.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// Apps (pods, a Service, an EndpointSlice, a ConfigMap and a Secret each).
    #[arg(long, default_value_t = 20)]
    pub apps: usize,
    #[arg(long, default_value_t = 4)]
    pub namespaces: usize,
    #[arg(long, default_value = "60", value_parser = seconds)]
    pub duration: Duration,
    /// Rollout steps a second (a pod deleted, a new one bound to a node).
    #[arg(long, default_value_t = 2.0)]
    pub pod_rate: f64,
    /// A Service changes this often (seconds; 0: never).
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub service_every: Duration,
    /// Each kubelet patches its node status this often (seconds; the kubelet's report
    /// frequency is 5 minutes, plus each change).
    #[arg(long, default_value = "60", value_parser = seconds)]
    pub node_status_every: Duration,
    /// After the controllers stop, before the clients' views are compared (seconds).
    #[arg(long, default_value = "3", value_parser = seconds)]
    pub settle: Duration,
    /// The node configuration each kubeplex runs with (its caches among the rest).
    #[arg(long, default_value = "config/node.yaml")]
    pub node_config: PathBuf,
    #[command(flatten)]
    pub files: TierFiles,
}

/// What the scenarios that start kubeplex tiers read, and where they write.
#[derive(Args)]
pub struct TierFiles {
    /// The kubeplex binary the tiers run.
    #[arg(long, default_value = "target/release/kubeplex")]
    pub kubeplex_bin: PathBuf,
    /// The node DaemonSet manifest: kubeplex's RBAC is read from it (for the fake apiserver).
    #[arg(long, default_value = "deploy/base/node/daemonset.yaml")]
    pub daemonset: PathBuf,
    /// The pool tier's configuration (the pool mode).
    #[arg(long, default_value = "deploy/base/pool/kubeplex.yaml")]
    pub pool_config: PathBuf,
    /// The pool tier's manifest: its RBAC, and the node tiers' group's, are read from it.
    #[arg(long, default_value = "deploy/base/pool/pool.yaml")]
    pub pool_manifest: PathBuf,
    /// Certificates, kubeconfigs and kubeplex logs (default: a new temporary directory,
    /// removed at the end unless --keep).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    #[arg(long)]
    pub keep: bool,
}

#[derive(Args)]
pub struct MixArgs {
    /// Simulated nodes `node-0` ..: a kubelet and a kube-proxy each.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Cluster-wide agents (all pods, JSON, list then watch).
    #[arg(long, default_value_t = 3)]
    pub agents: usize,
    /// `kubectl get pods -A` runs, spread over the run.
    #[arg(long, default_value_t = 5)]
    pub kubectl: usize,
    /// Pod changes per second (the pods `bench-i` of --namespace, seeded beforehand).
    #[arg(long, default_value_t = 3.0)]
    pub writes_per_second: f64,
    /// Pods the writer changes in turn.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Namespace of the writer's pods and of the ConfigMap informer.
    #[arg(long, default_value = "bench")]
    pub namespace: String,
    #[arg(long, default_value = "20", value_parser = seconds)]
    pub duration: Duration,
    /// Where the writer's changes go (default: the server measured), e.g. the upstream behind
    /// kubeplex, as a controller's writes would.
    #[arg(long)]
    pub writer_server: Option<String>,
    /// kubeplex's admin /metrics URL: also report its own upstream calls (list, watch,
    /// watchlist, and the freshness proofs' proof_list and proof_watch).
    #[arg(long)]
    pub proxy_metrics: Option<String>,
}

#[derive(Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value = "pods")]
    pub kind: Kind,
    /// Namespace to list ("" for all namespaces).
    #[arg(long, default_value = "bench")]
    pub namespace: String,
    #[arg(long, value_enum, default_value = "zero")]
    pub rv: Rv,
    /// Page size for --rv paged.
    #[arg(long, default_value_t = 500)]
    pub limit: usize,
    #[arg(long)]
    pub label_selector: Option<String>,
    #[arg(long)]
    pub field_selector: Option<String>,
    #[arg(long)]
    pub protobuf: bool,
    #[arg(long)]
    pub gzip: bool,
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub duration: Duration,
    /// Stop after this many lists.
    #[arg(long)]
    pub requests: Option<u64>,
}

#[derive(Args)]
pub struct WatchArgs {
    #[arg(long, value_enum, default_value = "configmaps")]
    pub kind: Kind,
    #[arg(long, default_value = "bench")]
    pub namespace: String,
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Changes per second.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub duration: Duration,
    /// `metadata.name=X` or `spec.nodeName=node-K` (pods).
    #[arg(long)]
    pub field_selector: Option<String>,
    /// Objects the writer changes: bench-000000 .. (seeded beforehand).
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    #[arg(long, default_value_t = 20)]
    pub nodes: usize,
    /// PID of the measured server, for its RSS.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Where the writer's changes go (default: the server measured), e.g. the upstream behind
    /// kubeplex, as a controller's writes would.
    #[arg(long)]
    pub writer_server: Option<String>,
    /// Multiplex the watchers over this many HTTP/2 connections (plain HTTP).
    #[arg(long)]
    pub h2_connections: Option<usize>,
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub settle: Duration,
}

pub fn seconds(s: &str) -> Result<Duration, String> {
    let s = s.trim_end_matches('s');
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?}: expected seconds (0 to 86400)"))
}

pub fn collection(kind: Kind, namespace: &str) -> String {
    if namespace.is_empty() {
        format!("/api/v1/{}", kind.resource())
    } else {
        format!("/api/v1/namespaces/{namespace}/{}", kind.resource())
    }
}
