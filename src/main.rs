//! The `kubeplex` command: `serve` (the proxy), `sim` (a fake apiserver) and `demo`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kubeplex::cache::fanout::WatchConfig;
use kubeplex::cache::store::StoreLimits;
use kubeplex::serve::{Http1Server, Mode, NodeConfig, Proxy};
use kubeplex::upstream::caches::{CachesConfig, FreshnessConfig};
use kubeplex::upstream::review::ReviewConfig;
use kubeplex::upstream::{Upstream, UpstreamConfig};

/// `kubeplex sim` and `kubeplex demo`: the fake apiserver (built with the default `sim` feature;
/// the release image leaves it out).
#[cfg(feature = "sim")]
mod demo;

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
    Serve(Box<ServeArgs>),
    /// Run the built-in fake kube-apiserver (for tests and trying clients).
    #[cfg(feature = "sim")]
    Sim(demo::SimArgs),
    /// Run the demo: the fake apiserver seeded with a realistic cluster and light churn.
    #[cfg(feature = "sim")]
    Demo(demo::DemoArgs),
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
    /// `sidecar`: a loopback listener whose clients share kubeplex's identity (plain HTTP).
    /// `node`: the node-local mode — TLS, clients authenticated (client certificate, bearer
    /// token by TokenReview, else anonymous) and every read from the cache authorized for them
    /// by a SubjectAccessReview.
    #[arg(long, env = "KUBEPLEX_MODE", default_value = "sidecar", value_parser = ["sidecar", "node"])]
    mode: String,
    /// Serving certificate (PEM chain) of the node mode's TLS listener; reloaded when it changes.
    #[arg(long, env = "KUBEPLEX_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// Private key of the serving certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "KUBEPLEX_TLS_PRIVATE_KEY_FILE")]
    tls_private_key_file: Option<PathBuf>,
    /// Client CA bundle: client certificates it signed authenticate as user = CN, groups = O
    /// (the apiserver's --client-ca-file).
    #[arg(long, env = "KUBEPLEX_CLIENT_CA_FILE")]
    client_ca_file: Option<PathBuf>,
    /// Node mode: requests without credentials are system:anonymous (true, as the apiserver's
    /// --anonymous-auth) or refused with 401 (false).
    #[arg(long, env = "KUBEPLEX_ANONYMOUS_AUTH", default_value_t = true, action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// Sidecar mode: allow a listener other processes can reach (not loopback), whose clients
    /// would all read the cache with kubeplex's identity. Refused unless set.
    #[arg(long, env = "KUBEPLEX_ALLOW_SHARED_IDENTITY_LISTENER")]
    allow_shared_identity_listener: bool,
    /// On SIGTERM or SIGINT: readiness fails, the listener stops accepting, open watches end
    /// (clients resume elsewhere or after the restart), requests under way get this long to
    /// finish; then kubeplex exits 0. Keep it below the pod's terminationGracePeriodSeconds.
    #[arg(long, env = "KUBEPLEX_SHUTDOWN_GRACE_PERIOD", default_value = "25s", value_parser = parse_duration)]
    shutdown_grace_period: std::time::Duration,
    #[command(flatten)]
    cache: CacheArgs,
}

impl ServeArgs {
    /// The listener's mode, or the one line that says why these options cannot run.
    fn mode(&self) -> anyhow::Result<Mode> {
        match self.mode.as_str() {
            "node" => {
                let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_private_key_file)
                else {
                    anyhow::bail!("--mode node needs --tls-cert-file and --tls-private-key-file (clients send credentials only over TLS)");
                };
                let mut tls = kubeplex_net::TlsConfig::new(cert.clone(), key.clone());
                if let Some(ca) = &self.client_ca_file {
                    tls = tls.with_client_ca(ca.clone());
                }
                Ok(Mode::Node(NodeConfig {
                    tls,
                    anonymous: self.anonymous_auth,
                    reviews: ReviewConfig::default(),
                }))
            }
            _ => {
                if self.tls_cert_file.is_some() || self.client_ca_file.is_some() {
                    anyhow::bail!("--tls-cert-file and --client-ca-file are for --mode node");
                }
                // A listener other processes can reach would serve the cache to anyone with
                // kubeplex's identity.
                if !self.listen.ip().is_loopback() && !self.allow_shared_identity_listener {
                    anyhow::bail!(
                        "--listen {} is not a loopback address: in the sidecar mode every client reads the cache with kubeplex's identity; use --mode node (TLS, authenticated clients) or set --allow-shared-identity-listener",
                        self.listen
                    );
                }
                Ok(Mode::Sidecar(self.http1_server))
            }
        }
    }
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
    /// How long the upstream's discovery answers are used before they are refreshed; while
    /// the upstream cannot be reached, the last answers are kept (reads go on being served
    /// from the caches through an outage of any length).
    #[arg(long, env = "KUBEPLEX_DISCOVERY_TTL", default_value = "5m", value_parser = parse_duration)]
    discovery_ttl: std::time::Duration,
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
            discovery_ttl: self.discovery_ttl,
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
            Command::Serve(a) => run_serve(*a).await,
            #[cfg(feature = "sim")]
            Command::Sim(a) => demo::run_sim(a).await,
            #[cfg(feature = "sim")]
            Command::Demo(a) => demo::run_demo(a).await,
        }
    })
}

/// Waits for SIGTERM (the kubelet stopping the pod) or SIGINT (Ctrl-C); its name.
async fn terminated() -> anyhow::Result<&'static str> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => Ok("SIGTERM"),
            r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT").map_err(Into::into),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        Ok("SIGINT")
    }
}

async fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let mode = a.mode()?;
    let cfg = UpstreamConfig::resolve(a.kubeconfig.as_deref(), a.context.as_deref())
        .context("finding the upstream apiserver")?;
    let upstream = Upstream::new(cfg).context("building the upstream client")?;
    let base = upstream.base_url().to_string();
    // The one registry: each layer defines its metrics and registers them into it.
    let registry = prometheus::Registry::new();
    let proxy =
        Proxy::start_in(registry, upstream, a.listen, Some(a.admin_listen), a.cache.config(), mode)
            .await?;
    tracing::info!(listen = %proxy.addr, admin = ?proxy.admin_addr, upstream = %base, "kubeplex serving");
    let signal = terminated().await?;
    tracing::info!(signal, "stopping");
    proxy.shutdown(a.shutdown_grace_period).await;
    Ok(())
}
