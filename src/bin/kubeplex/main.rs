//! The `kubeplex` command: `serve` (the proxy), `config` (its settings), `sim` (a fake
//! apiserver) and `demo`. The binary's own modules live beside this file (`src/bin/kubeplex/`);
//! everything else is the `kubeplex` library's.
//!
//! No unsafe code, but for the one exception: [`allocator`] calls glibc's `mallopt`,
//! `malloc_trim` and `mallinfo2`, each call allowed where it is made.
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};

/// glibc's malloc tuned at start-up, and freed heap given back to the system.
mod allocator;
/// The settings: one YAML file, `KUBEPLEX_*` variables and flags, resolved and checked.
mod config;

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
    /// Show or check kubeplex's settings.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Prepare a state directory (diskStateDir) for kubeplex's user: create it, mode 0700,
    /// owned by --owner with the files in it. For a root init container in front of a
    /// kubeplex that does not run as root (the DaemonSet's hostPath).
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// UID:GID that kubeplex runs as.
        #[arg(long, default_value = "65532:65532")]
        owner: String,
    },
    /// Run the built-in fake kube-apiserver (for tests and trying clients).
    #[cfg(feature = "sim")]
    Sim(demo::SimArgs),
    /// Run the demo: the fake apiserver seeded with a realistic cluster and light churn.
    #[cfg(feature = "sim")]
    Demo(demo::DemoArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective settings as a configuration file: the defaults, then the file
    /// (--config), then KUBEPLEX_* variables, then flags.
    Print(Box<ServeArgs>),
    /// Check a configuration file (keys, values, and the rules between them) without starting
    /// anything; exit 0 when kubeplex would run with it.
    Check {
        /// The YAML file.
        file: PathBuf,
    },
}

/// The proxy's settings: flags first, then `KUBEPLEX_*` environment variables, then the file,
/// then the defaults — resolved before any socket is bound.
#[derive(Args)]
struct ServeArgs {
    /// A YAML file of settings (every key as `kubeplex config print` shows it; a flag
    /// `--watch-queue` is the key `watchQueue`). Flags and variables override it.
    #[arg(long, env = "KUBEPLEX_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: config::Settings,
}

impl ServeArgs {
    /// The checked settings of this command line (`matches` are its own: they say which
    /// values were given rather than defaulted).
    fn load(&self, matches: &ArgMatches) -> anyhow::Result<config::Config> {
        Ok(config::load(self.config.as_deref(), matches)?)
    }
}

/// Every failure ends the process with one line on stderr and exit code 1 (2 for a command
/// line clap refuses), so that a crash-looping pod's last log line says why.
fn main() -> ExitCode {
    allocator::tune();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(cli, &matches) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the error and its causes on one line, separated by ": ".
            eprintln!("kubeplex: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    // The matches of the subcommand, for which settings were given rather than defaulted.
    let sub = |path: &[&str]| {
        path.iter().try_fold(matches, |m, name| m.subcommand_matches(name)).unwrap_or(matches)
    };
    let config = match &cli.command {
        Command::Serve(a) => Some(a.load(sub(&["serve"]))?),
        Command::Config(ConfigCommand::Print(a)) => {
            print!("{}", a.load(sub(&["config", "print"]))?.settings.to_yaml());
            return Ok(());
        }
        Command::Config(ConfigCommand::Check { file }) => {
            config::check(file)?;
            println!("{}: ok", file.display());
            return Ok(());
        }
        Command::StateDir { dir, owner } => {
            let parse = |s: Option<&str>| s.and_then(|s| s.parse::<u32>().ok());
            let mut ids = owner.splitn(2, ':');
            let (Some(uid), Some(gid)) = (parse(ids.next()), parse(ids.next())) else {
                anyhow::bail!("--owner {owner:?}: expected UID:GID, numeric");
            };
            let files = kubeplex::live::disk::prepare_dir(dir, uid, gid)
                .with_context(|| format!("state directory {}", dir.display()))?;
            println!("{}: mode 0700, owner {uid}:{gid}, {files} files", dir.display());
            return Ok(());
        }
        #[cfg(feature = "sim")]
        Command::Demo(a) => Some(demo::config(a)?),
        #[cfg(feature = "sim")]
        Command::Sim(_) => None,
    };
    init_logging(config.as_ref());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Serve(a) => run_serve(config.context("serve without settings")?, &a).await,
            Command::Config(_) | Command::StateDir { .. } => Ok(()),
            #[cfg(feature = "sim")]
            Command::Sim(a) => demo::run_sim(a).await,
            #[cfg(feature = "sim")]
            Command::Demo(a) => demo::run_demo(a, config.context("demo without settings")?).await,
        }
    })
}

/// Logs to stderr, as text or JSON lines; the level from the settings, else RUST_LOG, else info.
fn init_logging(config: Option<&config::Config>) {
    let filter = config
        .and_then(|c| tracing_subscriber::EnvFilter::try_new(&c.log_filter).ok())
        .or_else(|| tracing_subscriber::EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person at a terminal: a log file, a pipe or a container runtime's log
    // gets plain text (and NO_COLOR turns them off there too, https://no-color.org).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match config.map(|c| c.log_format) {
        Some(config::LogFormat::Json) => builder.json().flatten_event(true).init(),
        _ => builder.init(),
    }
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

/// The `upstreams` tried before the apiserver, with `upstreamsCaFile` read and their client
/// certificate files; the apiserver itself, if listed, is left to its place at the end.
fn preferred_upstreams(
    config: &config::Config,
    apiserver: &kubeplex::upstream::ServerUrl,
) -> anyhow::Result<Vec<kubeplex::upstream::PreferredServer>> {
    let ca_pem = match &config.settings.upstreams_ca_file {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("upstreamsCaFile: reading {}", path.display()))?,
        ),
        None => None,
    };
    let s = &config.settings;
    let client_cert = match (&s.upstreams_client_cert_file, &s.upstreams_client_key_file) {
        (Some(cert), Some(key)) => {
            Some(kubeplex::upstream::CertFiles { cert: cert.clone(), key: key.clone() })
        }
        _ => None,
    };
    Ok(config
        .upstreams
        .iter()
        .filter(|server| *server != apiserver)
        .map(|server| kubeplex::upstream::PreferredServer {
            server: server.clone(),
            ca_pem: ca_pem.clone(),
            client_cert: client_cert.clone(),
        })
        .collect())
}

async fn run_serve(config: config::Config, args: &ServeArgs) -> anyhow::Result<()> {
    let s = &config.settings;
    if let Some(file) = &args.config {
        tracing::debug!(config = %file.display(), "settings read");
    }
    let cfg = UpstreamConfig::resolve(s.kubeconfig.as_deref(), s.context.as_deref())
        .context("finding the upstream apiserver")?;
    let cfg = cfg.clone().with_preferred(preferred_upstreams(&config, &cfg.server)?);
    let upstream = Upstream::new(cfg).context("building the upstream client")?;
    let base = upstream.base_url().to_string();
    let upstreams = upstream.urls().join(",");
    // The one registry: each layer defines its metrics and registers them into it.
    let registry = prometheus::Registry::new();
    allocator::start_trimmer(&registry).context("starting the allocator's trimmer")?;
    let proxy = Proxy::builder(upstream, config.caches)
        .listen(s.listen)
        .listen_when_ready(s.listen_when_ready)
        .admin(s.admin_listen)
        .mode(config.mode)
        .guardrails(config.guardrails)
        .registry(registry)
        .start()
        .await
        .map_err(|e| config::name_the_setting(e, config::setting_names))?;
    let admin = proxy.admin_addr.map(|a| a.to_string()).unwrap_or_default();
    tracing::info!(listen = %proxy.addr, admin, upstream = %base, upstreams, "kubeplex serving");
    let signal = terminated().await?;
    tracing::info!(signal, "stopping");
    proxy.shutdown(config.shutdown_grace_period).await;
    Ok(())
}
