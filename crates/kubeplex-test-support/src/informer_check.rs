//! Where the `informer-check` tool (real client-go informers, ../shared/tools/informer-check)
//! is, by the conventions of `tests/clients/informer_check.rs`: `KUBEPLEX_INFORMER_CHECK`, else its
//! build cache, else `scripts/informer-check.sh` builds it (minutes, once). A tool that cannot
//! be found or built fails the test; `KUBEPLEX_SKIP_INFORMER_CHECK=1` skips it explicitly.
//! [`spawn`] starts one run of it (`tests/clients/informer_check.rs`, `tests/node/node_clients.rs`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub const TOOL_ENV: &str = "KUBEPLEX_INFORMER_CHECK";
pub const SKIP_ENV: &str = "KUBEPLEX_SKIP_INFORMER_CHECK";

const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The tool's path; `None` only when skipped explicitly.
pub async fn tool() -> Option<PathBuf> {
    if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
        eprintln!("{SKIP_ENV}=1: skipping the client-go informer test");
        return None;
    }
    if let Some(p) = std::env::var_os(TOOL_ENV).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{TOOL_ENV}={} is not a file", p.display());
        return Some(p);
    }
    // Where build.sh puts it (its WORK default).
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(p) = cache.map(|c| c.join("kubeplex-informer-check/bin/informer-check")) {
        if p.is_file() {
            return Some(p);
        }
    }
    Some(build().await)
}

async fn build() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/informer-check.sh");
    eprintln!("informer-check is not built yet; building it with {} (minutes)", script.display());
    let help = format!(
        "set {TOOL_ENV} to a built informer-check, or {SKIP_ENV}=1 to skip this test explicitly"
    );
    let out = tokio::time::timeout(
        BUILD_TIMEOUT,
        Command::new("bash").arg(&script).stdin(Stdio::null()).kill_on_drop(true).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("building informer-check timed out; {help}"))
    .unwrap_or_else(|e| panic!("cannot run {}: {e}; {help}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(
        out.status.success() && path.is_file(),
        "building informer-check failed ({}); {help}\n{}",
        out.status,
        tail(&String::from_utf8_lossy(&out.stderr), 40)
    );
    path
}

/// The last `lines` lines of a tool's output, for failure messages.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What one informer-check run is asked: its informers read `resource` in `scope`
/// (`--namespace NS`, `--field-selector S`, ...) through `kubeconfig`, record for `record` once
/// synced, and compare their caches with `compare_server`'s list.
pub struct Spec<'a> {
    pub kubeconfig: &'a Path,
    pub resource: &'a str,
    pub scope: &'a [&'a str],
    pub informers: usize,
    pub record: Duration,
    pub sync_timeout: Duration,
    pub watchlist: bool,
    pub protobuf: bool,
    pub compare_server: &'a str,
    pub compare_kubeconfig: &'a Path,
}

/// One informer-check process, its stderr watched for the moment its informers synced (its
/// recording starts then).
pub struct Run {
    pub child: Child,
    pub synced: oneshot::Receiver<Instant>,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// How a run ended: its exit status (or why it has none), its stdout (the JSON report), stderr.
pub struct Finished {
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

/// Starts `tool` as `spec` says, killed when dropped.
pub fn spawn(tool: &Path, spec: &Spec<'_>) -> Run {
    let mut cmd = Command::new(tool);
    cmd.arg("--kubeconfig")
        .arg(spec.kubeconfig)
        .args(["--resource", spec.resource])
        .args(spec.scope)
        .args(["--informers", &spec.informers.to_string()])
        .arg(format!("--duration={}s", spec.record.as_secs()))
        .arg("--settle=15s")
        .arg(format!("--sync-timeout={}s", spec.sync_timeout.as_secs()))
        // Explicit either way: KUBE_FEATURE_WatchListClient in the environment must not decide.
        .arg(format!("--watchlist={}", spec.watchlist))
        .arg(format!("--protobuf={}", spec.protobuf))
        .args(["--compare-server", spec.compare_server, "--compare-kubeconfig"])
        .arg(spec.compare_kubeconfig)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Other client-go feature gates stay at their 0.36 defaults.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("KUBE_FEATURE_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", tool.display()));
    let mut out = child.stdout.take().expect("stdout piped");
    let stdout = tokio::spawn(async move {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s).await;
        s
    });
    let err = child.stderr.take().expect("stderr piped");
    let (tx, synced) = oneshot::channel();
    let stderr = tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut lines = BufReader::new(err).lines();
        let mut all = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            // "all 5 informers synced in 0.123s; recording events for 12s"
            if line.starts_with("all ") && line.contains("informers synced in") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(Instant::now());
                }
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    Run { child, synced, stdout, stderr }
}

impl Run {
    /// Waits for the run's end until `deadline`, then kills it.
    pub async fn finish(mut self, deadline: Instant) -> Finished {
        let status = match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(s)) => s.to_string(),
            Ok(Err(e)) => format!("wait failed: {e}"),
            Err(_) => {
                let _ = self.child.kill().await;
                "killed: still running at the test's deadline".to_string()
            }
        };
        // Both pipes close when the process ends; bounded anyway.
        let read = |h: JoinHandle<String>| async move {
            tokio::time::timeout(Duration::from_secs(10), h).await.ok().and_then(Result::ok)
        };
        let stdout = read(self.stdout).await.unwrap_or_default();
        let stderr = read(self.stderr).await.unwrap_or_default();
        Finished { status, stdout, stderr }
    }
}
