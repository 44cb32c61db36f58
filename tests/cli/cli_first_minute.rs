//! A newcomer's first minute, as issue 22 found it: `kubeplex demo` beside a local cluster that
//! already holds 127.0.0.1:6443 must come up (its fake apiserver is internal and takes a free
//! port); a listener that cannot bind names its address and the setting that chose it; logs
//! written to a pipe carry no terminal colour codes.

use std::process::Stdio;
use std::time::Duration;

use kubeplex_sim::SimBuilder;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubeplex");

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kubeplex-first-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A command with none of the machine's kubeplex variables, logging at info to a pipe.
fn kubeplex(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("KUBEPLEX_") || k == "RUST_LOG" || k == "KUBECONFIG" || k == "NO_COLOR" {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn has_terminal_codes(text: &str) -> bool {
    text.contains('\u{1b}')
}

#[tokio::test]
async fn the_demo_runs_beside_a_cluster_on_6443_and_logs_without_colours_to_a_pipe() {
    // Whatever holds 127.0.0.1:6443 — this test, or a local cluster on the machine — holds it
    // for the whole demo.
    let _held = std::net::TcpListener::bind("127.0.0.1:6443");
    assert!(std::net::TcpListener::bind("127.0.0.1:6443").is_err(), "6443 is held");
    let dir = temp_dir("demo");
    let kubeconfig = dir.join("demo.kubeconfig");
    let mut child = kubeplex(&[
        "demo",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--pods",
        "30",
        "--churn",
        "0",
        "--write-kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("the demo printed nothing within 60 s")
        .unwrap();
    let Some(first) = first else {
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).await.unwrap();
        panic!("the demo ended: {err}");
    };
    // "kubeplex demo: kubeplex on http://A in front of a fake kube-apiserver (http://B) ..."
    let urls: Vec<&str> =
        first.split("http://").skip(1).map(|rest| rest.split([' ', ')']).next().unwrap()).collect();
    assert_eq!(urls.len(), 2, "{first}");
    assert!(!urls[1].ends_with(":6443"), "the fake apiserver took a free port: {first}");
    // The demo serves through kubeplex, as the kubeconfig it wrote says.
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(written.contains(&format!("http://{}", urls[0])), "{written}");
    let resp = kubeplex_test_support::get(urls[0], "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(resp.status, 200);
    let list = resp.json();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(30));
    // Its logs so far went to a pipe: plain text.
    child.start_kill().unwrap();
    let mut err = String::new();
    let mut stderr = child.stderr.take().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), stderr.read_to_string(&mut err)).await;
    assert!(err.contains("INFO"), "the demo logs at info: {err}");
    assert!(!has_terminal_codes(&err), "no colour codes in a pipe: {err:?}");
    let _ = child.wait().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_listener_that_cannot_bind_names_its_address_and_setting() {
    let sim = SimBuilder::new().start().await.unwrap();
    let dir = temp_dir("bind");
    let upstream = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&upstream).unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().to_string();
    let cases = [
        (
            vec!["--listen", taken.as_str(), "--admin-listen", "127.0.0.1:0"],
            "listen: --listen, KUBEPLEX_LISTEN",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--admin-listen", taken.as_str()],
            "adminListen: --admin-listen, KUBEPLEX_ADMIN_LISTEN",
        ),
    ];
    for (flags, setting) in cases {
        let mut args = vec!["serve", "--kubeconfig", upstream.to_str().unwrap()];
        args.extend(flags);
        let out = tokio::time::timeout(Duration::from_secs(30), kubeplex(&args).output())
            .await
            .expect("kubeplex did not exit within 30 s")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            format!("kubeplex: cannot listen on {taken} ({setting}): Address already in use (os error 98)"),
            "{stderr}"
        );
        assert!(!has_terminal_codes(&stderr), "{stderr:?}");
    }
    // The demo's own fake apiserver, when told a taken address, names its flag.
    let out = kubeplex(&["demo", "--upstream-listen", &taken, "--listen", "127.0.0.1:0"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "fake apiserver on {taken} (--upstream-listen): Address already in use"
        )),
        "{stderr}"
    );
    drop(held);
    std::fs::remove_dir_all(&dir).unwrap();
}
