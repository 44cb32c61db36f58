//! A small run of `kubeplex-bench scale` against its fake apiserver (8 emulated nodes, a few
//! seconds of writes), directly and through two pool replicas with the shipped pool
//! configuration: every node's every watch syncs, every watcher ends with the apiserver's
//! objects at their resourceVersions, no event comes out of order, each new pod's kubelet writes
//! its status — and through the pool the apiserver holds one watch per resource per replica
//! whatever the number of nodes and whatever encodings they read, and sends each change once per
//! replica.

use std::time::Duration;

use serde_json::Value;

mod support;

use support::{json_report, kubeplex_bin, root};

const NODES: u64 = 8;
const REPLICAS: u64 = 2;
/// What a node reads through its node tier: pods, nodes, services, endpointslices (its
/// caches) and runtimeclasses, csidrivers, servicecidrs, configmaps and secrets (passed on).
const RESOURCES: u64 = 9;
/// What the pool watches besides for itself: the ServiceAccounts its verification of the node
/// tiers' and agents' tokens looks up (`verifyServiceAccountTokens`).
const POOL_OWN: u64 = 1;
/// A node's watches through its node tier: its 4 caches, the 3 other watches, and its
/// kubelet's of the ConfigMap and Secret of each of the 3 apps its 3 pods belong to and of the
/// 2 ConfigMaps of every pod's projected token volume.
const WATCHES_PER_NODE: u64 = 4 + 3 + 2 * 3 + 2;

/// `kubeplex-bench --json scale --sim` with [`NODES`] small nodes, [`REPLICAS`] pool replicas
/// of the shipped configuration, and `extra` flags.
async fn scale(extra: &[&str]) -> tokio::process::Command {
    let bin = kubeplex_bin().await;
    let root = root();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubeplex-bench"));
    cmd.arg("--json")
        .args(["scale", "--sim", "--nodes", &NODES.to_string(), "--pods-per-node", "3"])
        .args(["--services", "6", "--endpoints-per-slice", "4"])
        .args(["--write-rate", "10", "--settle", "2", "--sync-timeout", "60"])
        .args(["--replicas", &REPLICAS.to_string()])
        .args(extra)
        .arg("--kubeplex-bin")
        .arg(&bin)
        .arg("--pool-config")
        .arg(root.join("deploy/base/pool/kubeplex.yaml"))
        .arg("--daemonset")
        .arg(root.join("deploy/base/node/daemonset.yaml"))
        .arg("--pool-manifest")
        .arg(root.join("deploy/base/pool/pool.yaml"));
    cmd
}

/// Each node runs a CNI-like agent too (`--cni`: its pods, every node, namespace, service and
/// endpointslice, in JSON, where the kubelet and kube-proxy read protobuf).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_holds_one_watch_per_resource_and_replica_and_every_node_sees_every_change() {
    // The writer held until the kubelets' syncs of the pods bound before them are written.
    let cmd = scale(&["--duration", "4", "--mode", "both", "--hold", "3", "--cni"]).await;
    let report = json_report(cmd, Duration::from_secs(240)).await;
    let modes = report["modes"].as_array().expect("modes");
    assert_eq!(
        modes.iter().map(|m| m["mode"].as_str()).collect::<Vec<_>>(),
        [Some("direct"), Some("pool")]
    );
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    for m in modes {
        let mode = m["mode"].as_str().unwrap_or("?");
        assert!(m["all_synced_s"].is_number(), "{mode}: not every watch synced: {m}");
        assert_eq!(n(&m["views_wrong"]), 0, "{mode}: {}", m["views_examples"]);
        assert_eq!(n(&m["views_checked"]), n(&m["watches"]), "{mode}");
        for class in m["classes"].as_array().expect("classes") {
            assert_eq!(n(&class["out_of_order"]), 0, "{mode}: {class}");
            assert_eq!(n(&class["synced"]), n(&class["watchers"]), "{mode}: {class}");
        }
        for what in ["endpointslices", "services", "pods"] {
            assert!(n(&m["delivery"][what]["count"]) > 0, "{mode}: no delivery of {what}: {m}");
        }
        let replaced = n(&m["written"]["pods_replaced"]);
        assert!(replaced > 0, "{mode}: {m}");
        assert_eq!(
            n(&m["kubelet_writes"]["pod_status_ok"]),
            replaced,
            "{mode}: every new pod's status"
        );
        // The kubelets' start: each pod bound before synced, each node's status patched.
        let k = &m["kubelet_writes"];
        assert_eq!(n(&k["existing_status_ok"]), NODES * 3, "{mode}: {k}");
        assert!(n(&k["node_status_ok"]) >= 2 * NODES, "{mode}: {k}");
    }
    let (direct, pool) = (&modes[0], &modes[1]);
    // Directly, every node's every watch is the apiserver's.
    assert!(n(&direct["apiserver_open_watches_max"]) >= n(&direct["watches"]), "{direct}");
    // Every CNI agent's JSON watches synced and ended equal (checked above with every class).
    let classes = |m: &Value| -> Vec<String> {
        let all = m["classes"].as_array().expect("classes").iter();
        all.filter_map(|c| c["class"].as_str()).map(str::to_owned).collect()
    };
    let cni = classes(direct).into_iter().filter(|c| c.starts_with("cni: ")).count();
    assert_eq!(cni, 5, "{direct}");
    // Through the pool: one per resource per replica, whatever the nodes — the namespaces the
    // CNI agents read one more resource, and the pool's own ServiceAccounts.
    let resources = RESOURCES + 1 + POOL_OWN;
    let open = n(&pool["apiserver_open_watches_max"]);
    assert!(
        open <= REPLICAS * resources && open < n(&direct["apiserver_open_watches_max"]),
        "{open} open watches through the pool: {pool}"
    );
    // Whatever the encodings the nodes read (pods, nodes, services and endpointslices in
    // protobuf and in JSON): one watch per replica of each at the apiserver (issue 31).
    let reads = &pool["total"]["reads_by_resource"];
    for resource in ["pods", "nodes", "services", "endpointslices", "namespaces"] {
        let watches = n(&reads[resource]["WATCH"]);
        assert!((1..=REPLICAS).contains(&watches), "{resource}: {watches} watches: {reads}");
    }
    // Each change once per replica: the pods cache gets a replaced pod's deletion, its
    // creation and its three status syncs; the others one event per change.
    let w = &pool["written"];
    let changes = n(&w["endpointslices"]) + n(&w["services"]) + 5 * n(&w["pods_replaced"]);
    let events = n(&pool["steady"]["watch_events"]);
    assert!(
        events as f64 <= 1.1 * (REPLICAS * changes) as f64,
        "{events} watch events for {changes} changes through {REPLICAS} replicas"
    );
    assert!(events < n(&direct["steady"]["watch_events"]), "{pool}\n{direct}");
    eprintln!("{report}");
}

/// Each node runs a Cilium agent (`--cilium`, as cilium/cilium's agent reads: its pods, its
/// Node, namespaces, services and endpointslices in protobuf; every CiliumNode,
/// CiliumEndpoint, CiliumIdentity and CiliumNetworkPolicy in JSON), and the writer replaces a
/// pod's CiliumEndpoint with the pod: every view ends right in both modes, and through the pool
/// each Cilium resource costs the apiserver one watch per replica, not one per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cilium_agents_on_every_node_cost_the_apiserver_one_watch_per_resource_and_replica() {
    let cmd = scale(&["--duration", "4", "--mode", "both", "--hold", "3", "--cilium"]).await;
    let report = json_report(cmd, Duration::from_secs(240)).await;
    let modes = report["modes"].as_array().expect("modes");
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    for m in modes {
        let mode = m["mode"].as_str().unwrap_or("?");
        assert!(m["all_synced_s"].is_number(), "{mode}: not every watch synced: {m}");
        assert_eq!(n(&m["views_wrong"]), 0, "{mode}: {}", m["views_examples"]);
        assert_eq!(n(&m["views_checked"]), n(&m["watches"]), "{mode}");
        for class in m["classes"].as_array().expect("classes") {
            assert_eq!(n(&class["out_of_order"]), 0, "{mode}: {class}");
            assert_eq!(n(&class["synced"]), n(&class["watchers"]), "{mode}: {class}");
        }
        let w = &m["written"];
        assert!(n(&w["pods_replaced"]) > 0, "{mode}: {w}");
        assert_eq!(n(&w["ciliumendpoints_replaced"]), n(&w["pods_replaced"]), "{mode}: {w}");
        // Each replaced endpoint reached every node (its creation, stamped).
        let seen = n(&m["delivery"]["ciliumendpoints"]["count"]);
        assert_eq!(seen, NODES * n(&w["ciliumendpoints_replaced"]), "{mode}: {}", m["delivery"]);
    }
    let (direct, pool) = (&modes[0], &modes[1]);
    let classes = |m: &Value| -> usize {
        let all = m["classes"].as_array().expect("classes").iter();
        all.filter(|c| c["class"].as_str().is_some_and(|c| c.starts_with("cilium: "))).count()
    };
    assert_eq!(classes(direct), 9, "{direct}");
    let cilium = ["ciliumnodes", "ciliumendpoints", "ciliumidentities", "ciliumnetworkpolicies"];
    let (direct_reads, reads) =
        (&direct["total"]["reads_by_resource"], &pool["total"]["reads_by_resource"]);
    for resource in cilium {
        assert_eq!(n(&direct_reads[resource]["WATCH"]), NODES, "{resource}: {direct_reads}");
        let watches = n(&reads[resource]["WATCH"]);
        assert!((1..=REPLICAS).contains(&watches), "{resource}: {watches} watches: {reads}");
    }
    // Flat in the nodes: one watch per resource per replica (namespaces and Cilium's four
    // besides the nodes' 9), and the pool's own ServiceAccounts.
    let resources = RESOURCES + 1 + cilium.len() as u64 + POOL_OWN;
    let open = n(&pool["apiserver_open_watches_max"]);
    assert!(open <= REPLICAS * resources, "{open} open watches through the pool: {pool}");
    let events = |m: &Value| n(&m["steady"]["watch_events"]);
    assert!(events(pool) < events(direct), "{pool}\n{direct}");
    eprintln!("{report}");
}

/// Through the pool, every node tier started again within a few seconds (a DaemonSet rollout,
/// each resuming from its state on disk), then pool replica 0 killed and started again, while
/// the writer writes: every watcher still ends with the apiserver's objects, no event out of
/// order or repeated; the rollout costs the apiserver nothing; the killed replica's node tiers
/// move to the other one and come back to it; its restart costs the apiserver its own loads
/// (one per resource), nothing per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_tiers_rolled_and_a_replica_restarted_lose_no_event_and_come_back() {
    let cmd =
        scale(&["--duration", "2", "--mode", "pool", "--rollout", "3", "--kill-replica", "2"]);
    let report = json_report(cmd.await, Duration::from_secs(300)).await;
    let pool = &report["modes"][0];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    assert_eq!(n(&pool["views_wrong"]), 0, "{}", pool["views_examples"]);
    assert_eq!(n(&pool["views_checked"]), NODES * WATCHES_PER_NODE);
    let d = pool["disruptions"].as_array().expect("disruptions");
    assert_eq!(d.len(), 2, "{pool}");
    let (rollout, restart) = (&d[0], &d[1]);
    for phase in d {
        assert_eq!(n(&phase["out_of_order"]), 0, "{phase}");
        assert!(n(&phase["delivery"]["count"]) > 0, "no change seen meanwhile: {phase}");
        assert_eq!(phase["home"], serde_json::json!([NODES, NODES]), "{phase}");
        assert!(phase["done_s"].is_number(), "{phase}");
    }
    // Every node tier resumed its watches from their RVs (its caches from the states it wrote
    // as it stopped): nothing listed, watched or proven at the apiserver.
    let served = &rollout["served"];
    assert_eq!((n(&served["list"]), n(&served["watch"])), (0, 0), "{rollout}");
    let proofs = &rollout["pool_calls"];
    assert_eq!((n(&proofs["proof_list"]), n(&proofs["proof_watch"])), (0, 0), "{rollout}");
    // The killed replica's node tiers (every other one) went to the other replica and back.
    assert_eq!(n(&restart["moved_away"]), NODES / REPLICAS, "{restart}");
    assert_eq!(n(&restart["moved_back"]), NODES / REPLICAS, "{restart}");
    // Its restart cost the apiserver its own loads, one per resource; the node tiers' return
    // resumed or loaded not older than their RVs, from its cache.
    let served = &restart["served"];
    assert!(n(&served["list"]) + n(&served["watch"]) <= RESOURCES + POOL_OWN, "{restart}");
    assert!(n(&served["list"]) + n(&served["watch"]) <= n(&restart["bound"]), "{restart}");
    eprintln!("{report}");
}

/// With `--agents external` (the calibration against real kubemark nodes,
/// scripts/realcluster/calibrate.py) the bench runs no agent of its own: it creates the
/// scenario's objects, leaves the cue `agents-start` (its time: the start-up's) in its work
/// directory, holds the writer for `--hold` seconds, then writes as in every run; the
/// apiserver serves no node's watch meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_agents_get_a_cue_and_a_start_up_window_of_their_own() {
    let work = kubeplex_net::scratch::TempDir::new("bench-scale-external");
    let mut cmd = scale(&["--duration", "2", "--mode", "direct", "--agents", "external"]).await;
    cmd.args(["--hold", "3", "--work-dir"]).arg(work.path());
    let report = json_report(cmd, Duration::from_secs(120)).await;
    let m = &report["modes"][0];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let cue = std::fs::read_to_string(work.path().join("agents-start")).expect("the cue");
    let phases = &m["phases"];
    let cued: f64 = cue.trim().parse().expect("the cue's time");
    assert!((cued - f(&phases["nodes_start"])).abs() < 1e-3, "{cue} {phases}");
    let held = f(&phases["writer_start"]) - f(&phases["nodes_start"]);
    assert!(held >= 3.0, "the writer started {held} s after the agents' cue: {phases}");
    assert!(f(&phases["steady_end"]) > f(&phases["writer_start"]), "{phases}");
    // No agent of the bench's own: nothing watched, no node's Lease or pod status written.
    assert_eq!(n(&m["watches"]), 0, "{m}");
    assert_eq!(n(&m["startup"]["watch"]), 0, "{m}");
    assert_eq!(n(&m["kubelet_writes"]["lease_ok"]) + n(&m["kubelet_writes"]["pod_status_ok"]), 0);
    // The writer wrote.
    assert!(n(&m["written"]["pods_replaced"]) > 0, "{m}");
    assert!(n(&m["written"]["endpointslices"]) > 0, "{m}");
}

/// `--soak` through the pool against the fake apiserver, a minute compressed: the writer
/// churns all along while the schedule runs (node tiers rolled, a replica restarted, etcd
/// "compacted" — the fake has no etcd: a no-op command — with the pool's upstream connections
/// cut, an upstream outage through the relay, a burst of cold node tiers): every view is the
/// apiserver's at the end, no event out of order, the apiserver's open watches come back after
/// each disruption, and the samples file has a row every 2 s with every replica's memory and
/// counts, and a marker for each disruption.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_samples_every_replica_and_recovers_from_every_disruption() {
    let work = kubeplex_net::scratch::TempDir::new("bench-scale-soak");
    let samples = work.path().join("samples.csv");
    let mut cmd = scale(&["--duration", "2", "--mode", "pool", "--rollout", "3"]).await;
    cmd.args(["--kill-replica", "2", "--soak", "75", "--soak-every", "10", "--soak-sample", "2"])
        .args(["--soak-outage", "4", "--compact-etcd", "true", "--soak-samples"])
        .arg(&samples);
    let report = json_report(cmd, Duration::from_secs(400)).await;
    let pool = &report["modes"][0];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    assert_eq!(n(&pool["views_wrong"]), 0, "{}", pool["views_examples"]);
    assert_eq!(n(&pool["views_checked"]), NODES * WATCHES_PER_NODE);
    let soak = &pool["soak"];
    let stamped = soak["disruptions"].as_array().expect("the soak's disruptions");
    let kinds: Vec<&str> = stamped.iter().filter_map(|d| d["kind"].as_str()).collect();
    // No apiserver restart without a command for it; the rest in the schedule's order.
    assert!(kinds.len() >= 4, "{kinds:?}");
    assert_eq!(kinds[..4], ["Rollout", "ReplicaRestart", "Compaction", "Outage"], "{soak}");
    for d in stamped {
        assert_eq!(n(&d["disruption"]["out_of_order"]), 0, "{d}");
        assert!(d["watches_back_s"].is_number(), "the pool's watches not back: {d}");
        assert!(d["watches_before"].as_f64().unwrap_or(0.0) > 0.0, "{d}");
    }
    // The outage: the pool's watches were cut and came back, and the writes made meanwhile
    // reached the nodes once it ended.
    let outage = stamped.iter().find(|d| d["kind"] == "Outage").expect("an outage");
    assert!(n(&outage["disruption"]["pool_calls"]["watch"]) > 0, "{outage}");
    assert!(n(&outage["disruption"]["delivery"]["count"]) > 0, "{outage}");
    // The samples: a header naming every replica's series, a row per sample, a marker per
    // disruption.
    let text = std::fs::read_to_string(&samples).expect("the samples file");
    let header: Vec<&str> = text.lines().next().expect("a header").split(',').collect();
    for series in ["rss_mib", "heap_in_use_mib", "tasks", "client_connections", "open_fds"] {
        for replica in 0..REPLICAS {
            let column = format!("{series}:pool-{replica}");
            assert!(header.contains(&column.as_str()), "{column} not in {header:?}");
        }
    }
    let markers = text.lines().filter(|l| l.starts_with("#marker,")).count();
    assert_eq!(markers, stamped.len(), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(',').collect())
        .collect();
    assert!(rows.len() >= 20, "{} rows in 75 s at one every 2 s", rows.len());
    let rss = header.iter().position(|c| *c == "rss_mib:pool-0").expect("rss");
    let read =
        rows.iter().filter(|r| r.get(rss).is_some_and(|v| v.parse::<f64>().is_ok_and(|v| v > 1.0)));
    assert!(read.count() >= rows.len() * 3 / 4, "replica 0's RSS mostly unread:\n{text}");
    assert!(!soak["slopes"].as_array().expect("slopes").is_empty(), "{soak}");
    let settled = soak["settled_slopes"].as_array().expect("settled slopes");
    let watches: Vec<&Value> =
        settled.iter().filter(|s| s["series"] == "upstream_watches:pool-0").collect();
    assert_eq!(watches.len(), 1, "replica 0's watches at the apiserver: {soak}");
    // The last disruption leaves an interval to settle before the end.
    let last = stamped.last().and_then(|d| d["at_s"].as_f64()).unwrap_or(0.0);
    assert!(soak["seconds"].as_f64().unwrap_or(0.0) >= last + 10.0, "{soak}");
    eprintln!("{report}");
}
