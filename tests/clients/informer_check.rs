//! Real client-go 0.36 informers through kubeplex: `informer-check` (../shared/tools/
//! informer-check) runs 5 informers in each of list+watch / WatchList × JSON / protobuf, all at
//! once, while the test churns pods in their namespace through the fake apiserver. Every
//! informer must sync, see exactly the events the churn made, and end with the apiserver's own
//! list.
//!
//! The tool comes from `KUBEPLEX_INFORMER_CHECK` (CI sets it, see .ci/run), else from its build
//! cache, else `scripts/informer-check.sh` builds it (minutes, once). A tool that cannot be found
//! or built fails the test; `KUBEPLEX_SKIP_INFORMER_CHECK=1` skips it explicitly.

use kubeplex_test_support as support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::Sim;
use serde::Deserialize;
use serde_json::{json, Value};
use support::informer_check;
use support::stack::Stack;
use tokio::time::Instant;

/// The namespace the informers watch; the churn also writes elsewhere, which they must not see.
const NS: &str = "team-1";
const INFORMERS: usize = 5;
const SHAPE: ClusterShape =
    ClusterShape { nodes: 3, namespaces: 3, pods: 90, configmaps: 9, services: 3 };

/// How long each run records events once its informers synced; the churn ends well before.
const RECORD: Duration = Duration::from_secs(12);
/// Events of the last write must have reached every informer before its recording ends.
const DELIVERY_MARGIN: Duration = Duration::from_secs(3);
const CHURN_ROUNDS: usize = 40;
const CHURN_PERIOD: Duration = Duration::from_millis(100);
/// The pods a round creates are deleted this many rounds later.
const POD_LIFETIME_ROUNDS: usize = 4;
/// Bounds for a loaded 2-core machine: informer-check's own sync wait, and the whole run.
const SYNC_TIMEOUT: Duration = Duration::from_secs(40);
const RUN_TIMEOUT: Duration = Duration::from_secs(85);

#[derive(Debug, Clone, Copy)]
struct Mode {
    watchlist: bool,
    protobuf: bool,
}

const MODES: [Mode; 4] = [
    Mode { watchlist: false, protobuf: false },
    Mode { watchlist: true, protobuf: false },
    Mode { watchlist: false, protobuf: true },
    Mode { watchlist: true, protobuf: true },
];

impl Mode {
    fn name(self) -> &'static str {
        match (self.watchlist, self.protobuf) {
            (false, false) => "list+watch/json",
            (true, false) => "watchlist/json",
            (false, true) => "list+watch/protobuf",
            (true, true) => "watchlist/protobuf",
        }
    }

    /// Every response the informers get is in the encoding they asked for (watch streams add
    /// `;stream=watch` to the protobuf type).
    fn content_type_prefix(self) -> &'static str {
        if self.protobuf {
            "application/vnd.kubernetes.protobuf"
        } else {
            "application/json"
        }
    }
}

/// informer-check's JSON report (the fields this test checks).
#[derive(Debug, Deserialize)]
struct Report {
    ok: bool,
    all_synced: bool,
    consistent: bool,
    watchlist: bool,
    protobuf: bool,
    compare_objects: Option<usize>,
    compare_error: Option<String>,
    all_match_compare: Option<bool>,
    informers: Vec<InformerReport>,
}

#[derive(Debug, Deserialize)]
struct InformerReport {
    id: usize,
    synced: bool,
    objects: usize,
    initial_adds: usize,
    adds: usize,
    updates: usize,
    deletes: usize,
    list_requests: u64,
    list_continue_requests: u64,
    watch_requests: u64,
    watchlist_requests: u64,
    relists: u64,
    rewatches: u64,
    watch_errors: u64,
    http_errors: u64,
    response_content_types: BTreeMap<String, u64>,
    matches_compare: Option<bool>,
}

// ---- running it ----

/// One informer-check process in one mode.
struct Run {
    mode: Mode,
    run: informer_check::Run,
}

struct Outcome {
    mode: Mode,
    status: String,
    stdout: String,
    stderr: String,
}

fn spawn_run(tool: &Path, mode: Mode, via: &Path, sim: &Sim, sim_kc: &Path) -> Run {
    spawn_scoped(tool, mode, &["--namespace", NS], via, sim, sim_kc)
}

/// [`spawn_run`] for pods in `scope` (`--namespace NS`, `--field-selector S`, ...).
fn spawn_scoped(
    tool: &Path,
    mode: Mode,
    scope: &[&str],
    via: &Path,
    sim: &Sim,
    sim_kc: &Path,
) -> Run {
    let spec = informer_check::Spec {
        kubeconfig: via,
        resource: "pods",
        scope,
        informers: INFORMERS,
        record: RECORD,
        sync_timeout: SYNC_TIMEOUT,
        watchlist: mode.watchlist,
        protobuf: mode.protobuf,
        compare_server: &sim.url(),
        compare_kubeconfig: sim_kc,
    };
    Run { mode, run: informer_check::spawn(tool, &spec) }
}

async fn finish(run: Run, deadline: Instant) -> Outcome {
    let f = run.run.finish(deadline).await;
    Outcome { mode: run.mode, status: f.status, stdout: f.stdout, stderr: f.stderr }
}

// ---- churn ----

/// The writes made in the informers' namespace and resource: exactly the events each
/// informer must see.
#[derive(Debug, Default)]
struct Churn {
    creates: usize,
    updates: usize,
    deletes: usize,
}

fn pod_names(objects: &[Value], namespace: &str) -> Vec<String> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Pod" && o["metadata"]["namespace"] == namespace)
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// A new pod per round, an annotation change and a label change on seeded pods, the pod of
/// `POD_LIFETIME_ROUNDS` earlier deleted; plus writes in another namespace and to configmaps
/// in this one, which pod informers in `NS` must not see.
fn churn_round(sim: &Sim, r: usize, seeded: &[String], elsewhere: &[String], churn: &mut Churn) {
    let pod = |i: usize| seed::pod(NS, 1000 + i, SHAPE.nodes);
    let name = |v: &Value| v["metadata"]["name"].as_str().unwrap_or("").to_string();
    sim.create(pod(r)).expect("create pod");
    churn.creates += 1;
    let a = &seeded[r % seeded.len()];
    sim.modify("", "pods", NS, a, |v| {
        v["metadata"]["annotations"]["kubeplex.io/churn"] = json!(r.to_string());
    })
    .expect("annotate pod");
    let b = &seeded[(r + seeded.len() / 2) % seeded.len()];
    sim.modify("", "pods", NS, b, |v| {
        let labels = &mut v["metadata"]["labels"];
        labels["tier"] = json!(if r % 2 == 0 { "canary" } else { "backend" });
        labels["kubeplex.io/round"] = json!(r.to_string());
    })
    .expect("relabel pod");
    churn.updates += 2;
    if let Some(old) = r.checked_sub(POD_LIFETIME_ROUNDS) {
        sim.delete("", "pods", NS, &name(&pod(old))).expect("delete pod");
        churn.deletes += 1;
    }
    let c = &elsewhere[r % elsewhere.len()];
    sim.modify("", "pods", "team-2", c, |v| {
        v["metadata"]["labels"]["kubeplex.io/round"] = json!(r.to_string());
    })
    .expect("relabel pod elsewhere");
    sim.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "churn", "namespace": NS}, "data": {"round": r.to_string()}}))
        .expect("upsert configmap");
}

// ---- checks ----

/// What is wrong with one mode's report, given the churn it recorded.
fn check(mode: Mode, r: &Report, seeded: usize, churn: &Churn) -> Vec<String> {
    let mut bad = Vec::new();
    let mut want = |ok: bool, what: String| {
        if !ok {
            bad.push(what);
        }
    };
    let objects = seeded + churn.creates - churn.deletes;
    want(r.ok, "ok is false".into());
    want(r.all_synced, "not all informers synced".into());
    want(r.consistent, "the informers' caches differ".into());
    want(r.all_match_compare == Some(true), "the caches differ from the apiserver's list".into());
    want(r.compare_error.is_none(), format!("compare list failed: {:?}", r.compare_error));
    want(
        r.compare_objects == Some(objects),
        format!("the apiserver's list has {:?} pods, want {objects}", r.compare_objects),
    );
    want(r.watchlist == mode.watchlist && r.protobuf == mode.protobuf, "wrong mode ran".into());
    want(r.informers.len() == INFORMERS, format!("{} informers reported", r.informers.len()));
    for i in &r.informers {
        let mut want = |ok: bool, what: &str| want(ok, format!("informer {}: {what}", i.id));
        want(i.synced, "did not sync");
        want(i.matches_compare == Some(true), "cache differs from the apiserver's list");
        want(i.objects == objects, &format!("{} objects, want {objects}", i.objects));
        want(i.initial_adds == seeded, &format!("{} initial adds, want {seeded}", i.initial_adds));
        // One watch from sync to the end, so every churn write is exactly one event.
        let seen = (i.adds, i.updates, i.deletes);
        let made = (churn.creates, churn.updates, churn.deletes);
        want(seen == made, &format!("(adds, updates, deletes) {seen:?}, churn made {made:?}"));
        let requests = (i.list_requests, i.watch_requests, i.watchlist_requests);
        let expected = if mode.watchlist { (0, 0, 1) } else { (1, 1, 0) };
        want(
            requests == expected,
            &format!("(list, watch, watchlist) requests {requests:?}, want {expected:?}"),
        );
        want(i.list_continue_requests == 0, "paged its list");
        want(i.relists == 0 && i.rewatches == 0, "relisted or rewatched");
        want(i.watch_errors == 0 && i.http_errors == 0, "watch or HTTP errors");
        let prefix = mode.content_type_prefix();
        want(
            i.response_content_types.keys().all(|t| t.starts_with(prefix)),
            &format!("content types {:?}, want {prefix}*", i.response_content_types),
        );
    }
    bad
}

/// Sum of `name{...}` series in Prometheus text whose labels include all of `labels`.
fn sum_series(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// kubeplex's `kubeplex_requests_total` for pods, by verb and optionally source.
async fn kubeplex_pod_requests(stack: &Stack, verb: &str, source: Option<&str>) -> u64 {
    let text = stack.metrics_text().await;
    let mut labels = vec![("resource", "pods"), ("verb", verb)];
    labels.extend(source.map(|s| ("source", s)));
    sum_series(&text, "kubeplex_requests_total", &labels)
}

/// Pod requests kubeplex and the apiserver counted, taken before and after the runs.
struct Counts {
    cache_lists: u64,
    upstream_lists: u64,
    watches: u64,
    cache_watches: u64,
    sim_watches: u64,
}

async fn counts(stack: &Stack) -> Counts {
    Counts {
        cache_lists: kubeplex_pod_requests(stack, "LIST", Some("cache")).await,
        upstream_lists: kubeplex_pod_requests(stack, "LIST", Some("upstream")).await,
        watches: kubeplex_pod_requests(stack, "WATCH", None).await,
        cache_watches: kubeplex_pod_requests(stack, "WATCH", Some("cache")).await,
        sim_watches: stack.upstream_calls("WATCH"),
    }
}

/// The informers' watches are served from kubeplex's caches, so the apiserver saw only the caches' own pod watches (one
/// per preloaded cache, JSON and protobuf, with room for one restart each) however many
/// informers watch.
fn assert_watches_multiplexed(before: &Counts, after: &Counts, informer_watches: u64) {
    assert!(
        after.sim_watches <= 4,
        "{informer_watches} informer watches through kubeplex; the apiserver saw {} pod watches \
         in all, want at most 4 (the caches' own)",
        after.sim_watches
    );
    assert_eq!(
        after.cache_watches - before.cache_watches,
        informer_watches,
        "informer watches served from the cache"
    );
}

/// Starts every mode's run, churns while all of them record, and collects what they said.
async fn run_under_churn(
    stack: &Stack,
    tool: &Path,
    seeded: &[String],
    elsewhere: &[String],
) -> (Vec<Outcome>, Churn) {
    let via = stack.write_client_kubeconfig();
    let sim_kc = stack.dir.join("sim.kubeconfig");
    stack.sim.write_kubeconfig(&sim_kc).expect("sim kubeconfig");
    let mut runs: Vec<Run> =
        MODES.iter().map(|&m| spawn_run(tool, m, &via, &stack.sim, &sim_kc)).collect();
    let deadline = Instant::now() + RUN_TIMEOUT;
    // Churn only while every run records: from the last one's start until shortly before the
    // first one's recording ends. A run that never starts recording fails later, with its report.
    let mut recording = Vec::new();
    for run in &mut runs {
        match tokio::time::timeout_at(deadline, &mut run.run.synced).await {
            Ok(Ok(t)) => recording.push(t),
            _ => break,
        }
    }
    let mut churn = Churn::default();
    let first_end = recording.iter().min().map(|t| *t + RECORD);
    if let Some(first_end) = first_end.filter(|_| recording.len() == runs.len()) {
        for r in 0..CHURN_ROUNDS {
            if Instant::now() + CHURN_PERIOD + DELIVERY_MARGIN > first_end {
                break;
            }
            churn_round(&stack.sim, r, seeded, elsewhere, &mut churn);
            tokio::time::sleep(CHURN_PERIOD).await;
        }
    }
    let mut outcomes = Vec::new();
    for run in runs {
        outcomes.push(finish(run, deadline).await);
    }
    (outcomes, churn)
}

/// The reports, every one checked; fails with each failing mode's problems, report and stderr.
fn checked_reports(outcomes: &[Outcome], seeded: usize, churn: &Churn) -> Vec<Report> {
    let mut failures = Vec::new();
    let mut reports = Vec::new();
    for o in outcomes {
        let problems = match serde_json::from_str::<Report>(&o.stdout) {
            Err(e) => vec![format!("no report ({e}); {}", o.status)],
            Ok(r) => {
                let p = check(o.mode, &r, seeded, churn);
                let sum = |f: fn(&InformerReport) -> u64| r.informers.iter().map(f).sum::<u64>();
                println!(
                    "{:<20} requests: list {} watch {} watchlist {}; events per informer {:?}",
                    o.mode.name(),
                    sum(|i| i.list_requests),
                    sum(|i| i.watch_requests),
                    sum(|i| i.watchlist_requests),
                    r.informers.first().map(|i| (i.adds, i.updates, i.deletes)),
                );
                reports.push(r);
                p
            }
        };
        if !problems.is_empty() {
            failures.push(format!(
                "== {} ({}):\n  {}\n-- report:\n{}\n-- stderr (tail):\n{}",
                o.mode.name(),
                o.status,
                problems.join("\n  "),
                o.stdout,
                support::informer_check::tail(&o.stderr, 30)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "client-go informers through kubeplex, churn {churn:?}:\n{}",
        failures.join("\n\n")
    );
    reports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_go_informers_through_kubeplex_under_churn() {
    let Some(tool) = support::informer_check::tool().await else { return };
    let started = Instant::now();
    let stack = Stack::new(SHAPE, &["pods", "pods:protobuf"]).await;
    let objects = seed::cluster(SHAPE);
    let seeded = pod_names(&objects, NS);
    let elsewhere = pod_names(&objects, "team-2");
    assert!(!seeded.is_empty() && !elsewhere.is_empty(), "the seed has pods in both namespaces");

    let before = counts(&stack).await;
    let (outcomes, churn) = run_under_churn(&stack, &tool, &seeded, &elsewhere).await;
    let after = counts(&stack).await;
    let reports = checked_reports(&outcomes, seeded.len(), &churn);
    assert!(churn.creates >= 10, "churn ran too briefly to mean anything: {churn:?}");

    // Where the reads went. The informers' LISTs (resourceVersion=0) come from kubeplex's
    // caches; every informer WATCH and WatchList request reaches kubeplex once.
    let all = |f: fn(&InformerReport) -> u64| {
        reports.iter().flat_map(|r| &r.informers).map(f).sum::<u64>()
    };
    let lists = all(|i| i.list_requests);
    let informer_watches = all(|i| i.watch_requests + i.watchlist_requests);
    assert_eq!(lists, 2 * INFORMERS as u64, "one LIST per list+watch informer");
    assert_eq!(after.cache_lists - before.cache_lists, lists, "informer LISTs from the cache");
    assert_eq!(after.upstream_lists, before.upstream_lists, "no pod LIST passed through");
    assert_eq!(after.watches - before.watches, informer_watches, "informer watches via kubeplex");
    assert_watches_multiplexed(&before, &after, informer_watches);
    println!(
        "churn {churn:?}; apiserver pod watches {} -> {}; test took {:.1}s",
        before.sim_watches,
        after.sim_watches,
        started.elapsed().as_secs_f64()
    );
}

/// The kubelet's read: client-go informers of the pods bound to one node
/// (`fieldSelector=spec.nodeName=N`), in protobuf, started with a consistent WatchList — all at
/// once on a cold kubeplex. They share the protobuf cache's one upstream load (the
/// `spec.nodeName` index of the protobuf cache answers them), every informer's WatchList is
/// served from the cache, and each ends with exactly the apiserver's pods of that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_like_informers_start_cold_and_are_served_from_the_cache() {
    let Some(tool) = support::informer_check::tool().await else { return };
    let stack = Stack::new(SHAPE, &[]).await;
    let node = "node-1";
    let on_node = seed::cluster(SHAPE)
        .iter()
        .filter(|o| o["kind"] == "Pod" && o["spec"]["nodeName"] == node)
        .count();
    assert!(on_node > 0, "the seed has pods on {node}");
    let via = stack.write_client_kubeconfig();
    let sim_kc = stack.dir.join("sim.kubeconfig");
    stack.sim.write_kubeconfig(&sim_kc).expect("sim kubeconfig");
    let mode = Mode { watchlist: true, protobuf: true };
    let selector = format!("spec.nodeName={node}");
    let mut run =
        spawn_scoped(&tool, mode, &["--field-selector", &selector], &via, &stack.sim, &sim_kc);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let recording = tokio::time::timeout_at(deadline, &mut run.run.synced).await;
    // Pods scheduled onto this node and elsewhere; two of this node's deleted again.
    let (mut created, mut deleted) = (0, 0);
    if let Ok(Ok(since)) = recording {
        for i in 0..8 {
            if Instant::now() + CHURN_PERIOD + DELIVERY_MARGIN > since + RECORD {
                break;
            }
            let target = if i % 2 == 0 { node } else { "node-2" };
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("kubelet-{i}"), "namespace": "team-0"},
                "spec": {"nodeName": target, "containers": [{"name": "app", "image": "registry.example/app:1"}]},
                "status": {"phase": "Running"}});
            stack.sim.create(pod).expect("create pod");
            created += usize::from(target == node);
            if i == 4 || i == 6 {
                stack
                    .sim
                    .delete("", "pods", "team-0", &format!("kubelet-{}", i - 4))
                    .expect("delete");
                deleted += 1;
            }
            tokio::time::sleep(CHURN_PERIOD).await;
        }
    }
    let outcome = finish(run, deadline).await;
    let report: Report = serde_json::from_str(&outcome.stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); {}\n{}",
            outcome.status,
            support::informer_check::tail(&outcome.stderr, 30)
        )
    });
    let objects = on_node + created - deleted;
    assert!(report.ok && report.all_match_compare == Some(true), "{}", outcome.stdout);
    assert_eq!(report.compare_objects, Some(objects), "the apiserver's pods on {node}");
    assert!(created >= 3, "the churn ran too briefly: {created} created");
    for i in &report.informers {
        assert_eq!((i.objects, i.initial_adds), (objects, on_node), "informer {}", i.id);
        assert_eq!((i.adds, i.deletes), (created, deleted), "informer {}", i.id);
        let requests = (i.list_requests, i.watch_requests, i.watchlist_requests);
        assert_eq!(requests, (0, 0, 1), "informer {}: one WatchList", i.id);
        assert!(
            i.response_content_types
                .keys()
                .all(|t| t.starts_with("application/vnd.kubernetes.protobuf")),
            "informer {}: {:?}",
            i.id,
            i.response_content_types
        );
    }
    // Where the reads went: every WatchList from the cache, nothing passed through, and the
    // apiserver saw the protobuf cache's one load plus the freshness proofs' own watches.
    let text = stack.metrics_text().await;
    let kubeplex = |source: &str, verb: &str| {
        sum_series(
            &text,
            "kubeplex_requests_total",
            &[("resource", "pods"), ("verb", verb), ("source", source)],
        )
    };
    assert_eq!(kubeplex("cache", "WATCH"), INFORMERS as u64, "WatchLists from the cache");
    assert_eq!(
        kubeplex("upstream", "WATCH") + kubeplex("upstream", "LIST"),
        0,
        "none passed through"
    );
    let probes = sum_series(
        &text,
        "kubeplex_upstream_calls_total",
        &[("resource", "pods/v1"), ("verb", "proof_watch")],
    );
    let loads = sum_series(
        &text,
        "kubeplex_upstream_calls_total",
        &[("resource", "pods/v1"), ("verb", "watchlist")],
    );
    let sim_watches = stack.upstream_calls("WATCH");
    // The cache's first load, and at most one reload (a small cache the informers' reads cover
    // is proven by reloading it: one streaming list, shared by the informers that arrived after
    // the first load was requested), or probes instead.
    assert!(loads <= 2, "{loads} loads of the node's pods");
    assert!(
        sim_watches <= loads + probes,
        "{INFORMERS} kubelet-like informers; the apiserver saw {sim_watches} pod watches, want the \
         cache's {loads} load(s) plus {probes} probe(s)"
    );
    println!("kubelet-like informers: {on_node} pods on {node}, {created} created, {deleted} deleted; apiserver pod watches {sim_watches} (probes {probes})");
}
