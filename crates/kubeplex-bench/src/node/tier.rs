//! The node tier: one kubeplex process per node, launched from the kubeplex binary in node
//! mode (TLS, client certificates, TokenReviews and SubjectAccessReviews) with the shipped node
//! configuration, each on its own loopback ports. The processes are killed when the tier is
//! dropped (an error, ctrl-c), and stopped with SIGTERM at the end of a run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use http::Method;
use serde_json::Value;
use tokio::process::{Child, Command};

use super::cluster::node_name;
use super::pki::Pki;
use crate::target::Target;

/// How to launch the tier.
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// The kubeplex binary (`target/release/kubeplex`).
    pub bin: PathBuf,
    /// The node configuration file (`config/node.yaml`): its caches, TTLs and the rest; the
    /// flags below override only what differs per node.
    pub config: PathBuf,
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
    /// `http://` URL), with kubeplex's ServiceAccount token, and waits until every one is ready.
    pub async fn start(
        config: &TierConfig,
        nodes: usize,
        dir: &Path,
        pki: &Pki,
        upstream: &str,
        token: &str,
    ) -> anyhow::Result<Tier> {
        if !config.bin.is_file() {
            bail!(
                "{}: no kubeplex binary (build it: cargo build --release -p kubeplex, or pass --kubeplex-bin)",
                config.bin.display()
            );
        }
        std::fs::write(dir.join("client-ca.crt"), &pki.ca_pem)?;
        pki.server()?.write(dir, "serving")?;
        let kubeconfig = super::pki::write_kubeconfig(
            dir,
            "kubeplex-upstream",
            upstream,
            None,
            super::pki::token_user(token),
        )?;
        let mut tier = Tier { nodes: Vec::with_capacity(nodes) };
        for i in 0..nodes {
            let (addr, admin) = (free_port()?, free_port()?);
            let node = node_name(i);
            let log = dir.join(format!("kubeplex-{node}.log"));
            let stderr = std::fs::File::create(&log)?;
            let child = Command::new(&config.bin)
                .arg("serve")
                .arg("--config")
                .arg(&config.config)
                .arg("--node-name")
                .arg(&node)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--admin-listen")
                .arg(admin.to_string())
                .arg("--tls-cert-file")
                .arg(dir.join("serving.crt"))
                .arg("--tls-private-key-file")
                .arg(dir.join("serving.key"))
                .arg("--client-ca-file")
                .arg(dir.join("client-ca.crt"))
                .arg("--shutdown-grace-period")
                .arg("2s")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting {}", config.bin.display()))?;
            tier.nodes.push(Kubeplex { node, addr, admin, child, log });
        }
        for k in &mut tier.nodes {
            k.wait_ready(Duration::from_secs(60)).await?;
        }
        Ok(tier)
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

impl Kubeplex {
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

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        format!(
            "{} (log {})",
            lines.into_iter().rev().collect::<Vec<_>>().join(" | "),
            self.log.display()
        )
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
