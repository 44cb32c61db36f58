//! The `kubeplex` command: `serve` (the proxy), `sim` (a fake apiserver) and `demo`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kubeplex::cache::fanout::WatchConfig;
use kubeplex::cache::resource::{CachesConfig, FreshnessConfig};
use kubeplex::cache::store::StoreLimits;
use kubeplex::serve::{Http1Server, Proxy};
use kubeplex::sim::seed::{self, ClusterShape};
use kubeplex::sim::{Sim, SimBuilder};
use kubeplex::upstream::{Upstream, UpstreamConfig};
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "kubeplex",
    version,
    about = "A caching proxy and watch multiplexer for the Kubernetes API server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy in front of an apiserver (kubeconfig, in-cluster, $KUBECONFIG, ~/.kube/config).
    Serve(ServeArgs),
    /// Run the built-in fake kube-apiserver (for tests and trying clients).
    Sim(SimArgs),
    /// Run the demo: the fake apiserver seeded with a realistic cluster and light churn.
    Demo(DemoArgs),
}

/// The proxy's settings: command line first, then `KUBEPLEX_*` environment variables, then
/// the defaults below — resolved here, before any socket is bound.
#[derive(Args)]
struct ServeArgs {
    /// Kubeconfig of the upstream apiserver; without it: in-cluster, $KUBECONFIG, ~/.kube/config.
    #[arg(long, env = "KUBEPLEX_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: its current-context).
    #[arg(long, env = "KUBEPLEX_CONTEXT")]
    context: Option<String>,
    /// Where clients connect (HTTP/1.1 and HTTP/2).
    #[arg(long, env = "KUBEPLEX_LISTEN", default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz.
    #[arg(long, env = "KUBEPLEX_ADMIN_LISTEN", default_value = "127.0.0.1:9090")]
    admin_listen: SocketAddr,
    /// Server for HTTP/1.1 clients: `lean` answers body-less GETs (lists, gets, watches) with
    /// no buffers held while a watch idles, the rest with hyper; `hyper` uses hyper for all.
    #[arg(long, env = "KUBEPLEX_HTTP1_SERVER", default_value = "lean", value_parser = parse_http1_server)]
    http1_server: Http1Server,
    #[command(flatten)]
    cache: CacheArgs,
}

fn parse_http1_server(s: &str) -> Result<Http1Server, String> {
    match s {
        "lean" => Ok(Http1Server::Lean),
        "hyper" => Ok(Http1Server::Hyper),
        _ => Err(format!("{s:?}: expected lean or hyper")),
    }
}

#[derive(Args, Clone)]
struct CacheArgs {
    /// Stop a resource's cache (and its upstream watch) after this long without readers.
    #[arg(long, env = "KUBEPLEX_CACHE_IDLE_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    cache_idle_timeout: std::time::Duration,
    /// How long past states are kept for exact-resourceVersion lists and continue tokens.
    #[arg(long, env = "KUBEPLEX_SNAPSHOT_WINDOW", default_value = "5m", value_parser = parse_duration)]
    snapshot_window: std::time::Duration,
    /// At most this many past states are kept per cache.
    #[arg(long, env = "KUBEPLEX_SNAPSHOT_MAX", default_value_t = 10_000)]
    snapshot_max: usize,
    /// Caches to start at start-up and keep running (readiness waits for them):
    /// RESOURCE (core/v1) or GROUP/VERSION/RESOURCE, with `:protobuf` for the protobuf cache.
    #[arg(long = "cache", env = "KUBEPLEX_CACHES", value_delimiter = ',')]
    preload: Vec<String>,
    /// Reads of a cache that has not synced yet wait this long for its first load (sharing
    /// its one upstream list), then pass through; 0s: pass through at once.
    #[arg(long, env = "KUBEPLEX_CACHE_SYNC_WAIT", default_value = "15s", value_parser = parse_duration)]
    cache_sync_wait: std::time::Duration,
    /// Consistent reads (resourceVersion unset: kubectl get, WatchList informers) wait this
    /// long for the cache to be shown current (a one-item list and a bookmark probe upstream,
    /// shared by all waiting reads), then pass through; 0s: always pass through.
    #[arg(long, env = "KUBEPLEX_CONSISTENT_READ_WAIT", default_value = "3s", value_parser = parse_duration)]
    consistent_read_wait: std::time::Duration,
    /// A consistent list smaller than this (bytes of its objects) passes through rather than
    /// wait ~1.5 s for a bookmark probe of its own; larger ones, and watches, are proven.
    #[arg(long, env = "KUBEPLEX_CONSISTENT_LIST_PROBE_MIN_BYTES", default_value_t = FreshnessConfig::PROBE_MIN_LIST_BYTES)]
    consistent_list_probe_min_bytes: usize,
    #[command(flatten)]
    watch: WatchArgs,
}

#[derive(Args, Clone)]
struct WatchArgs {
    /// Events kept per cache for watches that resume from a resourceVersion.
    #[arg(long, env = "KUBEPLEX_WATCH_HISTORY_EVENTS", default_value_t = 100_000)]
    watch_history_events: usize,
    /// MiB kept per cache for resuming watches (objects and encoded events).
    #[arg(long, env = "KUBEPLEX_WATCH_HISTORY_MIB", default_value_t = 256)]
    watch_history_mib: usize,
    /// Events a downstream watcher may have waiting before it is ended as too slow.
    #[arg(long, env = "KUBEPLEX_WATCH_QUEUE", default_value_t = 1000)]
    watch_queue: usize,
    /// How long an event may wait for a downstream watcher before it is ended as too slow.
    #[arg(long, env = "KUBEPLEX_WATCH_SLOW_AFTER", default_value = "30s", value_parser = parse_duration)]
    watch_slow_after: std::time::Duration,
    /// Period of BOOKMARK events to watchers that allow them.
    #[arg(long, env = "KUBEPLEX_WATCH_BOOKMARK_INTERVAL", default_value = "1m", value_parser = parse_duration)]
    watch_bookmark_interval: std::time::Duration,
    /// Watches without timeoutSeconds end after a random time between this and twice this
    /// (the apiserver's --min-request-timeout).
    #[arg(long, env = "KUBEPLEX_MIN_REQUEST_TIMEOUT", default_value = "30m", value_parser = parse_duration)]
    min_request_timeout: std::time::Duration,
}

impl Default for WatchArgs {
    fn default() -> Self {
        let d = WatchConfig::default();
        WatchArgs {
            watch_history_events: d.history_events,
            watch_history_mib: d.history_bytes >> 20,
            watch_queue: d.queue_frames,
            watch_slow_after: d.slow_after,
            watch_bookmark_interval: d.bookmark_interval,
            min_request_timeout: d.max_timeout,
        }
    }
}

impl CacheArgs {
    fn config(&self) -> CachesConfig {
        CachesConfig {
            limits: StoreLimits {
                max_snapshots: self.snapshot_max,
                max_snapshot_age: self.snapshot_window,
            },
            idle_timeout: self.cache_idle_timeout,
            preload: self.preload.clone(),
            watch: WatchConfig {
                history_events: self.watch.watch_history_events,
                history_bytes: self.watch.watch_history_mib.saturating_mul(1 << 20),
                queue_frames: self.watch.watch_queue.max(1),
                slow_after: self.watch.watch_slow_after,
                bookmark_interval: self.watch.watch_bookmark_interval,
                max_timeout: self.watch.min_request_timeout,
            },
            freshness: FreshnessConfig {
                sync_wait: self.cache_sync_wait,
                consistent_wait: self.consistent_read_wait,
                probe_min_list_bytes: self.consistent_list_probe_min_bytes,
            },
        }
    }
}

/// `90s`, `15m`, `1h`.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 =
        num.parse().map_err(|_| format!("{s:?}: expected a number and a unit (s, m, h)"))?;
    let secs = match unit {
        "s" | "" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: unit must be s, m or h")),
    };
    Ok(std::time::Duration::from_secs(secs))
}

#[derive(Args)]
struct SimArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write a kubeconfig pointing at the server to this path.
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// Initial contents: `empty`, `demo` (a realistic cluster), `pods=N` (demo shape with N
    /// pods), or a path to a JSON file holding an array or List of objects.
    #[arg(long, default_value = "empty")]
    seed: String,
    /// Writes per second of background churn (0: none).
    #[arg(long, default_value_t = 0)]
    churn: u32,
}

#[derive(Args)]
struct DemoArgs {
    /// Where kubeplex listens (the kubeconfig points here).
    #[arg(long, default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
    /// Where the fake apiserver behind it listens.
    #[arg(long, default_value = "127.0.0.1:6443")]
    upstream_listen: SocketAddr,
    /// kubeplex's admin endpoints.
    #[arg(long, default_value = "127.0.0.1:9090")]
    admin_listen: SocketAddr,
    /// Where to write the demo kubeconfig.
    #[arg(long, default_value = "kubeplex-demo.kubeconfig")]
    write_kubeconfig: PathBuf,
    /// Number of pods in the demo cluster.
    #[arg(long, default_value_t = 3000)]
    pods: usize,
    /// Writes per second of background churn.
    #[arg(long, default_value_t = 5)]
    churn: u32,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Serve(a) => run_serve(a).await,
            Command::Sim(a) => run_sim(a).await,
            Command::Demo(a) => run_demo(a).await,
        }
    })
}

fn parse_seed(spec: &str) -> anyhow::Result<(Vec<Value>, ClusterShape)> {
    let shape = ClusterShape::default();
    match spec {
        "empty" => Ok((Vec::new(), ClusterShape { pods: 0, ..shape })),
        "demo" => Ok((seed::cluster(shape), shape)),
        s if s.starts_with("pods=") => {
            let pods = s["pods=".len()..].parse().context("pods=N needs a number")?;
            let shape = ClusterShape { pods, ..shape };
            Ok((seed::cluster(shape), shape))
        }
        path => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            let v: Value =
                serde_json::from_str(&text).with_context(|| format!("parsing {path}"))?;
            let items = match v {
                Value::Array(a) => a,
                Value::Object(mut o) => match o.shift_remove("items") {
                    Some(Value::Array(a)) => a,
                    _ => vec![Value::Object(o)],
                },
                _ => anyhow::bail!("{path}: expected an array or a List of objects"),
            };
            Ok((items, ClusterShape { pods: 0, ..shape }))
        }
    }
}

async fn start(
    listen: SocketAddr,
    objects: Vec<Value>,
    kubeconfig: Option<&PathBuf>,
) -> anyhow::Result<Arc<Sim>> {
    let sim = Arc::new(SimBuilder::new().listen(listen).seed(objects).start().await?);
    if let Some(path) = kubeconfig {
        sim.write_kubeconfig(path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(sim)
}

async fn run_sim(a: SimArgs) -> anyhow::Result<()> {
    let (objects, shape) = parse_seed(&a.seed)?;
    let sim = start(a.listen, objects, a.write_kubeconfig.as_ref()).await?;
    tracing::info!(url = %sim.url(), "fake kube-apiserver listening");
    let _churn = (a.churn > 0).then(|| seed::churn(sim.clone(), shape, a.churn));
    tokio::signal::ctrl_c().await?;
    Ok(())
}

async fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let cfg = UpstreamConfig::resolve(a.kubeconfig.as_deref(), a.context.as_deref())
        .context("finding the upstream apiserver")?;
    let upstream = Upstream::new(cfg).context("building the upstream client")?;
    let base = upstream.base_url().to_string();
    let proxy = Proxy::start_with(
        upstream,
        a.listen,
        Some(a.admin_listen),
        a.cache.config(),
        a.http1_server,
    )
    .await?;
    tracing::info!(listen = %proxy.addr, admin = ?proxy.admin_addr, upstream = %base, "kubeplex serving");
    tokio::signal::ctrl_c().await?;
    Ok(())
}

async fn run_demo(a: DemoArgs) -> anyhow::Result<()> {
    let shape = ClusterShape { pods: a.pods, ..ClusterShape::default() };
    let upstream_kubeconfig = a.write_kubeconfig.with_extension("upstream.kubeconfig");
    let sim = start(a.upstream_listen, seed::cluster(shape), Some(&upstream_kubeconfig)).await?;
    let _churn = (a.churn > 0).then(|| seed::churn(sim.clone(), shape, a.churn));
    let cfg = UpstreamConfig::resolve(Some(&upstream_kubeconfig), None)?;
    let defaults = CacheArgs {
        cache_idle_timeout: parse_duration("15m").map_err(anyhow::Error::msg)?,
        snapshot_window: parse_duration("5m").map_err(anyhow::Error::msg)?,
        snapshot_max: 10_000,
        preload: vec!["pods".into(), "configmaps".into()],
        cache_sync_wait: FreshnessConfig::SYNC_WAIT,
        consistent_read_wait: FreshnessConfig::CONSISTENT_WAIT,
        consistent_list_probe_min_bytes: FreshnessConfig::PROBE_MIN_LIST_BYTES,
        watch: WatchArgs::default(),
    };
    let proxy =
        Proxy::start(Upstream::new(cfg)?, a.listen, Some(a.admin_listen), defaults.config())
            .await?;
    std::fs::write(
        &a.write_kubeconfig,
        kubeplex::sim::kubeconfig_for(&format!("http://{}", proxy.addr), "kubeplex-demo"),
    )?;
    let kc = a.write_kubeconfig.display();
    println!("kubeplex demo: kubeplex on http://{} in front of a fake kube-apiserver (http://{}) with {} pods on {} nodes, {} writes/s of churn", proxy.addr, sim.addr(), shape.pods, shape.nodes, a.churn);
    println!("  admin: http://{}/metrics", a.admin_listen);
    println!();
    println!("Try (through kubeplex):");
    println!("  kubectl --kubeconfig {kc} get pods -A --chunk-size=500");
    println!(
        "  kubectl --kubeconfig {kc} get --raw '/api/v1/pods?resourceVersion=0' | head -c 300"
    );
    println!("  kubectl --kubeconfig {kc} get pods -n team-0 -w");
    println!("  curl -s http://{}/metrics | grep kubeplex_requests_total", a.admin_listen);
    println!();
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
