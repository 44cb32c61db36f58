//! What `deploy/` promises about kubeplex, checked against kubeplex itself (issue 13):
//!
//! - every metric the dashboard and the alerts (deploy/components/monitoring) query is in a real
//!   `/metrics` scrape of kubeplex in node mode after ordinary traffic, and every `kubeplex_*`
//!   family it exports is documented in docs/operations.md;
//! - the configuration each kustomize overlay ships in its ConfigMap passes `kubeplex config
//!   check` (`kubectl kustomize` renders it, as `kubectl apply -k` would).
//!
//! .ci/check-deploy.py checks the rendered objects against the 1.36 schemas and the PromQL.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubeplex::live::disk::DiskConfig;
use kubeplex_test_support as support;
use serde_json::Value;
use support::node::{Node, NodeOptions, ADMIN_TOKEN, READER_TOKEN};
use support::tls::{Credentials, TlsClient};
use support::watchers::small_pod;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The families kubeplex exports: its own, and the process's (`process_*`, as every
/// Prometheus client names them).
const PREFIXES: [&str; 2] = ["kubeplex_", "process_"];

/// Families the kubeplex binary registers itself (`src/bin/kubeplex/allocator.rs`: the heap in
/// use and kept free), which the dashboard's memory panel shows beside the RSS.
const BINARY_ONLY: [&str; 1] = ["kubeplex_allocator_heap_bytes"];

/// The `kubeplex_*` and `process_*` metric families named in `text` (`_bucket`/`_sum`/`_count`
/// of a histogram name the histogram).
fn families_named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = PREFIXES.iter().filter_map(|p| rest.find(p)).min() {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let family =
            ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        out.insert(family.to_string());
        rest = &tail[end..];
    }
    out
}

/// The PromQL of the dashboard's panels and of the alerts.
fn queries() -> Vec<String> {
    let dash: Value =
        serde_json::from_str(&read("deploy/components/monitoring/dashboard.json")).unwrap();
    let mut out: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    let rule: Value =
        serde_saphyr::from_str(&read("deploy/components/monitoring/prometheusrule.yaml")).unwrap();
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            out.push(r["expr"].as_str().unwrap().to_string());
        }
    }
    out
}

/// The families in a text exposition (those with samples: the registry leaves out the rest).
fn scraped(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| PREFIXES.iter().any(|p| n.starts_with(p)))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_use_is_scraped_and_documented() {
    let queries = queries();
    assert!(queries.len() >= 30, "{} queries", queries.len());
    let used: BTreeSet<String> = queries.iter().flat_map(|q| families_named(q)).collect();
    assert!(used.len() >= 25, "{used:?}");

    // With a state directory, as the shipped node and pool tiers have (components/disk-state).
    let states = kubeplex_net::scratch::TempDir::new("deploy-metrics-states");
    let disk = DiskConfig { dir: Some(states.path().to_path_buf()), ..DiskConfig::default() };
    let node = Node::start_with(NodeOptions { disk, ..NodeOptions::default() }).await;
    let admin = TlsClient::new(&node.pki.ca_pem, &Credentials::token(ADMIN_TOKEN), false);
    let reader = TlsClient::new(&node.pki.ca_pem, &Credentials::token(READER_TOKEN), true);
    let addr = node.addr();
    // Cached reads (and the reviews that authorize them), a consistent list (its freshness
    // proof), a cold cache (its first sync), passthrough, a refusal. Whether the namespaces
    // read finds its new cache still cold is a race with the cache's first list; the services
    // read always counts a sync wait: a page (resourceVersion unset: at 0 the apiserver would
    // ignore `limit`) is not the whole list that could feed the cold cache
    // (`live::reflector::fed`), so it waits for the cache's own load, which fails
    // (kubeplex's identity may not list services), and the read passes through (`load_failed`).
    for path in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0&limit=5",
        "/api/v1/namespaces/team-0/pods",
        "/api/v1/namespaces?resourceVersion=0",
        "/api/v1/services?limit=5",
        "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dnone",
    ] {
        assert_eq!(admin.get(&addr, path).await.status, 200, "{path}");
    }
    assert_eq!(
        reader.get(&addr, "/api/v1/namespaces/team-0/pods?resourceVersion=0").await.status,
        200
    );
    assert_eq!(reader.get(&addr, "/api/v1/nodes?resourceVersion=0").await.status, 403);
    // A watch that sees an event.
    let watching = {
        let admin = admin.clone();
        let addr = addr.clone();
        tokio::spawn(async move {
            admin
                .get(
                    &addr,
                    "/api/v1/namespaces/team-0/pods?watch=1&resourceVersion=0&timeoutSeconds=2",
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    node.sim.create(small_pod("team-0", "scraped", "Running", "node-0")).unwrap();
    let watched = tokio::time::timeout(Duration::from_secs(10), watching).await.unwrap().unwrap();
    assert_eq!(watched.status, 200);
    assert!(String::from_utf8_lossy(&watched.body).contains("\"scraped\""));

    let admin_addr = node.proxy.admin_addr.unwrap().to_string();
    let scrape = support::get(&admin_addr, "/metrics").await;
    assert_eq!(scrape.status, 200);
    let text = String::from_utf8_lossy(&scrape.body).into_owned();
    let have = scraped(&text);
    // The resident set's anonymous part: some of it, and no more than all of it.
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    };
    let (rss, anonymous) = (
        value("process_resident_memory_bytes"),
        value("kubeplex_process_resident_anonymous_bytes"),
    );
    assert!(anonymous > 0.0 && anonymous <= rss, "anonymous {anonymous} of RSS {rss}");

    // The binary's own (its allocator's), which an in-process proxy does not register: they
    // must be registered there.
    let allocator = read("src/bin/kubeplex/allocator.rs");
    for f in BINARY_ONLY {
        assert!(allocator.contains(&format!("\"{f}\"")), "{f} not registered by the allocator");
    }
    let missing: Vec<_> =
        used.difference(&have).filter(|f| !BINARY_ONLY.contains(&f.as_str())).collect();
    assert!(missing.is_empty(), "used by deploy/ but not in /metrics: {missing:?}\n{text}");

    let docs = read("docs/operations.md");
    let undocumented: Vec<_> = have.iter().filter(|f| !docs.contains(&format!("`{f}`"))).collect();
    assert!(undocumented.is_empty(), "not in docs/operations.md's metrics table: {undocumented:?}");
}

/// `kubectl kustomize DIR`, as objects.
fn render(dir: &Path) -> Vec<Value> {
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl (the end-to-end tests need it)");
    assert!(out.status.success(), "{}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

fn config_check(file: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubeplex"))
        .args(["config", "check"])
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn every_overlays_configuration_passes_config_check() {
    let dir = std::env::temp_dir().join(format!("kubeplex-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = Vec::new();
    for overlay in ["node", "pool", "sidecar"] {
        let objects = render(&repo().join("deploy/overlays").join(overlay));
        let configs: Vec<(&str, &str)> = objects
            .iter()
            .filter(|o| o["kind"] == "ConfigMap")
            .filter_map(|o| {
                Some((o["metadata"]["name"].as_str()?, o["data"]["kubeplex.yaml"].as_str()?))
            })
            .collect();
        // The pool overlay has the node tiers' and the pool's.
        let want = if overlay == "pool" { 2 } else { 1 };
        assert_eq!(configs.len(), want, "{overlay}: kubeplex.yaml files {configs:?}");
        for (name, config) in configs {
            let file = dir.join(format!("{name}.yaml"));
            std::fs::write(&file, config).unwrap();
            let out = config_check(&file);
            assert!(
                out.status.success(),
                "{overlay}/{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The check can fail: the same file with a misspelled key is refused.
            let bad = dir.join(format!("{name}-bad.yaml"));
            std::fs::write(&bad, format!("{config}\nshutdownGracePeriood: 1s\n")).unwrap();
            let out = config_check(&bad);
            assert!(!out.status.success(), "{overlay}/{name}: a misspelled key passed");
            assert!(String::from_utf8_lossy(&out.stderr).contains("shutdownGracePeriood"));
        }
        checked.push(overlay);
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(checked, ["node", "pool", "sidecar"]);
}
