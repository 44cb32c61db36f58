//! What the load tool's end-to-end tests share: the workspace's root and the kubeplex binary
//! the pool and node tiers run.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kubeplex binary of this build's profile (`target/debug/kubeplex` beside `deps/`, where
/// this test runs from), or `KUBEPLEX_BIN`. `CARGO_BIN_EXE_*` names only this package's
/// binaries. A workspace test build makes kubeplex's too (its own tests use it); when it is
/// missing or older than the sources, it is built here when nextest runs the test (cargo holds
/// no lock then). Only then: built alone, kubeplex's dependencies get other features than in
/// the workspace build, and the next workspace build would compile them again. Under
/// `cargo test` it must have been built before.
pub async fn kubeplex_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("KUBEPLEX_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/PROFILE/deps/..");
    let bin = profile_dir.join("kubeplex");
    let fresh = modified(&bin).is_some_and(|built| newest_source(&root()) <= Some(built));
    if !fresh && std::env::var_os("NEXTEST_RUN_ID").is_some() {
        let mut build = tokio::process::Command::new(option_env!("CARGO").unwrap_or("cargo"));
        build.current_dir(root()).args(["build", "--quiet", "-p", "kubeplex", "--bin", "kubeplex"]);
        if profile_dir.ends_with("release") {
            build.arg("--release");
        }
        let status = tokio::time::timeout(Duration::from_secs(1200), build.status())
            .await
            .expect("kubeplex built in time")
            .expect("cargo ran");
        assert!(status.success(), "building kubeplex failed");
    }
    assert!(
        bin.is_file(),
        "{}: build it first (cargo build -p kubeplex), or set KUBEPLEX_BIN",
        bin.display()
    );
    bin
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the workspace's sources (`Cargo.*`, and what is under
/// `src/` and `crates/`, build outputs aside), bounded in depth.
fn newest_source(root: &Path) -> Option<std::time::SystemTime> {
    let mut newest =
        ["Cargo.toml", "Cargo.lock"].iter().filter_map(|f| modified(&root.join(f))).max();
    let mut dirs = vec![(root.join("src"), 0), (root.join("crates"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if depth < 12 && path.file_name().is_some_and(|n| n != "target") {
                    dirs.push((path, depth + 1));
                }
            } else {
                newest = newest.max(modified(&path));
            }
        }
    }
    newest
}

/// Runs `cmd` (kubeplex-bench with `--json`) to its end within `within`; its one JSON report.
pub async fn json_report(mut cmd: tokio::process::Command, within: Duration) -> serde_json::Value {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(within, cmd.output())
        .await
        .expect("kubeplex-bench finished in time")
        .expect("kubeplex-bench ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubeplex-bench failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON report")
}
