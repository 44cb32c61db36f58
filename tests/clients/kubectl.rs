//! kubectl, unchanged, against the fake apiserver: get (all forms), watch, create, apply,
//! delete. Requires `kubectl` on PATH (CI checks for it).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use kubeplex_test_support::kubectl;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

struct Env {
    sim: Sim,
    dir: PathBuf,
}

impl Env {
    async fn new(pods: usize) -> Env {
        let shape = ClusterShape { nodes: 3, namespaces: 2, pods, configmaps: 4, services: 2 };
        let sim = SimBuilder::new().seed(seed::cluster(shape)).start().await.expect("sim");
        let dir = std::env::temp_dir().join(format!(
            "kubeplex-kubectl-{}-{}",
            std::process::id(),
            sim.addr().port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        sim.write_kubeconfig(&dir.join("kubeconfig")).expect("kubeconfig");
        Env { sim, dir }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        kubectl::command(&self.dir.join("kubeconfig"), &self.dir, args)
    }

    async fn run(&self, args: &[&str]) -> String {
        kubectl::run(&self.dir.join("kubeconfig"), &self.dir, args).await
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, text).expect("write manifest");
        p.display().to_string()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn kubectl_get_in_every_form() {
    let env = Env::new(30).await;
    let table = env.run(&["get", "pods", "-n", "team-0"]).await;
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(table.lines().count(), 1 + 15, "{table}");
    assert!(table.lines().skip(1).all(|l| l.contains("1/1") && l.contains("Running")), "{table}");

    let all = env.run(&["get", "pods", "-A"]).await;
    assert!(all.starts_with("NAMESPACE"), "{all}");
    assert_eq!(all.lines().count(), 1 + 30);
    let chunked = env.run(&["get", "pods", "-A", "--chunk-size=2"]).await;
    let rows = |s: &str| {
        s.lines()
            .skip(1)
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(&chunked), rows(&all), "paging through 15 pages gives the same list");

    let json: Value =
        serde_json::from_str(&env.run(&["get", "pods", "-n", "team-1", "-o", "json"]).await)
            .expect("json");
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"].as_array().map(Vec::len), Some(15));
    assert_eq!(json["items"][0]["kind"], "Pod");

    let nodes = env.run(&["get", "nodes", "-o", "name"]).await;
    assert_eq!(nodes.lines().collect::<Vec<_>>(), ["node/node-0", "node/node-1", "node/node-2"]);
    let short = env.run(&["get", "cm", "-n", "team-0", "-o", "name"]).await;
    assert!(
        short.lines().any(|l| l == "configmap/config-0"),
        "short names resolve through discovery: {short}"
    );
}

#[tokio::test]
async fn kubectl_create_apply_delete_and_watch() {
    let env = Env::new(2).await;
    let manifest = |value: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: team-0\n  labels:\n    app: demo\ndata:\n  a: \"{value}\"\n")
    };
    let f = env.file("cm.yaml", &manifest("1"));
    assert_eq!(env.run(&["create", "-f", &f]).await.trim(), "configmap/demo created");
    assert_eq!(env.sim.get("", "configmaps", "team-0", "demo").expect("stored")["data"]["a"], "1");

    // Watch in the background while apply changes the object.
    let mut watch = env.cmd(&["get", "configmaps", "-n", "team-0", "-w", "--output-watch-events"]);
    let mut child = watch.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("kubectl -w");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    // The initial state arrives first (synthetic ADDED).
    while !seen.iter().any(|l: &String| l.split_whitespace().nth(1) == Some("demo")) {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch line")
            .expect("read");
        seen.push(line.expect("watch output"));
    }

    let f = env.file("cm.yaml", &manifest("2"));
    let applied = env.run(&["apply", "-f", &f]).await;
    assert!(applied.trim().ends_with("configmap/demo configured"), "{applied}");
    assert_eq!(env.sim.get("", "configmaps", "team-0", "demo").expect("stored")["data"]["a"], "2");
    let again = env.run(&["apply", "-f", &f]).await;
    assert_eq!(again.trim(), "configmap/demo unchanged");

    assert_eq!(
        env.run(&["delete", "configmap", "demo", "-n", "team-0"]).await.trim(),
        "configmap \"demo\" deleted"
    );
    assert!(env.sim.get("", "configmaps", "team-0", "demo").is_none());

    let mut events = Vec::new();
    while !events.iter().any(|l: &String| l.starts_with("DELETED")) {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch line")
            .expect("read");
        events.push(line.expect("watch output"));
    }
    let demo: Vec<&str> = events
        .iter()
        .filter(|l| l.split_whitespace().nth(1) == Some("demo"))
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    // Create-then-annotate by the first apply, the data change, then the delete.
    assert_eq!(demo.first(), Some(&"MODIFIED"), "{events:?}");
    assert_eq!(demo.last(), Some(&"DELETED"), "{events:?}");
    let _ = child.kill().await;
}

#[tokio::test]
async fn kubectl_manages_pods() {
    let env = Env::new(2).await;
    let manifest = |image: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: team-1\n  labels:\n    app: web\nspec:\n  containers:\n  - name: app\n    image: {image}\n    ports:\n    - containerPort: 80\n  - name: sidecar\n    image: proxy:1\n")
    };
    let f = env.file("pod.yaml", &manifest("nginx:1"));
    assert_eq!(env.run(&["create", "-f", &f]).await.trim(), "pod/web created");
    let f = env.file("pod.yaml", &manifest("nginx:2"));
    assert!(env.run(&["apply", "-f", &f]).await.trim().ends_with("pod/web configured"));
    let pod = env.sim.get("", "pods", "team-1", "web").expect("stored");
    let images: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert_eq!(images, ["nginx:2", "proxy:1"], "strategic merge by container name keeps the order");
    let listed = env.run(&["get", "pods", "-n", "team-1", "-l", "app=web", "-o", "name"]).await;
    assert_eq!(listed.trim(), "pod/web");
    assert_eq!(
        env.run(&["delete", "pod", "web", "-n", "team-1", "--wait=false"]).await.trim(),
        "pod \"web\" deleted"
    );
    assert!(env.sim.get("", "pods", "team-1", "web").is_none());
}
