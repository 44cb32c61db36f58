//! Discovery parsing, and the discovery cache against a scripted upstream over loopback: what it
//! does when the upstream answers, fails (5xx, 429, garbage, unreachable) and answers again.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::*;
use crate::upstream::UpstreamConfig;

#[test]
fn parses_the_captured_core_discovery() {
    let path = format!("{}/../shared/fixtures/discovery-api-v1.body", env!("CARGO_MANIFEST_DIR"));
    let body = std::fs::read(path).unwrap_or_default();
    let m = parse_resource_list("", "v1", &body).expect("an APIResourceList");
    let pods = m.get("pods").expect("pods");
    assert_eq!((pods.kind.as_str(), pods.namespaced), ("Pod", true));
    assert!(pods.supports("watch") && pods.supports("list"));
    assert_eq!(pods.collection_path(), "/api/v1/pods");
    assert!(!m.contains_key("pods/status"));
    let ns = m.get("namespaces").expect("namespaces");
    assert!(!ns.namespaced);
    assert!(pods.is_builtin());
    let gateway = ResourceInfo { group: "gateway.networking.k8s.io".into(), ..(**pods).clone() };
    assert!(!gateway.is_builtin(), "a CRD under *.k8s.io");
}

#[test]
fn a_body_that_is_no_resource_list_is_not_an_answer() {
    assert!(parse_resource_list("", "v1", b"<html>bad gateway</html>").is_none());
    assert!(parse_resource_list("", "v1", b"{\"resources\": [").is_none());
    let empty = parse_resource_list("x.io", "v1", b"{\"kind\":\"APIResourceList\"}");
    assert_eq!(empty.map(|m| m.len()), Some(0), "a list with no resources is one");
}

/// How the scripted upstream answers discovery requests.
#[derive(Clone)]
enum Mode {
    /// 200 with an APIResourceList of these resources (for any group-version).
    Serve(Vec<&'static str>),
    Status(u16),
    /// 200 with a body that is no APIResourceList (a proxy's error page).
    Garbage,
}

/// A loopback upstream answering discovery by `mode`, after `delay`, counting requests. It can
/// be stopped (connections refused and open ones cut) and started again on the same port.
struct Scripted {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    delay: Arc<Mutex<Duration>>,
    hits: Arc<AtomicUsize>,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
    kubeconfig: std::path::PathBuf,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

impl Scripted {
    async fn start(mode: Mode) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let kubeconfig = std::env::temp_dir().join(format!(
            "kubeplex-discovery-{}-{}.kubeconfig",
            std::process::id(),
            addr.port()
        ));
        let config = kubeplex_sim::kubeconfig_for(&format!("http://{addr}"), "up");
        std::fs::write(&kubeconfig, config).expect("kubeconfig");
        let s = Scripted {
            addr,
            mode: Arc::new(Mutex::new(mode)),
            delay: Arc::new(Mutex::new(Duration::ZERO)),
            hits: Arc::new(AtomicUsize::new(0)),
            server: Mutex::new(None),
            kubeconfig,
        };
        s.serve(listener);
        s
    }

    fn serve(&self, listener: TcpListener) {
        let (mode, delay, hits) = (self.mode.clone(), self.delay.clone(), self.hits.clone());
        let task = tokio::spawn(async move {
            // Connections live in this set: stopping the server cuts them too.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (mode, delay, hits) = (mode.clone(), delay.clone(), hits.clone());
                let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let (mode, delay, hits) = (mode.clone(), delay.clone(), hits.clone());
                    async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let wait = *delay.lock().unwrap();
                        tokio::time::sleep(wait).await;
                        let mode = mode.lock().unwrap().clone();
                        Ok::<_, Infallible>(answer(req.uri().path(), mode))
                    }
                });
                connections.spawn(async move {
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                });
            }
        });
        *self.server.lock().unwrap() = Some(task);
    }

    /// Connections refused from now on, open ones cut (the apiserver killed).
    fn stop(&self) {
        if let Some(task) = self.server.lock().unwrap().take() {
            task.abort();
        }
    }

    /// Serving again on the same port.
    async fn restart(&self) {
        self.stop();
        for _ in 0..100 {
            if let Ok(listener) = TcpListener::bind(self.addr).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("could not bind {} again", self.addr);
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn resources(&self, ttl: Duration) -> (Resources, DiscoveryMetrics) {
        let config = UpstreamConfig::resolve(Some(&self.kubeconfig), None).expect("config");
        let upstream = Arc::new(Upstream::new(config).expect("client"));
        let metrics = DiscoveryMetrics::new(&Registry::new()).expect("metrics");
        (Resources::new(upstream, ttl, metrics.clone()), metrics)
    }
}

fn answer(path: &str, mode: Mode) -> Response<Full<Bytes>> {
    let respond = |code: u16, body: String| {
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        resp
    };
    match mode {
        Mode::Serve(names) => {
            let gv = path.trim_start_matches("/apis/").trim_start_matches("/api/");
            let resources: Vec<_> = names
                .iter()
                .map(|n| {
                    serde_json::json!({"name": n, "kind": "K", "namespaced": true,
                                       "verbs": ["get", "list", "watch"]})
                })
                .collect();
            let doc = serde_json::json!({"kind": "APIResourceList", "groupVersion": gv,
                                         "resources": resources});
            respond(200, doc.to_string())
        }
        Mode::Status(code) => respond(code, "{\"kind\":\"Status\"}".to_string()),
        Mode::Garbage => respond(200, "<html>upstream connect error</html>".to_string()),
    }
}

/// Polls `cond` every 10 ms for at most 5 s.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

fn fetches(m: &DiscoveryMetrics, result: &str) -> u64 {
    m.fetches.with_label_values(&[result]).get()
}

#[tokio::test]
async fn a_stale_entry_is_used_while_refreshing_fails_and_replaced_once_the_upstream_answers() {
    let up = Scripted::start(Mode::Serve(vec!["pods"])).await;
    let ttl = Duration::from_millis(100);
    let (res, m) = up.resources(ttl);
    assert!(res.lookup("", "v1", "pods").await.is_some());
    assert_eq!(up.hits(), 1);
    // Every kind of failure, each past the TTL (and the retry delay, which is the TTL here).
    let failures = [Mode::Status(503), Mode::Status(500), Mode::Status(429), Mode::Garbage];
    for (i, failure) in failures.into_iter().enumerate() {
        up.set(failure);
        tokio::time::sleep(ttl + Duration::from_millis(20)).await;
        let before = up.hits();
        assert!(res.lookup("", "v1", "pods").await.is_some(), "failure {i}: stale entry used");
        eventually("the background refresh", || fetches(&m, "error") == i as u64 + 1).await;
        assert_eq!(up.hits(), before + 1, "one refresh");
        assert_eq!(res.stale_entries(), 1);
        assert_eq!(m.stale.get(), 1);
    }
    // The upstream killed: connections refused, for many TTLs.
    up.stop();
    for round in 0..5 {
        tokio::time::sleep(ttl + Duration::from_millis(20)).await;
        let info = res.lookup("", "v1", "pods").await;
        assert_eq!(info.map(|i| i.resource.clone()).as_deref(), Some("pods"), "round {round}");
        assert!(res.known("", "v1", "pods").is_some(), "metrics labels still known");
    }
    eventually("refreshes failing while unreachable", || fetches(&m, "error") >= 6).await;
    assert_eq!(m.stale.get(), 1);
    // Back, serving a new resource: the stale entry is replaced.
    up.restart().await;
    up.set(Mode::Serve(vec!["pods", "configmaps"]));
    for _ in 0..500 {
        if res.lookup("", "v1", "configmaps").await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(res.lookup("", "v1", "configmaps").await.is_some(), "refreshed after the outage");
    assert_eq!((res.stale_entries(), m.stale.get()), (0, 0));
    assert!(fetches(&m, "ok") >= 2);
    // A 404 is an answer: the group-version is gone, and so are its resources.
    up.set(Mode::Status(404));
    tokio::time::sleep(ttl + Duration::from_millis(20)).await;
    let _stale = res.lookup("", "v1", "pods").await;
    eventually("the 404 applied", || res.known("", "v1", "pods").is_none()).await;
    assert!(res.lookup("", "v1", "pods").await.is_none());
    assert_eq!(fetches(&m, "gone"), 1);
    assert_eq!(res.stale_entries(), 0);
}

#[tokio::test]
async fn readers_of_a_stale_entry_do_not_wait_and_one_refresh_runs_at_a_time() {
    let up = Scripted::start(Mode::Serve(vec!["pods"])).await;
    let ttl = Duration::from_millis(50);
    let (res, _m) = up.resources(ttl);
    let res = Arc::new(res);
    assert!(res.lookup("", "v1", "pods").await.is_some());
    *up.delay.lock().unwrap() = Duration::from_millis(1500);
    tokio::time::sleep(ttl + Duration::from_millis(20)).await;
    let started = Instant::now();
    let mut readers = JoinSet::new();
    for _ in 0..20 {
        let res = res.clone();
        readers.spawn(async move { res.lookup("", "v1", "pods").await.is_some() });
    }
    while let Some(found) = readers.join_next().await {
        assert!(found.expect("reader"), "answered from the stale entry");
    }
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
    eventually("the refresh sent", || up.hits() == 2).await;
    // Readers during the slow refresh neither wait nor start another.
    for _ in 0..5 {
        assert!(res.lookup("", "v1", "pods").await.is_some());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(up.hits(), 2, "one refresh per group-version at a time");
}

#[tokio::test]
async fn concurrent_first_readers_share_one_fetch() {
    let up = Scripted::start(Mode::Serve(vec!["widgets"])).await;
    *up.delay.lock().unwrap() = Duration::from_millis(300);
    let (res, _m) = up.resources(DISCOVERY_TTL);
    let res = Arc::new(res);
    let mut readers = JoinSet::new();
    for _ in 0..10 {
        let res = res.clone();
        readers.spawn(async move { res.lookup("demo.io", "v1", "widgets").await.is_some() });
    }
    while let Some(found) = readers.join_next().await {
        assert!(found.expect("reader"));
    }
    assert_eq!(up.hits(), 1);
}

#[tokio::test]
async fn a_first_fetch_that_fails_is_unknown_and_not_remembered() {
    let up = Scripted::start(Mode::Status(503)).await;
    let (res, m) = up.resources(DISCOVERY_TTL);
    assert!(res.lookup("", "v1", "pods").await.is_none());
    up.set(Mode::Serve(vec!["pods"]));
    assert!(res.lookup("", "v1", "pods").await.is_some(), "the next reader fetches again");
    assert_eq!((up.hits(), fetches(&m, "error"), fetches(&m, "ok")), (2, 1, 1));
}

#[tokio::test]
async fn made_up_group_versions_cannot_grow_the_map_or_push_out_served_ones() {
    let up = Scripted::start(Mode::Serve(vec!["pods"])).await;
    let (res, m) = up.resources(DISCOVERY_TTL);
    assert!(res.lookup("", "v1", "pods").await.is_some());
    up.set(Mode::Status(404));
    for i in 0..MAX_GROUP_VERSIONS + 100 {
        assert!(res.lookup(&format!("x{i}.example.com"), "v1", "foo").await.is_none());
    }
    let remembered = res.inner.by_gv.lock().unwrap().len();
    assert_eq!(remembered, MAX_GROUP_VERSIONS);
    assert_eq!(m.entries.get(), MAX_GROUP_VERSIONS as i64);
    assert!(res.known("", "v1", "pods").is_some(), "a served group-version is kept");
    // Each made-up group-version cost one fetch; a repeated one is remembered (404 cached).
    let hits = up.hits();
    assert!(res
        .lookup(&format!("x{}.example.com", MAX_GROUP_VERSIONS + 99), "v1", "foo")
        .await
        .is_none());
    assert_eq!(up.hits(), hits);
}

/// A document answered from memory is at most a tenth of the TTL old while the upstream
/// answers: an older one is fetched again before it is answered (a CRD created since shows), by
/// one fetch for a burst of readers; while the upstream does not answer, the last one is
/// answered at once after the first failed fetch.
#[tokio::test]
async fn a_document_is_fetched_again_once_a_tenth_of_the_ttl_old_and_kept_while_the_upstream_fails()
{
    let up = Scripted::start(Mode::Serve(vec!["ciliumnodes"])).await;
    let ttl = Duration::from_secs(3);
    let (res, m) = up.resources(ttl);
    let res = Arc::new(res);
    let names = |doc: Option<Bytes>| -> Vec<String> {
        let doc: serde_json::Value = serde_json::from_slice(&doc.expect("a document")).unwrap();
        doc["resources"].as_array().unwrap().iter().map(|r| r["name"].to_string()).collect()
    };
    assert_eq!(names(res.document("cilium.io", "v2").await), ["\"ciliumnodes\""]);
    assert_eq!(up.hits(), 1);
    // A CRD created in the group-version: within a tenth of the TTL the document is the one
    // fetched; after it, the new one, fetched once for a burst of readers.
    up.set(Mode::Serve(vec!["ciliumnodes", "ciliumendpoints"]));
    assert_eq!(names(res.document("cilium.io", "v2").await).len(), 1);
    assert_eq!(up.hits(), 1);
    tokio::time::sleep(ttl / 10 + Duration::from_millis(50)).await;
    let mut readers = JoinSet::new();
    for _ in 0..10 {
        let res = res.clone();
        readers.spawn(async move { res.document("cilium.io", "v2").await });
    }
    while let Some(doc) = readers.join_next().await {
        assert_eq!(names(doc.expect("reader")).len(), 2, "the new document");
    }
    assert_eq!(up.hits(), 2, "one fetch for the burst");
    // The upstream gone: the first reader past the freshness waits for a failed fetch, the
    // others get the last document without asking.
    up.stop();
    tokio::time::sleep(ttl / 10 + Duration::from_millis(50)).await;
    assert_eq!(names(res.document("cilium.io", "v2").await).len(), 2);
    assert_eq!(fetches(&m, "error"), 1);
    for _ in 0..5 {
        assert_eq!(names(res.document("cilium.io", "v2").await).len(), 2);
    }
    assert_eq!(fetches(&m, "error"), 1, "no fetch per reader while it fails");
}

/// A read naming a resource its served group-version's answer lacks (a CRD created since
/// kubeplex asked) refreshes that answer in the background once it is a thirtieth of the TTL
/// old; the read itself passes through (`None`). A group-version not served at all (an empty
/// answer) is asked again only at its TTL.
#[tokio::test]
async fn a_resource_missing_from_a_served_group_version_refreshes_it() {
    let up = Scripted::start(Mode::Serve(vec!["ciliumnodes"])).await;
    let ttl = Duration::from_secs(3);
    let (res, _m) = up.resources(ttl);
    assert!(res.lookup("cilium.io", "v2", "ciliumnodes").await.is_some());
    up.set(Mode::Serve(vec!["ciliumnodes", "ciliumendpoints"]));
    tokio::time::sleep(ttl / 30 + Duration::from_millis(20)).await;
    assert!(res.lookup("cilium.io", "v2", "ciliumendpoints").await.is_none(), "passed through");
    eventually("the refresh", || res.known("cilium.io", "v2", "ciliumendpoints").is_some()).await;
    assert_eq!(up.hits(), 2);
    // Not served at all: one fetch, then no more within the TTL however many reads.
    up.set(Mode::Status(404));
    assert!(res.lookup("nothing.io", "v1", "things").await.is_none());
    let hits = up.hits();
    tokio::time::sleep(ttl / 30 + Duration::from_millis(20)).await;
    for _ in 0..5 {
        assert!(res.lookup("nothing.io", "v1", "things").await.is_none());
    }
    assert_eq!(up.hits(), hits);
}
