//! The `kubeplex` command: `sim` (a fake apiserver) and `demo`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kubeplex::sim::seed::{self, ClusterShape};
use kubeplex::sim::{Sim, SimBuilder};
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
    /// Run the built-in fake kube-apiserver (for tests and trying clients).
    Sim(SimArgs),
    /// Run the demo: the fake apiserver seeded with a realistic cluster and light churn.
    Demo(DemoArgs),
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
    /// Address of the demo apiserver.
    #[arg(long, default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
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

async fn run_demo(a: DemoArgs) -> anyhow::Result<()> {
    let shape = ClusterShape { pods: a.pods, ..ClusterShape::default() };
    let sim = start(a.listen, seed::cluster(shape), Some(&a.write_kubeconfig)).await?;
    let _churn = (a.churn > 0).then(|| seed::churn(sim.clone(), shape, a.churn));
    let kc = a.write_kubeconfig.display();
    println!(
        "kubeplex demo: a fake kube-apiserver with {} pods on {} nodes, {} writes/s of churn",
        shape.pods, shape.nodes, a.churn
    );
    println!("  listening on {}", sim.url());
    println!("  NOTE: the caching proxy's read path is not built yet, so the demo serves the fake apiserver alone.");
    println!();
    println!("Try:");
    println!("  kubectl --kubeconfig {kc} get nodes");
    println!("  kubectl --kubeconfig {kc} get pods -A --chunk-size=500");
    println!("  kubectl --kubeconfig {kc} get pods -n team-0 -w");
    println!("  kubectl --kubeconfig {kc} get --raw '/api/v1/pods?resourceVersion=0&limit=2'");
    println!();
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
