//! The real kubectl, unchanged, against a kubeconfig (the fake apiserver's, or one for kubeplex):
//! the end-to-end tests (`kubectl`, `proxy_kubectl`, `proxy_kubectl_watch`, `proxy_tables`) run
//! it from here. Requires `kubectl` on PATH (CI checks for it).

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

/// Longest one kubectl run may take before the test fails, on a loaded machine.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// `kubectl --kubeconfig KUBECONFIG ARGS` with `HOME` at `home`, killed when dropped. kubectl
/// caches discovery under HOME: a home of its own per server keeps every run independent.
pub fn command(kubeconfig: &Path, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("kubectl");
    c.arg("--kubeconfig").arg(kubeconfig).args(args).env("HOME", home).kill_on_drop(true);
    c
}

/// Runs `kubectl ARGS` (see [`command`]) to its end; its stdout, failing the test when it fails
/// or takes longer than [`RUN_LIMIT`].
pub async fn run(kubeconfig: &Path, home: &Path, args: &[&str]) -> String {
    let out = output(kubeconfig, home, args).await;
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `kubectl ARGS` (see [`command`]) to its end, successful or not (a refusal is an
/// outcome to check); fails the test only when it takes longer than [`RUN_LIMIT`].
pub async fn output(kubeconfig: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    tokio::time::timeout(RUN_LIMIT, command(kubeconfig, home, args).output())
        .await
        .expect("kubectl timed out")
        .expect("kubectl runs")
}
