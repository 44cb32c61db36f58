//! kube-rs's watcher and reflector, unchanged, through kubeplex: with either initial-list
//! strategy (paged list then watch, or a streaming list), through churn, dropped watches and a
//! compaction, every store ends up holding exactly the apiserver's objects.

use kubeplex_test_support as support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use support::stack::Stack;
use support::watchers::*;
use support::STEP;

/// A client configured the way users configure one: from a kubeconfig naming kubeplex.
async fn client(stack: &Stack) -> Client {
    let kubeconfig = Kubeconfig::read_from(stack.write_client_kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// One reflector: what it watches, its store, and the path whose apiserver answer it must
/// converge to.
struct Reflector {
    name: &'static str,
    store: Store<Pod>,
    path: &'static str,
    errors: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

fn start(
    name: &'static str,
    api: Api<Pod>,
    config: watcher::Config,
    path: &'static str,
) -> Reflector {
    let (store, writer) = reflector::store();
    let errors = Arc::new(AtomicUsize::new(0));
    let counted = errors.clone();
    // As applications run it: errors (410s, ended streams) are retried with kube's backoff.
    let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
    let task = tokio::spawn(async move {
        stream
            .for_each(|event| {
                if event.is_err() {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                async {}
            })
            .await;
    });
    Reflector { name, store, path, errors, task }
}

fn contents(store: &Store<Pod>) -> BTreeMap<String, String> {
    store
        .state()
        .iter()
        .map(|p| {
            let key = format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any());
            (key, p.resource_version().unwrap_or_default())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflectors_converge_through_churn_dropped_watches_and_compaction() {
    let shape = ClusterShape { nodes: 3, namespaces: 2, pods: 20, configmaps: 2, services: 1 };
    let builder = SimBuilder::new().bookmark_interval(Duration::from_secs(1));
    let stack = Arc::new(Stack::with_sim(builder, shape, &["pods"]).await);
    seed_churn_pods(&stack.sim);
    let upstream_watches_before = stack.upstream_calls("WATCH");
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    let client = client(&stack).await;
    let team0: Api<Pod> = Api::namespaced(client.clone(), "team-0");
    let all: Api<Pod> = Api::all(client);
    let reflectors = [
        start(
            "list-watch team-0",
            team0.clone(),
            watcher::Config::default(),
            "/api/v1/namespaces/team-0/pods",
        ),
        start(
            "streaming-list team-0",
            team0,
            watcher::Config::default().streaming_lists(),
            "/api/v1/namespaces/team-0/pods",
        ),
        start(
            "list-watch phase=a, pages of 7",
            all.clone(),
            watcher::Config::default().labels("phase=a").page_size(7),
            "/api/v1/pods?labelSelector=phase%3Da",
        ),
        start(
            "streaming-list node-1",
            all,
            watcher::Config::default().streaming_lists().fields("spec.nodeName=node-1"),
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
        ),
    ];
    for r in &reflectors {
        tokio::time::timeout(STEP * 3, r.store.wait_until_ready())
            .await
            .unwrap_or_else(|_| panic!("{}: never synced", r.name))
            .expect("writer alive");
    }

    let secs = Duration::from_secs;
    let churn = spawn_churn(stack.clone(), secs(6), Duration::from_millis(10));
    let faults = spawn_faults(
        stack.clone(),
        vec![(secs(2), Fault::DropWatches), (secs(4), Fault::CompactAndDrop)],
    );
    let writes = tokio::time::timeout(secs(30), churn).await.expect("churn ends").expect("join");
    tokio::time::timeout(STEP, faults).await.expect("faults end").expect("join");

    let mut want = Vec::new();
    for r in &reflectors {
        want.push(apiserver_state(&stack, r.path).await);
    }
    let converged = eventually(secs(30), || async {
        reflectors.iter().zip(&want).all(|(r, w)| &contents(&r.store) == w)
    })
    .await;
    let mut problems = Vec::new();
    for (r, w) in reflectors.iter().zip(&want) {
        let got = contents(&r.store);
        println!(
            "{}: {} objects, {} watcher errors retried",
            r.name,
            got.len(),
            r.errors.load(Ordering::Relaxed)
        );
        if &got != w {
            problems.push(format!("{}: {}", r.name, diff(&got, w)));
        }
        r.task.abort();
    }
    println!("{writes} writes");
    assert!(converged && problems.is_empty(), "{}", problems.join("\n"));
    assert!(writes > 100, "the churn ran");
    assert!(want.iter().all(|w| !w.is_empty()), "every selection holds pods at the end");

    let upstream_watches = stack.upstream_calls("WATCH") - upstream_watches_before;
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    println!(
        "upstream pod watches {upstream_watches}, watches served from the cache {cache_watches}"
    );
    // kubeplex's reflector re-watches
    // after each fault and relists once; the four clients' watches come from the cache.
    assert!(upstream_watches <= 2 + 2 + 2, "upstream watches: {upstream_watches}");
    assert!(cache_watches >= reflectors.len() as u64, "from the cache: {cache_watches}");
}
