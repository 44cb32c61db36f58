//! `kubectl get -w`, unchanged, through kubeplex: the user sees the existing pods, then each
//! change as it happens, with the apiserver's event types and resourceVersions. Requires
//! `kubectl` on PATH.

use kubeplex_test_support as support;
use support::shapes;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use support::kubectl;
use support::stack::Stack;
use support::watchers::*;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdout};
use tokio::time::Instant;

/// Everything kubectl may take, on a loaded machine, to show one change.
const SHOW: Duration = Duration::from_secs(30);

/// A running `kubectl` whose stdout is read as it comes; killed when dropped.
struct Kubectl {
    child: Child,
    stdout: ChildStdout,
    buf: Vec<u8>,
    stderr: PathBuf,
    args: Vec<String>,
}

impl Kubectl {
    fn spawn(stack: &Stack, home: &str, args: &[&str]) -> Kubectl {
        let home = stack.dir.join(home);
        std::fs::create_dir_all(&home).expect("home");
        let stderr = home.join("stderr");
        let mut child = kubectl::command(&stack.write_client_kubeconfig(), &home, args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("kubectl runs");
        let stdout = child.stdout.take().expect("stdout");
        let args = args.iter().map(|a| a.to_string()).collect();
        Kubectl { child, stdout, buf: Vec::new(), stderr, args }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "kubectl {:?}: {what}\nstdout so far: {}\nstderr: {}",
            self.args,
            String::from_utf8_lossy(&self.buf),
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }

    /// Reads more output, failing the test at `until`.
    async fn fill(&mut self, until: Instant) {
        let mut chunk = [0u8; 8192];
        match tokio::time::timeout_at(until, self.stdout.read(&mut chunk)).await {
            Ok(Ok(0)) => self.fail("exited"),
            Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => self.fail(&format!("read failed: {e}")),
            Err(_) => self.fail("nothing shown in time"),
        }
    }

    async fn line(&mut self, until: Instant) -> String {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return String::from_utf8_lossy(&line).trim_end().to_string();
            }
            self.fill(until).await;
        }
    }

    /// The next JSON document of `-o json` output (pretty-printed, one after another).
    async fn json(&mut self, until: Instant) -> Value {
        loop {
            let mut docs = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
            match docs.next() {
                Some(Ok(v)) => {
                    let used = docs.byte_offset();
                    self.buf.drain(..used);
                    return v;
                }
                Some(Err(e)) if !e.is_eof() => self.fail(&format!("output is not JSON: {e}")),
                _ => self.fill(until).await,
            }
        }
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn pending_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-0", "labels": {"app": "kw"}},
        "spec": {"nodeName": "node-0", "containers": [{"name": "app", "image": "registry.example/app:1"}]},
        "status": {"phase": "Pending"}})
}

/// The pod becomes ready, as the kubelet reports it.
fn run(v: &mut Value) {
    v["status"] = json!({"phase": "Running", "containerStatuses": [{"name": "app", "ready": true,
        "restartCount": 0, "image": "registry.example/app:1", "imageID": "", "started": true,
        "state": {"running": {"startedAt": "2026-11-22T10:00:00Z"}}}]});
}

fn columns(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test]
async fn kubectl_get_watch_shows_each_change_of_a_pod() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let existing = apiserver_state(&stack, "/api/v1/namespaces/team-0/pods").await;
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    let mut k = Kubectl::spawn(&stack, "home-table", &["get", "pods", "-n", "team-0", "-w"]);
    let until = Instant::now() + SHOW;
    let header = k.line(until).await;
    assert_eq!(columns(&header), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let mut listed = Vec::new();
    for _ in 0..existing.len() {
        listed
            .push(columns(&k.line(until).await).first().map(|s| s.to_string()).unwrap_or_default());
    }
    let want: Vec<String> =
        existing.keys().map(|k| k.trim_start_matches("team-0/").into()).collect();
    assert_eq!(listed, want, "the existing pods, in the apiserver's order");

    // Each change shows as a row: created (not ready), running and ready, then deleted.
    stack.sim.create(pending_pod("kw-web")).expect("create");
    let row = k.line(Instant::now() + SHOW).await;
    assert_eq!(columns(&row).get(..4), Some(&["kw-web", "0/1", "Pending", "0"][..]), "{row}");
    stack.sim.modify("", "pods", "team-0", "kw-web", run).expect("run");
    let row = k.line(Instant::now() + SHOW).await;
    assert_eq!(columns(&row).get(..4), Some(&["kw-web", "1/1", "Running", "0"][..]), "{row}");
    stack.sim.delete("", "pods", "team-0", "kw-web").expect("delete");
    let row = k.line(Instant::now() + SHOW).await;
    assert_eq!(columns(&row).first(), Some(&"kw-web"), "the deletion shows: {row}");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), k.line(Instant::now() + SHOW))
            .await
            .is_err(),
        "nothing else is shown"
    );
    // kubectl's table output asks for `as=Table`: kubeplex prints pods' Tables itself, so the
    // watch (from the list's resourceVersion) was answered from the cache.
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    assert_eq!(cache_watches, 1, "kubectl's Table watch was answered from the cache");
}

#[tokio::test]
async fn kubectl_watch_events_as_json_carry_types_and_resource_versions() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let existing = apiserver_state(&stack, "/api/v1/namespaces/team-0/pods").await;
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    let args = ["get", "pods", "-n", "team-0", "-w", "--output-watch-events", "-o", "json"];
    let mut k = Kubectl::spawn(&stack, "home-json", &args);
    let until = Instant::now() + SHOW;
    let mut initial = std::collections::BTreeMap::new();
    for _ in 0..existing.len() {
        let e = k.json(until).await;
        assert_eq!(e["type"], "ADDED", "the existing pods come first, as ADDED: {e}");
        assert_eq!(e["object"]["kind"], "Pod");
        let rv = e.pointer("/object/metadata/resourceVersion").and_then(Value::as_str);
        initial.insert(key_of(&e), rv.unwrap_or("").to_string());
    }
    assert_eq!(initial, existing, "the existing pods at the apiserver's resourceVersions");

    let rv = |v: &Value| v["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
    let mut want = Vec::new();
    let created = stack.sim.create(pending_pod("kw-json")).expect("create");
    want.push(("ADDED", "kw-json".to_string(), rv(&created)));
    let ran = stack.sim.modify("", "pods", "team-0", "kw-json", run).expect("run");
    want.push(("MODIFIED", "kw-json".into(), rv(&ran)));
    let other = existing.keys().next().expect("a pod").trim_start_matches("team-0/").to_string();
    let touched = stack
        .sim
        .modify("", "pods", "team-0", &other, |v| v["metadata"]["labels"]["touched"] = json!("yes"))
        .expect("label");
    want.push(("MODIFIED", other.clone(), rv(&touched)));
    stack.sim.delete("", "pods", "team-0", "kw-json").expect("delete");
    want.push(("DELETED", "kw-json".into(), stack.sim.current_rv().to_string()));
    // A pod in another namespace is not shown.
    stack.sim.create(small_pod("team-1", "elsewhere", "a", "node-0")).expect("create");

    let mut got = Vec::new();
    for _ in 0..want.len() {
        let e = k.json(Instant::now() + SHOW).await;
        let (t, name, rv) = support::ev(&e);
        if name == other {
            assert_eq!(e["object"]["metadata"]["labels"]["touched"], "yes", "{e}");
        }
        got.push((t, name, rv));
    }
    let want: Vec<_> = want.into_iter().map(|(t, n, r)| (t.to_string(), n, r)).collect();
    assert_eq!(got, want);
    let rvs: Vec<u64> = got.iter().filter_map(|e| e.2.parse().ok()).collect();
    assert!(rvs.windows(2).all(|p| p[0] < p[1]), "resourceVersions increase: {rvs:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), k.json(Instant::now() + SHOW))
            .await
            .is_err(),
        "nothing else is shown"
    );
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    assert_eq!(cache_watches, 1, "kubectl's watch was served from the cache");
}
