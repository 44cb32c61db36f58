//! `kubeplex-bench`: load any apiserver — directly, or through kubeplex — and print figures
//! (see the library, `kubeplex_bench`). Loopback targets only, unless `--allow-remote`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kubeplex_bench as bench;
use kubeplex_bench::list::{self, ListSpec, Rv};
use kubeplex_bench::mix::{self, MixSpec};
use kubeplex_bench::node;
use kubeplex_bench::seed;
use kubeplex_bench::target::{calls_by_verb, scrape, Target};
use kubeplex_bench::watch::{self, WatchSpec};
use serde::Serialize;

use self::args::*;

/// The command line: the commands, their flags and how they are read.
mod args;

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
        return scale(*a, cli.target.kubeconfig, cli.json).await;
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
            cni: a.cni || a.cilium,
            cilium: a.cilium,
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
        soak: a.soak.map(|duration| scale::soak::SoakSpec {
            duration,
            every: a.soak_every,
            sample: a.soak_sample,
            outage: a.soak_outage,
            restart_apiserver: a.restart_apiserver,
            compact_etcd: a.compact_etcd,
            samples: a.soak_samples,
            schedule: a.soak_schedule,
        }),
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
