//! `kubeplex sim` (the fake apiserver on its own) and `kubeplex demo` (kubeplex in front of it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::Value;

use super::config::{Config, File, Settings};

#[derive(Args)]
pub struct SimArgs {
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
pub struct DemoArgs {
    /// kubeplex's settings for the demo (`config/demo.yaml`; its kubeconfig is the demo's own
    /// fake apiserver). Without it: the defaults, caching pods and configmaps.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where kubeplex listens (the kubeconfig points here); overrides the file's `listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Where the fake apiserver behind it listens. It is the demo's own (the kubeconfig points
    /// at kubeplex), so by default it takes a free loopback port: the demo runs beside a local
    /// cluster on 127.0.0.1:6443.
    #[arg(long, default_value = "127.0.0.1:0")]
    upstream_listen: SocketAddr,
    /// kubeplex's admin endpoints; overrides the file's `adminListen`.
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
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

/// Starts the fake apiserver on `listen` (set by `flag`, named when it cannot bind).
async fn start(
    listen: SocketAddr,
    flag: &str,
    objects: Vec<Value>,
    kubeconfig: Option<&PathBuf>,
) -> anyhow::Result<Arc<Sim>> {
    let started = SimBuilder::new().listen(listen).seed(objects).start().await;
    let sim = Arc::new(started.with_context(|| format!("fake apiserver on {listen} ({flag})"))?);
    if let Some(path) = kubeconfig {
        sim.write_kubeconfig(path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(sim)
}

pub async fn run_sim(a: SimArgs) -> anyhow::Result<()> {
    let (objects, shape) = parse_seed(&a.seed)?;
    let sim = start(a.listen, "--listen", objects, a.write_kubeconfig.as_ref()).await?;
    tracing::info!(url = %sim.url(), "fake kube-apiserver listening");
    let _churn = (a.churn > 0).then(|| seed::churn(sim.clone(), shape, a.churn));
    tokio::signal::ctrl_c().await?;
    Ok(())
}

/// The demo's kubeplex settings, checked before anything starts: the file (`--config`) or the
/// defaults caching pods and configmaps, with `--listen` and `--admin-listen` over them.
pub fn config(a: &DemoArgs) -> anyhow::Result<Config> {
    let file = a.config.as_deref().map(File::read).transpose()?;
    let mut settings = match &file {
        Some(f) => f.settings()?,
        None => {
            Settings { caches: vec!["pods".into(), "configmaps".into()], ..Settings::defaults() }
        }
    };
    if settings.kubeconfig.is_some() || settings.context.is_some() {
        anyhow::bail!("kubeconfig, context: the demo's upstream is its own fake apiserver; use `kubeplex serve` for another");
    }
    settings.listen = a.listen.unwrap_or(settings.listen);
    settings.admin_listen = a.admin_listen.unwrap_or(settings.admin_listen);
    Ok(settings.resolve().map_err(|e| match &file {
        Some(f) => f.locate(e),
        None => e,
    })?)
}

/// How the demo's command line sets a listener's address: its flag, or the `--config` file's key.
fn demo_setting(key: &str) -> String {
    let flag = if key == "adminListen" { "--admin-listen" } else { "--listen" };
    format!("{flag}, or `{key}` in --config")
}

pub async fn run_demo(a: DemoArgs, config: Config) -> anyhow::Result<()> {
    let shape = ClusterShape { pods: a.pods, ..ClusterShape::default() };
    let upstream_kubeconfig = a.write_kubeconfig.with_extension("upstream.kubeconfig");
    let objects = seed::cluster(shape);
    let sim =
        start(a.upstream_listen, "--upstream-listen", objects, Some(&upstream_kubeconfig)).await?;
    let _churn = (a.churn > 0).then(|| seed::churn(sim.clone(), shape, a.churn));
    let admin_listen = config.settings.admin_listen;
    let cfg = UpstreamConfig::resolve(Some(&upstream_kubeconfig), None)?;
    let proxy = Proxy::builder(Upstream::new(cfg)?, config.caches)
        .listen(config.settings.listen)
        .admin(admin_listen)
        .mode(config.mode)
        .guardrails(config.guardrails)
        .start()
        .await
        .map_err(|e| super::config::name_the_setting(e, demo_setting))?;
    std::fs::write(
        &a.write_kubeconfig,
        kubeplex_sim::kubeconfig_for(&format!("http://{}", proxy.addr), "kubeplex-demo"),
    )?;
    let kc = a.write_kubeconfig.display();
    println!("kubeplex demo: kubeplex on http://{} in front of a fake kube-apiserver (http://{}) with {} pods on {} nodes, {} writes/s of churn", proxy.addr, sim.addr(), shape.pods, shape.nodes, a.churn);
    println!("  admin: http://{admin_listen}/metrics");
    println!();
    println!("Try (through kubeplex):");
    println!("  kubectl --kubeconfig {kc} get pods -A --chunk-size=500");
    println!(
        "  kubectl --kubeconfig {kc} get --raw '/api/v1/pods?resourceVersion=0' | head -c 300"
    );
    println!("  kubectl --kubeconfig {kc} get pods -n team-0 -w");
    println!("  curl -s http://{admin_listen}/metrics | grep kubeplex_requests_total");
    println!();
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
