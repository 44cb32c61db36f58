//! The `kubeplex` command as an operator runs it: `config check` on the shipped examples, one
//! clear line and a non-zero exit for a configuration that cannot run (a bad key, a missing
//! kubeconfig, an unreadable certificate), and `serve --config` in front of the fake
//! apiserver, with flags over variables over the file, JSON logs, and exit 0 on SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::SimBuilder;
use kubeplex_test_support::get;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubeplex");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubeplex-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the command to its end (bounded); exit code, stdout, stderr.
async fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    // Only the variables a case sets: none from the machine running the tests.
    for (k, _) in std::env::vars() {
        if k.starts_with("KUBEPLEX_") || k == "RUST_LOG" || k == "KUBECONFIG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOME", temp_dir("home"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("kubeplex did not exit within 30s")
        .expect("run kubeplex");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// Asserts a failure: exit 1 and exactly one line on stderr, which starts with `want`.
fn assert_one_line_failure((code, _, stderr): &(i32, String, String), want: &str) {
    assert_eq!(*code, 1, "exit code; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got: {stderr}");
    assert!(lines[0].starts_with(&format!("kubeplex: {want}")), "{:?} vs {want:?}", lines[0]);
}

#[tokio::test]
async fn the_shipped_examples_pass_config_check() {
    let examples: Vec<PathBuf> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(examples.len() >= 3, "sidecar, node and demo examples: {examples:?}");
    for path in examples {
        let p = path.to_str().unwrap();
        let (code, out, err) = run(&["config", "check", p], &[]).await;
        assert_eq!((code, out.trim()), (0, format!("{p}: ok").as_str()), "{err}");
    }
}

#[tokio::test]
async fn a_config_error_is_one_line_naming_file_line_and_key() {
    let dir = temp_dir("bad");
    let file = dir.join("kubeplex.yaml");
    std::fs::write(&file, "mode: sidecar\ncaches: [pods]\nwatchQueu: 5\n").unwrap();
    let f = file.to_str().unwrap();
    let want = format!("{f}:3: unknown key \"watchQueu\" (did you mean \"watchQueue\"?)");
    assert_one_line_failure(&run(&["config", "check", f], &[]).await, &want);
    // `serve` refuses it the same way, before it looks for an apiserver.
    assert_one_line_failure(&run(&["serve", "--config", f], &[]).await, &want);
    assert_one_line_failure(&run(&["serve"], &[("KUBEPLEX_CONFIG", f)]).await, &want);

    std::fs::write(&file, "caches:\n  - pods\n  - apps/deployments\n").unwrap();
    let want = format!("{f}:1: caches: \"apps/deployments\": expected RESOURCE or");
    assert_one_line_failure(&run(&["serve", "--config", f], &[]).await, &want);
    // A bad value given as a variable is named as the key (not blamed on the file).
    let (code, _, err) =
        run(&["serve", "--config", f], &[("KUBEPLEX_WATCH_SLOW_AFTER", "soon")]).await;
    assert_eq!(code, 2, "clap's usage error: {err}");
    assert!(
        err.contains("--watch-slow-after") && err.contains("\"soon\" is not a duration"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_missing_kubeconfig_is_one_line() {
    let (code, out, err) = run(&["serve", "--kubeconfig", "/nonexistent/kubeconfig"], &[]).await;
    assert_one_line_failure(
        &(code, out, err),
        "finding the upstream apiserver: kubeconfig /nonexistent/kubeconfig",
    );
    // No kubeconfig anywhere (no in-cluster, $KUBECONFIG or ~/.kube/config) either.
    let (code, out, err) = run(&["serve"], &[]).await;
    assert_one_line_failure(&(code, out, err), "finding the upstream apiserver: ");
}

#[tokio::test]
async fn an_unreadable_certificate_is_one_line_and_nothing_binds() {
    let dir = temp_dir("cert");
    let kubeconfig = write_kubeconfig(&dir, "127.0.0.1:9");
    let listen = free_port();
    let file = dir.join("node.yaml");
    std::fs::write(
        &file,
        format!(
            "mode: node\nlisten: {listen}\nadminListen: 127.0.0.1:0\nkubeconfig: {}\n\
             tlsCertFile: {d}/missing.crt\ntlsPrivateKeyFile: {d}/missing.key\n",
            kubeconfig.display(),
            d = dir.display()
        ),
    )
    .unwrap();
    let result = run(&["serve", "--config", file.to_str().unwrap()], &[]).await;
    assert_one_line_failure(&result, "TLS listener: ");
    assert!(result.2.contains("missing.crt"), "names the file: {}", result.2);
    // A file that is there but is not a certificate.
    std::fs::write(dir.join("missing.crt"), "not PEM\n").unwrap();
    std::fs::write(dir.join("missing.key"), "not PEM either\n").unwrap();
    let result = run(&["serve", "--config", file.to_str().unwrap()], &[]).await;
    assert_one_line_failure(&result, "TLS listener: ");
    // The port it would have served is free: the certificate is read before anything binds.
    assert!(std::net::TcpListener::bind(listen).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn write_kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("upstream.kubeconfig");
    std::fs::write(&path, kubeplex_sim::kubeconfig_for(&format!("http://{server}"), "upstream"))
        .unwrap();
    path
}

#[tokio::test]
async fn serve_reads_its_file_under_variables_under_flags_and_exits_0_on_sigterm() {
    let shape = ClusterShape { nodes: 2, namespaces: 2, pods: 10, configmaps: 4, services: 1 };
    let sim = SimBuilder::new().seed(seed::cluster(shape)).start().await.unwrap();
    let dir = temp_dir("serve");
    let kubeconfig = write_kubeconfig(&dir, &sim.addr().to_string());
    let file = dir.join("kubeplex.yaml");
    // Each address on its own loopback IP, so that the log shows which source won.
    std::fs::write(
        &file,
        format!(
            "kubeconfig: {}\nlisten: 127.0.0.2:0\nadminListen: 127.0.0.4:0\n\
             caches: [configmaps]\nlogFormat: json\nshutdownGracePeriod: 5s\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("KUBEPLEX_LISTEN", "127.0.0.3:0")
        .env("KUBEPLEX_ADMIN_LISTEN", "127.0.0.5:0")
        .env("KUBEPLEX_ACCESS_LOG", "true")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut logged = Vec::new();
    let serving = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
            logged.push(line);
            if v["message"] == "kubeplex serving" {
                return v;
            }
        }
        panic!("kubeplex exited before serving: {logged:?}");
    })
    .await
    .expect("kubeplex serving within 30s");
    let listen = serving["listen"].as_str().unwrap().to_string();
    let admin = serving["admin"].as_str().unwrap().to_string();
    assert!(
        listen.starts_with("127.0.0.1:"),
        "the flag beats the variable and the file: {serving}"
    );
    assert!(admin.starts_with("127.0.0.5:"), "the variable beats the file: {serving}");
    // The file's cache list is what runs: configmaps are cached (ready once synced), pods not.
    let mut ready = false;
    for _ in 0..200 {
        if get(&admin, "/readyz").await.status == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "ready");
    let debug: serde_json::Value =
        serde_json::from_slice(&get(&admin, "/debug/caches").await.body).unwrap();
    let cached: Vec<String> = debug["caches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["resource"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(cached, ["configmaps/v1"], "{debug}");
    let through = get(&listen, "/api/v1/namespaces/team-0/configmaps?resourceVersion=0").await;
    let direct =
        get(&sim.addr().to_string(), "/api/v1/namespaces/team-0/configmaps?resourceVersion=0")
            .await;
    assert_eq!((through.status, &through.body), (200, &direct.body));

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit within the 5s grace period and some slack")
        .unwrap();
    assert_eq!(status.code(), Some(0), "exit 0 after SIGTERM");
    while let Ok(Some(line)) = lines.next_line().await {
        assert!(serde_json::from_str::<serde_json::Value>(&line).is_ok(), "not JSON: {line}");
        logged.push(line);
    }
    assert!(logged.iter().any(|l| l.contains("SIGTERM")), "{logged:?}");
    // The access log: one line per request, the cached list among them.
    let access: Vec<serde_json::Value> = logged
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "kubeplex::access")
        .collect();
    let list = access
        .iter()
        .find(|v| v["uri"] == "/api/v1/namespaces/team-0/configmaps?resourceVersion=0")
        .unwrap_or_else(|| panic!("no access line for the list: {access:?}"));
    assert_eq!(
        (&list["method"], &list["verb"], &list["status"], &list["source"], &list["resource"]),
        (&"GET".into(), &"LIST".into(), &200.into(), &"cache".into(), &"configmaps".into()),
        "{list}"
    );
    assert!(list["seconds"].as_f64().is_some_and(|s| s >= 0.0), "{list}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_cache_the_upstream_does_not_serve_stops_start_up() {
    let sim = SimBuilder::new().start().await.unwrap();
    let dir = temp_dir("podz");
    let kubeconfig = write_kubeconfig(&dir, &sim.addr().to_string());
    let kc = kubeconfig.to_str().unwrap();
    let base =
        ["serve", "--kubeconfig", kc, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];
    for (cache, want) in [
        ("podz", "cache \"podz\": the upstream serves no resource \"podz\" in v1"),
        ("apps/v2/deployments", "cache \"apps/v2/deployments\": the upstream serves no resource \"deployments\" in apps/v2"),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(["--cache", "pods", "--cache", cache]).collect();
        assert_one_line_failure(&run(&args, &[]).await, want);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn state_dir_prepares_a_private_directory_for_kubeplexs_user() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = temp_dir("state-dir");
    let states = dir.join("var/lib/kubeplex");
    // What the process itself runs as: chown to oneself works for any user; as root (an init
    // container) the nonroot image user is tried too.
    let me = std::fs::metadata(&dir).unwrap();
    let mut owners = vec![(me.uid(), me.gid())];
    if me.uid() == 0 {
        owners.push((65532, 65532));
    }
    for (uid, gid) in owners {
        std::fs::create_dir_all(&states).unwrap();
        std::fs::write(states.join("core_v1_pods_json.state"), b"x").unwrap();
        std::fs::set_permissions(&states, std::fs::Permissions::from_mode(0o755)).unwrap();
        let owner = format!("{uid}:{gid}");
        let (code, stdout, stderr) =
            run(&["state-dir", states.to_str().unwrap(), "--owner", &owner], &[]).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(&format!("owner {owner}, 1 files")), "{stdout}");
        let m = std::fs::metadata(&states).unwrap();
        assert_eq!((m.mode() & 0o777, m.uid(), m.gid()), (0o700, uid, gid));
        let f = std::fs::metadata(states.join("core_v1_pods_json.state")).unwrap();
        assert_eq!((f.uid(), f.gid()), (uid, gid));
    }
    // Created when missing.
    let fresh = dir.join("fresh");
    let owner = format!("{}:{}", me.uid(), me.gid());
    assert_eq!(run(&["state-dir", fresh.to_str().unwrap(), "--owner", &owner], &[]).await.0, 0);
    assert!(fresh.is_dir());
    // A link is refused; so is an owner that is not UID:GID.
    let link = dir.join("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&fresh, &link).unwrap();
    let out = run(&["state-dir", link.to_str().unwrap(), "--owner", &owner], &[]).await;
    assert_one_line_failure(&out, "state directory");
    assert!(out.2.contains("symbolic link"), "{}", out.2);
    let out = run(&["state-dir", fresh.to_str().unwrap(), "--owner", "nonroot"], &[]).await;
    assert_one_line_failure(&out, "--owner \"nonroot\": expected UID:GID");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The node-local DaemonSet's configuration (`deploy/base/node`) and the node example start no
/// cache before an agent reads (DESIGN.md §7): no `caches`, the same declared `cacheScopes`,
/// which `kubeplex-bench`'s node scenario runs against real agent profiles and finds every
/// cache with readers (crates/kubeplex-bench/tests/bench_nodes.rs).
#[tokio::test]
async fn the_node_configurations_start_no_cache_before_an_agent_reads() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut printed = Vec::new();
    for file in ["config/node.yaml", "deploy/base/node/kubeplex.yaml"] {
        let path = format!("{root}/{file}");
        let (code, out, err) =
            run(&["config", "print", "--config", &path, "--node-name", "n1"], &[]).await;
        assert_eq!(code, 0, "{file}: {err}");
        assert!(out.lines().any(|l| l == "caches: []"), "{file} starts caches:\n{out}");
        let scopes: Vec<String> = out
            .lines()
            .skip_while(|l| *l != "cacheScopes:")
            .skip(1)
            .take_while(|l| l.starts_with('-') || l.starts_with(' '))
            .map(str::to_string)
            .collect();
        assert!(scopes.len() >= 4, "{file}: {scopes:?}");
        printed.push(scopes);
    }
    assert_eq!(printed[0], printed[1], "the DaemonSet declares the node example's scopes");
}
