//! Where the `informer-check` tool (real client-go informers, ../shared/tools/informer-check)
//! is, by the conventions of `tests/informer_check.rs`: `KUBEPLEX_INFORMER_CHECK`, else its
//! build cache, else `scripts/informer-check.sh` builds it (minutes, once). A tool that cannot
//! be found or built fails the test; `KUBEPLEX_SKIP_INFORMER_CHECK=1` skips it explicitly.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

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
