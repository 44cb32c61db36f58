//! The node tier: one kubeplex process per node, launched from the kubeplex binary in node
//! mode (TLS, client certificates, TokenReviews and SubjectAccessReviews) with the shipped node
//! configuration, each on its own loopback ports; and the pool tier, replicas of kubeplex with
//! the shipped pool configuration (deploy/base/pool), which node tiers may have as their first
//! upstreams. The processes are killed when a tier is dropped (an error, ctrl-c), and stopped
//! with SIGTERM at the end of a run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use http::Method;
use kubeplex_net::scratch::Pki;
use serde_json::Value;
use tokio::process::{Child, Command};

use super::cluster::node_name;
use crate::target::Target;

/// How to launch the tier.
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// The kubeplex binary (`target/release/kubeplex`).
    pub bin: PathBuf,
    /// The node configuration file (`config/node.yaml`): its caches, TTLs and the rest; the
    /// flags below override only what differs per node.
    pub config: PathBuf,
    /// The pool tier's configuration (`deploy/base/pool/kubeplex.yaml`).
    pub pool_config: PathBuf,
}

/// A node tier's upstreams before the apiserver: pool replicas, in the order node `i` tries
/// them (rotated by `i`, as a Service spreads connections), and the CA of their serving
/// certificate.
pub struct PoolUpstreams {
    pub replicas: Vec<SocketAddr>,
    pub ca: PathBuf,
}

/// One node's kubeplex.
pub struct Kubeplex {
    pub node: String,
    /// The TLS listener the node's agents use.
    pub addr: SocketAddr,
    /// The admin listener (`/metrics`, `/readyz`, `/debug/caches`), plain HTTP.
    pub admin: SocketAddr,
    child: Child,
    log: PathBuf,
    /// How it was started, to start it again ([`Tier::restart`]).
    bin: PathBuf,
    args: Vec<std::ffi::OsString>,
}

/// The running tier, node `i` at index `i`.
pub struct Tier {
    pub nodes: Vec<Kubeplex>,
}

/// A loopback port nobody listens on now (the kubeplex it is given binds it a moment later).
fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

impl Tier {
    /// Starts `nodes` kubeplex processes in front of the fake apiserver at `upstream` (an
    /// `http://` URL) — and behind `pool` first, if given — each bound to its node as the
    /// DaemonSet's are: with its own pod's ServiceAccount token (`token(i)`), acting as its
    /// node alone (`nodeImpersonation: associated-node`); and waits until every one is ready.
    pub async fn start(
        config: &TierConfig,
        nodes: usize,
        dir: &Path,
        pki: &Pki,
        upstream: &str,
        token: impl Fn(usize) -> String,
        pool: Option<&PoolUpstreams>,
    ) -> anyhow::Result<Tier> {
        prepare_dir(config, dir, pki)?;
        let mut tier = Tier { nodes: Vec::with_capacity(nodes) };
        for i in 0..nodes {
            let node = node_name(i);
            let user = super::pki::token_user(&token(i));
            let name = format!("kubeplex-upstream-{node}");
            let kubeconfig = super::pki::write_kubeconfig(dir, &name, upstream, None, user)?;
            let mut extra: Vec<std::ffi::OsString> = vec![
                "--node-name".into(),
                node.clone().into(),
                "--node-impersonation".into(),
                "associated-node".into(),
            ];
            if let Some(p) = pool {
                let n = p.replicas.len().max(1);
                let order: Vec<String> =
                    (0..n).map(|k| format!("https://{}", p.replicas[(i + k) % n])).collect();
                // Its token for the pool as for the apiserver: no client certificate.
                extra.extend([
                    "--upstream".into(),
                    order.join(",").into(),
                    "--upstreams-ca-file".into(),
                    p.ca.clone().into_os_string(),
                ]);
            }
            tier.nodes.push(Kubeplex::spawn(
                &config.bin,
                &config.config,
                node,
                dir,
                &kubeconfig,
                extra,
            )?);
        }
        tier.wait_ready().await?;
        Ok(tier)
    }

    /// Starts `replicas` pool kubeplex processes (`pool-0` ..) in front of the fake apiserver,
    /// with the pool's ServiceAccount token, and waits until every one is ready (its caches
    /// synced).
    pub async fn start_pool(
        config: &TierConfig,
        replicas: usize,
        dir: &Path,
        pki: &Pki,
        upstream: &str,
        token: &str,
    ) -> anyhow::Result<Tier> {
        let kubeconfig = prepare(config, dir, pki, upstream, token, "kubeplex-pool-upstream")?;
        Tier::start_pool_with(config, replicas, dir, &kubeconfig).await
    }

    /// [`Tier::start_pool`] toward the apiserver of `kubeconfig` (a real one's, with the pool's
    /// identity), the serving certificate and client CA already in `dir` ([`prepare_dir`]).
    pub async fn start_pool_with(
        config: &TierConfig,
        replicas: usize,
        dir: &Path,
        kubeconfig: &Path,
    ) -> anyhow::Result<Tier> {
        let mut tier = Tier { nodes: Vec::with_capacity(replicas) };
        for i in 0..replicas {
            let name = format!("pool-{i}");
            tier.nodes.push(Kubeplex::spawn(
                &config.bin,
                &config.pool_config,
                name,
                dir,
                kubeconfig,
                Vec::new(),
            )?);
        }
        tier.wait_ready().await?;
        Ok(tier)
    }

    /// Waits until every process is ready. One that lost its port to another process between
    /// [`free_port`] and its bind is started again on new ports (a few times at most).
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        for k in &mut self.nodes {
            let mut attempts = 0;
            loop {
                match k.wait_ready(Duration::from_secs(60)).await {
                    Err(e) if attempts < 3 && k.lost_its_port() => {
                        attempts += 1;
                        tracing::warn!(node = %k.node, error = %e, "port taken meanwhile; starting it again on new ports");
                        k.respawn_on_new_ports()?;
                    }
                    result => break result?,
                }
            }
        }
        Ok(())
    }

    /// Kills process `i` as a node failure would (SIGKILL: no draining).
    pub async fn kill(&mut self, i: usize) {
        if let Some(k) = self.nodes.get_mut(i) {
            let _ = k.child.kill().await;
        }
    }

    /// Starts process `i` again with the same settings and ports, and waits until it is ready.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let Some(k) = self.nodes.get_mut(i) else { bail!("no process {i}") };
        let stderr = std::fs::OpenOptions::new().append(true).create(true).open(&k.log)?;
        // Its ports were just released; binding them again may take a moment.
        for attempt in 0..20 {
            k.child = launch(&k.bin, &k.args, stderr.try_clone()?)?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            match k.child.try_wait()? {
                Some(_) if attempt < 19 => continue,
                _ => break,
            }
        }
        k.wait_ready(Duration::from_secs(60)).await
    }

    /// Stops every process with SIGTERM (kubeplex drains: its watches end cleanly), then kills
    /// what is still running after a few seconds.
    pub async fn stop(&mut self) {
        for k in &self.nodes {
            if let Some(pid) = k.child.id() {
                // By process id only: the processes this tier started.
                let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
            }
        }
        for k in &mut self.nodes {
            if tokio::time::timeout(Duration::from_secs(8), k.child.wait()).await.is_err() {
                let _ = k.child.kill().await;
            }
        }
    }
}

/// Starts `bin` with `args`, its stderr to `log`; killed when dropped.
fn launch(bin: &Path, args: &[std::ffi::OsString], log: std::fs::File) -> anyhow::Result<Child> {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Checks the binary, writes the serving certificate, the client CA and a kubeconfig for the
/// fake apiserver at `upstream` with `token`; returns the kubeconfig's path.
fn prepare(
    config: &TierConfig,
    dir: &Path,
    pki: &Pki,
    upstream: &str,
    token: &str,
    name: &str,
) -> anyhow::Result<PathBuf> {
    prepare_dir(config, dir, pki)?;
    super::pki::write_kubeconfig(dir, name, upstream, None, super::pki::token_user(token))
}

/// Checks the binary, and writes the serving certificate (signed by `pki`, for 127.0.0.1) and
/// the client CA (`pki`'s) into `dir`.
pub fn prepare_dir(config: &TierConfig, dir: &Path, pki: &Pki) -> anyhow::Result<()> {
    if !config.bin.is_file() {
        bail!(
            "{}: no kubeplex binary (build it: cargo build --release -p kubeplex, or pass --kubeplex-bin)",
            config.bin.display()
        );
    }
    std::fs::write(dir.join("client-ca.crt"), &pki.ca_pem)?;
    if !dir.join("serving.crt").is_file() {
        pki.server().try_write(dir, "serving")?;
    }
    Ok(())
}

impl Kubeplex {
    /// Launches kubeplex with `config` and `kubeconfig` on two free loopback ports, the
    /// serving certificate and client CA in `dir`, and `extra` flags; its log in `dir`.
    fn spawn(
        bin: &Path,
        config: &Path,
        name: String,
        dir: &Path,
        kubeconfig: &Path,
        extra: Vec<std::ffi::OsString>,
    ) -> anyhow::Result<Kubeplex> {
        let (addr, admin) = (free_port()?, free_port()?);
        let log = dir.join(format!("kubeplex-{name}.log"));
        let stderr = std::fs::File::create(&log)?;
        let mut args: Vec<std::ffi::OsString> =
            vec!["serve".into(), "--config".into(), config.into()];
        args.extend(extra);
        for (flag, value) in [
            ("--kubeconfig", kubeconfig.as_os_str().to_owned()),
            ("--listen", addr.to_string().into()),
            ("--admin-listen", admin.to_string().into()),
            ("--tls-cert-file", dir.join("serving.crt").into_os_string()),
            ("--tls-private-key-file", dir.join("serving.key").into_os_string()),
            ("--client-ca-file", dir.join("client-ca.crt").into_os_string()),
            ("--shutdown-grace-period", "2s".into()),
        ] {
            args.push(flag.into());
            args.push(value);
        }
        let child = launch(bin, &args, stderr)?;
        Ok(Kubeplex { node: name, addr, admin, child, log, bin: bin.to_path_buf(), args })
    }

    async fn wait_ready(&mut self, within: Duration) -> anyhow::Result<()> {
        let admin = Target::open(Some(&format!("http://{}", self.admin)), None, false)?;
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("kubeplex for {} exited ({status}): {}", self.node, self.log_tail());
            }
            if let Ok((s, _)) = admin.fetch(Method::GET, "/readyz", &[], None).await {
                if s.is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("kubeplex for {} not ready within {within:?}: {}", self.node, self.log_tail())
    }

    /// It exited because one of its listeners could not bind.
    fn lost_its_port(&self) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|l| l.contains("Address already in use"))
    }

    /// Starts it again with the same settings on two new free ports.
    fn respawn_on_new_ports(&mut self) -> anyhow::Result<()> {
        let (addr, admin) = (free_port()?, free_port()?);
        let mut args = self.args.clone();
        for (flag, value) in [("--listen", addr), ("--admin-listen", admin)] {
            if let Some(i) = args.iter().position(|a| a == flag) {
                args[i + 1] = value.to_string().into();
            }
        }
        let stderr = std::fs::File::create(&self.log)?;
        self.child = launch(&self.bin, &args, stderr)?;
        (self.addr, self.admin, self.args) = (addr, admin, args);
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        format!(
            "{} (log {})",
            lines.into_iter().rev().collect::<Vec<_>>().join(" | "),
            self.log.display()
        )
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The admin listener's `/metrics` text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        crate::target::scrape(&format!("http://{}/metrics", self.admin), false).await
    }

    /// The admin listener's `/debug/caches` document.
    pub async fn caches(&self) -> anyhow::Result<Value> {
        let admin = Target::open(Some(&format!("http://{}", self.admin)), None, false)?;
        let (status, body) = admin.fetch(Method::GET, "/debug/caches", &[], None).await?;
        if !status.is_success() {
            bail!("{}: /debug/caches: {status}", self.node);
        }
        Ok(serde_json::from_slice(&body)?)
    }
}
