//! Real clients, unchanged, through the node-local mode's TLS listener, each configured the way
//! an agent on a node is — a kubeconfig with `server: https://127.0.0.1:PORT` and the cluster
//! CA — and authenticated by a client certificate or a bearer token:
//! - kubectl as a node (`system:node:node-0`, certificate): its own pods from the cache, all
//!   pods refused with the apiserver's message;
//! - kubectl as a namespace-scoped ServiceAccount (token): its configmaps (JSON and table) from
//!   the cache, another namespace refused, a `--watch` that sees changes;
//! - kube-rs reflectors, as the node and as the reader: synced from the cache, equal to a
//!   direct list, following changes;
//! - client-go informers (`informer-check`, list+watch and WatchList) as the reader.
//!
//! Each gets what it gets from the fake apiserver directly (the same identity, or an admin's
//! view of the same objects), and the metrics of both show where its reads went: allowed reads
//! from kubeplex's cache, none of them reaching the upstream.

use kubeplex_test_support as support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use kubeplex_sim::seed;
use serde_json::{json, Value};
use support::informer_check;
use support::kubectl;
use support::node::{Node, ADMIN_TOKEN, READER_TOKEN};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

const NODE_USER: &str = "system:node:node-0";
const NODE_GROUP: &str = "system:nodes";
const READER_USER: &str = "system:serviceaccount:team-0:reader";
/// Longest a client may take to show a change made in the apiserver, on a loaded machine.
const CHANGE_SEEN_WITHIN: Duration = Duration::from_secs(15);

/// kubeplex's and the upstream's request counts for one resource, to tell where reads went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    cache_lists: u64,
    cache_watches: u64,
    /// Reads kubeplex passed through.
    passed_through: u64,
    /// Reads kubeplex refused itself.
    denied: u64,
    /// LISTs and WATCHes that reached the fake apiserver, other than those kubeplex's caches
    /// made themselves (their loads and watches, and the freshness proofs of consistent
    /// reads: a `limit=1` list, a probe watch): the clients' own, passed through or direct.
    upstream_lists: i64,
    upstream_watches: i64,
}

fn counts(node: &Node, resource: &str) -> Counts {
    let kubeplex = |verb: &str, source: &str| {
        node.requests(&[("resource", resource), ("verb", verb), ("source", source)])
    };
    let label = format!("{resource}/v1");
    let caches_own = |verbs: &[&str]| -> i64 {
        let calls = |verb: &str| {
            node.metric("kubeplex_upstream_calls_total", &[("resource", &label), ("verb", verb)])
        };
        verbs.iter().map(|v| calls(v) as i64).sum()
    };
    Counts {
        cache_lists: kubeplex("LIST", "cache"),
        cache_watches: kubeplex("WATCH", "cache"),
        passed_through: kubeplex("LIST", "upstream") + kubeplex("WATCH", "upstream"),
        denied: kubeplex("LIST", "denied") + kubeplex("WATCH", "denied"),
        upstream_lists: node.upstream_requests(resource, "LIST") as i64
            - caches_own(&["list", "proof_list"]),
        upstream_watches: node.upstream_requests(resource, "WATCH") as i64
            - caches_own(&["watch", "watchlist", "proof_watch"]),
    }
}

/// The names of the configmaps the seed puts in `namespace`.
fn seeded_configmaps(namespace: &str) -> Vec<String> {
    let mut names: Vec<String> = seed::cluster(support::node::SHAPE)
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["namespace"] == namespace)
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// `namespace/name` of every item of a list.
fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    names.sort();
    names
}

fn parse(what: &str, out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {out}"))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A kubectl table without its AGE column (computed from the time of printing).
fn without_age(table: &str) -> Vec<String> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or("");
    let age = header.find("AGE").unwrap_or(header.len());
    std::iter::once(header)
        .chain(lines)
        .map(|l| l.get(..age).unwrap_or(l).trim_end().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_node_certificate_reads_its_pods_from_the_cache_and_is_refused_the_rest() {
    let node = Node::start().await;
    let cert = node.pki.client(NODE_USER, &[NODE_GROUP]);
    let via = node.cert_kubeconfig("node-0", &cert);
    let admin = node.direct_kubeconfig("admin", ADMIN_TOKEN);
    let (home, direct_home) = (node.dir.join("home-node-0"), node.dir.join("home-direct"));
    let own = ["get", "pods", "-A", "--field-selector", "spec.nodeName=node-0", "-o", "json"];

    let before = counts(&node, "pods");
    let through = parse("through kubeplex", &kubectl::run(&via, &home, &own).await);
    let after = counts(&node, "pods");
    // kubectl lists with `limit=500` and no resourceVersion: a consistent read, which the
    // cache answers once it has proven itself fresh.
    assert_eq!(after.cache_lists, before.cache_lists + 1, "the node's list came from the cache");
    assert_eq!(
        (after.passed_through, after.upstream_lists),
        (before.passed_through, before.upstream_lists),
        "the node's list did not reach the upstream"
    );
    let direct = parse("direct", &kubectl::run(&admin, &direct_home, &own).await);
    let mine = names(&through);
    assert!(!mine.is_empty() && mine.len() < 30, "the seed has some of its 30 pods on node-0");
    assert_eq!(mine, names(&direct), "the pods of node-0");
    assert_eq!(through["items"], direct["items"], "the same objects as the apiserver's");
    for pod in through["items"].as_array().unwrap() {
        assert_eq!(pod["spec"]["nodeName"], "node-0");
    }

    // All pods: the Node authorizer refuses a list without the node's field selector.
    let all = ["get", "pods", "-A"];
    let before = counts(&node, "pods");
    let refused = kubectl::output(&via, &home, &all).await;
    let after = counts(&node, "pods");
    assert!(!refused.status.success(), "kubectl get pods -A as node-0 succeeded");
    let message = stderr(&refused);
    assert!(
        message.starts_with(&format!(
            r#"Error from server (Forbidden): pods is forbidden: User "{NODE_USER}" cannot list resource "pods" in API group "" at the cluster scope"#
        )),
        "{message}"
    );
    // A refusal is the apiserver's own, current one: kubeplex passes a read it was not granted
    // through, never refuses it from its memory.
    assert_eq!(after.denied, before.denied, "not refused by kubeplex");
    assert_eq!(after.passed_through, before.passed_through + 1, "passed through");
    assert_eq!(after.upstream_lists, before.upstream_lists + 1, "the apiserver answered it");
    assert_eq!(after.cache_lists, before.cache_lists, "nothing refused came from the cache");
    let impersonated = ["--as", NODE_USER, "--as-group", NODE_GROUP];
    let args: Vec<&str> = all.iter().chain(&impersonated).copied().collect();
    let direct = kubectl::output(&admin, &direct_home, &args).await;
    assert!(!direct.status.success());
    assert_eq!(message, stderr(&direct), "the apiserver's refusal, word for word");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_token_reads_and_watches_its_namespace_from_the_cache() {
    let node = Node::start().await;
    let via = node.token_kubeconfig("reader", READER_TOKEN);
    let direct_kc = node.direct_kubeconfig("reader", READER_TOKEN);
    let (home, direct_home) = (node.dir.join("home-reader"), node.dir.join("home-direct"));

    // JSON and the default table (the server renders it: `Accept: ...;as=Table`).
    for args in [
        &["get", "configmaps", "-n", "team-0", "-o", "json"][..],
        &["get", "configmaps", "-n", "team-0"][..],
    ] {
        let before = counts(&node, "configmaps");
        let through = kubectl::run(&via, &home, args).await;
        let after = counts(&node, "configmaps");
        assert_eq!(after.cache_lists, before.cache_lists + 1, "{args:?}: from the cache");
        assert_eq!(
            (after.passed_through, after.upstream_lists),
            (before.passed_through, before.upstream_lists),
            "{args:?}: nothing reached the upstream"
        );
        let direct = kubectl::run(&direct_kc, &direct_home, args).await;
        if args.contains(&"json") {
            let (through, direct) = (parse("through", &through), parse("direct", &direct));
            assert!(!names(&through).is_empty(), "team-0 has configmaps");
            assert_eq!(through["items"], direct["items"], "{args:?}");
        } else {
            assert!(through.starts_with("NAME "), "a table: {through}");
            assert_eq!(without_age(&through), without_age(&direct), "{args:?}");
        }
    }

    // Another namespace: refused, as the apiserver refuses it.
    let other = ["get", "configmaps", "-n", "team-1"];
    let before = counts(&node, "configmaps");
    let refused = kubectl::output(&via, &home, &other).await;
    let after = counts(&node, "configmaps");
    let direct = kubectl::output(&direct_kc, &direct_home, &other).await;
    assert!(!refused.status.success() && !direct.status.success());
    assert!(
        stderr(&refused).starts_with(&format!(
            r#"Error from server (Forbidden): configmaps is forbidden: User "{READER_USER}" cannot list resource "configmaps" in API group "" in the namespace "team-1""#
        )),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stderr(&refused), stderr(&direct));
    // The apiserver's own refusal, passed through (never replayed from kubeplex's memory).
    assert_eq!(
        (after.denied, after.passed_through, after.upstream_lists),
        (before.denied, before.passed_through + 1, before.upstream_lists + 1)
    );

    kubectl_watch_sees_changes(&node, &via, &home).await;
}

/// `kubectl get cm -n team-0 --watch` through kubeplex, for as long as it takes to see a
/// configmap created and one modified in team-0 (and not a change in team-1).
async fn kubectl_watch_sees_changes(node: &Node, via: &Path, home: &Path) {
    let initial = seeded_configmaps("team-0");
    let before = counts(node, "configmaps");
    let args = ["get", "cm", "-n", "team-0", "--watch", "--output-watch-events", "-o", "json"];
    let mut child = kubectl::command(via, home, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut out = child.stdout.take().expect("stdout");
    let mut text = String::new();
    let mut events: Vec<Value> = Vec::new();
    let deadline = Instant::now() + CHANGE_SEEN_WITHIN * 2;
    let mut changed = false;
    let modified = initial.first().cloned().expect("team-0 has configmaps");
    let mut buf = [0u8; 8192];
    loop {
        // kubectl prints the list as ADDED events, then what the watch brings.
        if !changed && events.len() >= initial.len() {
            changed = true;
            node.sim
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "watched", "namespace": "team-0"}, "data": {"k": "v"}}))
                .expect("create");
            node.sim
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "elsewhere", "namespace": "team-1"}, "data": {"k": "v"}}))
                .expect("create");
            node.sim
                .modify("", "configmaps", "team-0", &modified, |v| {
                    v["data"]["changed"] = json!("yes");
                })
                .expect("modify");
        }
        if changed && events.len() >= initial.len() + 2 {
            break;
        }
        let n = match tokio::time::timeout_at(deadline, out.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => n,
            Ok(Err(e)) => panic!("reading kubectl: {e}"),
        };
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        events = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect();
    }
    let _ = child.kill().await;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = tokio::time::timeout(Duration::from_secs(5), e.read_to_string(&mut err)).await;
    }
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let mut expected: Vec<(String, String)> =
        initial.iter().map(|n| ("ADDED".to_string(), n.clone())).collect();
    expected.push(("ADDED".into(), "watched".into()));
    expected.push(("MODIFIED".into(), modified.clone()));
    let mut sorted_seen = seen[..initial.len().min(seen.len())].to_vec();
    sorted_seen.sort();
    sorted_seen.extend_from_slice(&seen[initial.len().min(seen.len())..]);
    assert_eq!(sorted_seen, expected, "kubectl --watch events; stderr: {err}");
    // The objects as the apiserver stores them (the same resourceVersion).
    let last = events.last().unwrap();
    let stored = node.sim.get("", "configmaps", "team-0", &modified).expect("stored");
    assert_eq!(last["object"]["data"], stored["data"]);
    assert_eq!(
        last["object"]["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    let after = counts(node, "configmaps");
    assert_eq!(after.cache_lists, before.cache_lists + 1, "--watch's list from the cache");
    assert_eq!(after.cache_watches, before.cache_watches + 1, "--watch's watch from the cache");
    assert_eq!(
        (after.passed_through, after.upstream_lists, after.upstream_watches),
        (before.passed_through, before.upstream_lists, before.upstream_watches),
        "neither reached the upstream"
    );
}

// ---- kube-rs ----

/// A client configured the way users configure one: from a kubeconfig (TLS, the cluster CA,
/// a client certificate or a token).
async fn kube_client(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// A reflector as applications run it (errors retried with kube's backoff), counting errors.
fn reflect<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, Arc<AtomicUsize>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let errors = Arc::new(AtomicUsize::new(0));
    let counted = errors.clone();
    let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
    tokio::spawn(async move {
        stream
            .for_each(|event| {
                if let Err(e) = event {
                    eprintln!("watcher error: {e}");
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                async {}
            })
            .await;
    });
    (store, errors)
}

/// `namespace/name` → resourceVersion.
fn contents<K: kube::Resource<DynamicType = ()> + Clone>(
    objects: impl IntoIterator<Item = K>,
) -> BTreeMap<String, String> {
    objects
        .into_iter()
        .map(|o| {
            let key = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
            (key, o.resource_version().unwrap_or_default())
        })
        .collect()
}

/// Waits (bounded) until the store holds exactly what a direct list returns.
async fn converges<K>(what: &str, store: &Store<K>, direct: &Api<K>, lp: &ListParams)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + CHANGE_SEEN_WITHIN;
    loop {
        let want = contents(direct.list(lp).await.expect("direct list").items);
        let have = contents(store.state().iter().map(|o| (**o).clone()));
        if have == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the store\n{have:?}\nthe apiserver\n{want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_reflector_as_the_node_syncs_from_the_cache_and_follows_changes() {
    let node = Node::start().await;
    let cert = node.pki.client(NODE_USER, &[NODE_GROUP]);
    let client = kube_client(&node.cert_kubeconfig("node-0", &cert)).await;
    let admin = kube_client(&node.direct_kubeconfig("admin", ADMIN_TOKEN)).await;
    let selector = "spec.nodeName=node-0";
    let direct: Api<Pod> = Api::all(admin);
    let lp = ListParams::default().fields(selector);

    let before = counts(&node, "pods");
    let (store, errors) =
        reflect(Api::<Pod>::all(client.clone()), watcher::Config::default().fields(selector));
    tokio::time::timeout(CHANGE_SEEN_WITHIN, store.wait_until_ready())
        .await
        .expect("the reflector synced in time")
        .expect("writer alive");
    converges("synced", &store, &direct, &lp).await;
    let synced = store.state().len();
    assert!(synced > 0 && synced < 30, "node-0's pods: {synced}");

    // A pod scheduled onto node-0, one onto node-1 (not the node's), a change to one of its own.
    let mut ours = seed::pod("team-1", 900, 3);
    ours["metadata"]["name"] = json!("scheduled-here");
    ours["spec"]["nodeName"] = json!("node-0");
    let mut theirs = seed::pod("team-1", 901, 3);
    theirs["metadata"]["name"] = json!("scheduled-elsewhere");
    theirs["spec"]["nodeName"] = json!("node-1");
    node.sim.create(ours).expect("create");
    node.sim.create(theirs).expect("create");
    let first = store.state()[0].clone();
    node.sim
        .modify("", "pods", &first.namespace().unwrap(), &first.name_any(), |v| {
            v["metadata"]["labels"]["changed"] = json!("yes");
        })
        .expect("modify");
    converges("after the changes", &store, &direct, &lp).await;
    assert_eq!(store.state().len(), synced + 1);
    assert!(store.state().iter().all(|p| p.name_any() != "scheduled-elsewhere"));
    assert_eq!(errors.load(Ordering::Relaxed), 0, "watcher errors");

    let after = counts(&node, "pods");
    assert_eq!(after.cache_lists, before.cache_lists + 1, "the reflector's list from the cache");
    assert_eq!(after.cache_watches, before.cache_watches + 1, "its watch from the cache");
    assert_eq!(after.passed_through, before.passed_through, "nothing passed through");
    assert_eq!(after.upstream_watches, before.upstream_watches, "no watch reached the upstream");

    // All pods: refused with the apiserver's Status.
    let err = Api::<Pod>::all(client).list(&ListParams::default()).await.expect_err("refused");
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!(status.code, 403);
    assert!(status.message.starts_with(&format!(r#"pods is forbidden: User "{NODE_USER}""#)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_reflector_with_a_token_syncs_from_the_cache_and_follows_changes() {
    let node = Node::start().await;
    let client = kube_client(&node.token_kubeconfig("reader", READER_TOKEN)).await;
    let direct_client = kube_client(&node.direct_kubeconfig("reader", READER_TOKEN)).await;
    let direct: Api<ConfigMap> = Api::namespaced(direct_client.clone(), "team-0");
    let lp = ListParams::default();

    let before = counts(&node, "configmaps");
    // A streaming list (WatchList), as client-go 0.36 starts its informers.
    let api = Api::<ConfigMap>::namespaced(client.clone(), "team-0");
    let (store, errors) = reflect(api, watcher::Config::default().streaming_lists());
    tokio::time::timeout(CHANGE_SEEN_WITHIN, store.wait_until_ready())
        .await
        .expect("the reflector synced in time")
        .expect("writer alive");
    converges("synced", &store, &direct, &lp).await;
    let synced = store.state().len();
    assert!(synced > 0);

    node.sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "new", "namespace": "team-0"}, "data": {"k": "v"}}))
        .expect("create");
    let first = store.state()[0].name_any();
    node.sim.delete("", "configmaps", "team-0", &first).expect("delete");
    converges("after the changes", &store, &direct, &lp).await;
    assert_eq!(store.state().len(), synced);
    assert_eq!(errors.load(Ordering::Relaxed), 0, "watcher errors");

    let after = counts(&node, "configmaps");
    assert_eq!(after.cache_watches, before.cache_watches + 1, "the streaming list from the cache");
    assert_eq!(after.passed_through, before.passed_through, "nothing passed through");
    assert_eq!(after.upstream_watches, before.upstream_watches, "no watch reached the upstream");

    // Another namespace: the apiserver's 403, as the reader gets it directly.
    let refused = |c: Client| async move {
        match Api::<ConfigMap>::namespaced(c, "team-1").list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => s,
            other => panic!("{other:?}"),
        }
    };
    let (through, direct) = (refused(client).await, refused(direct_client).await);
    assert_eq!(through.code, 403);
    assert_eq!(format!("{through:?}"), format!("{direct:?}"));
}

// ---- client-go informers ----

const INFORMERS: usize = 3;
/// How long each run records events once its informers synced; the changes end well before.
const RECORD: Duration = Duration::from_secs(8);
const SYNC_TIMEOUT: Duration = Duration::from_secs(40);
const RUN_TIMEOUT: Duration = Duration::from_secs(85);

/// One informer-check process, list+watch or WatchList.
struct Run {
    watchlist: bool,
    run: informer_check::Run,
}

fn spawn_informers(tool: &Path, via: &Path, node: &Node, compare: &Path, watchlist: bool) -> Run {
    let spec = informer_check::Spec {
        kubeconfig: via,
        resource: "configmaps",
        scope: &["--namespace", "team-0"],
        informers: INFORMERS,
        record: RECORD,
        sync_timeout: SYNC_TIMEOUT,
        watchlist,
        protobuf: false,
        compare_server: &format!("https://{}", node.direct.addr),
        compare_kubeconfig: compare,
    };
    Run { watchlist, run: informer_check::spawn(tool, &spec) }
}

/// The run's report (JSON), its exit status and stderr.
async fn finish(run: Run, deadline: Instant) -> (Value, String, String) {
    let f = run.run.finish(deadline).await;
    let report = serde_json::from_str(&f.stdout).unwrap_or(Value::Null);
    (report, f.status, f.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_go_informers_with_a_token_are_served_from_the_cache() {
    let Some(tool) = support::informer_check::tool().await else { return };
    let node = Node::start().await;
    let via = node.token_kubeconfig("reader", READER_TOKEN);
    let compare: PathBuf = node.direct_kubeconfig("admin", ADMIN_TOKEN);
    let seeded = seeded_configmaps("team-0");
    assert!(!seeded.is_empty());

    let before = counts(&node, "configmaps");
    let mut runs: Vec<Run> =
        [false, true].iter().map(|&w| spawn_informers(&tool, &via, &node, &compare, w)).collect();
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut all_synced = true;
    for run in &mut runs {
        all_synced &=
            matches!(tokio::time::timeout_at(deadline, &mut run.run.synced).await, Ok(Ok(_)));
    }
    // Changes while both record: two creates, an update, a delete in team-0; one in team-1,
    // which the informers must not see.
    if all_synced {
        for i in 0..2 {
            node.sim
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("informed-{i}"), "namespace": "team-0"}}))
                .expect("create");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        node.sim
            .modify("", "configmaps", "team-0", &seeded[0], |v| v["data"]["changed"] = json!("1"))
            .expect("modify");
        node.sim.delete("", "configmaps", "team-0", "informed-0").expect("delete");
        node.sim
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "not-informed", "namespace": "team-1"}}))
            .expect("create");
    }
    let mut failures = Vec::new();
    let mut requests = (0, 0);
    for run in runs {
        let watchlist = run.watchlist;
        let mode = if watchlist { "watchlist" } else { "list+watch" };
        let (report, status, stderr) = finish(run, deadline).await;
        let mut problems = Vec::new();
        let mut want = |ok: bool, what: String| {
            if !ok {
                problems.push(what);
            }
        };
        want(report["ok"] == true, "ok is not true".into());
        want(report["watchlist"] == watchlist, "the other mode ran".into());
        want(report["all_match_compare"] == true, "differs from the apiserver's list".into());
        want(report["compare_objects"] == json!(seeded.len() + 1), "compare list size".into());
        let informers = report["informers"].as_array().cloned().unwrap_or_default();
        want(informers.len() == INFORMERS, format!("{} informers", informers.len()));
        for i in &informers {
            let n = |k: &str| i[k].as_u64().unwrap_or(u64::MAX);
            let id = &i["id"];
            want(n("objects") == seeded.len() as u64 + 1, format!("{id}: objects"));
            want(n("initial_adds") == seeded.len() as u64, format!("{id}: initial adds"));
            want(
                (n("adds"), n("updates"), n("deletes")) == (2, 1, 1),
                format!("{id}: events {:?}", (n("adds"), n("updates"), n("deletes"))),
            );
            want(
                n("relists") + n("rewatches") + n("watch_errors") + n("http_errors") == 0,
                format!("{id}: relists, rewatches or errors"),
            );
            requests.0 += n("list_requests");
            requests.1 += n("watch_requests") + n("watchlist_requests");
        }
        if !problems.is_empty() {
            failures.push(format!(
                "== {mode} ({status}): {}\n-- report:\n{report:#}\n-- stderr:\n{stderr}",
                problems.join("; ")
            ));
        }
    }
    assert!(all_synced, "informers did not sync: {}", failures.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // list+watch: one LIST and one WATCH per informer; WatchList: one WATCH each.
    assert_eq!(requests, (INFORMERS as u64, 2 * INFORMERS as u64));
    let after = counts(&node, "configmaps");
    assert_eq!(after.cache_lists - before.cache_lists, requests.0, "LISTs from the cache");
    assert_eq!(after.cache_watches - before.cache_watches, requests.1, "watches from the cache");
    assert_eq!(after.passed_through, before.passed_through, "nothing passed through");
    // Only the two compare lists (direct, by the admin) reached the apiserver.
    assert_eq!(after.upstream_lists, before.upstream_lists + 2, "the compare lists only");
    assert_eq!(after.upstream_watches, before.upstream_watches, "no watch reached the upstream");
}
