//! Reviews against a loopback upstream answering with kube-apiserver 1.36's captured reviews.

use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use super::*;
use crate::upstream::testing::TempDir;
use crate::upstream::UpstreamConfig;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../../shared/fixtures/", $name, ".body")).as_slice()
    };
}

/// An upstream that answers TokenReviews (valid for the token `good`) and SubjectAccessReviews
/// (allowed in namespace `fx2`) with the captures, and records the review bodies it received.
struct ReviewServer {
    addr: std::net::SocketAddr,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReviewServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReviewServer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(AtomicUsize::new(0));
        let (seen, count) = (bodies.clone(), requests.clone());
        let task = tokio::spawn(kubeplex_net::serve(listener, move |req: Request<_>| {
            let (seen, count) = (seen.clone(), count.clone());
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                let path = req.uri().path().to_string();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
                seen.lock().unwrap().push(review.clone());
                let answer: &[u8] = if path.ends_with("/tokenreviews") {
                    if review["spec"]["token"] == "good" {
                        fixture!("tokenreview-valid")
                    } else {
                        fixture!("tokenreview-invalid")
                    }
                } else if review["spec"]["resourceAttributes"]["namespace"] == "fx2" {
                    fixture!("sar-list-allowed")
                } else {
                    fixture!("sar-list-denied")
                };
                http::Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(answer)))
                    .unwrap()
            }
        }));
        ReviewServer { addr, bodies, requests, task }
    }

    fn reviews(&self, config: ReviewConfig) -> (Reviews, ReviewMetrics, TempDir) {
        let dir = TempDir::new("review");
        let kubeconfig = dir.write(
            "kubeconfig",
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{}'}}}}]\nusers: [{{name: u, user: {{}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                self.addr
            ),
        );
        let upstream =
            Upstream::new(UpstreamConfig::resolve(Some(&kubeconfig), None).unwrap()).unwrap();
        let metrics = ReviewMetrics::new(&Registry::new()).unwrap();
        (Reviews::new(Arc::new(upstream), config, metrics.clone()), metrics, dir)
    }
}

fn reader() -> UserInfo {
    UserInfo {
        username: "system:serviceaccount:fx2:reader".into(),
        uid: "7fd04442-0fa4-40b5-927e-fc0fe5fc6819".into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:fx2".into(),
            "system:authenticated".into(),
        ],
        extra: BTreeMap::from([(
            "authentication.kubernetes.io/credential-id".to_string(),
            vec!["JTI=16a0f477-2f24-4942-8a5a-795743a1c28b".to_string()],
        )]),
    }
}

fn list_configmaps(namespace: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: "list".into(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: namespace.into(),
        ..ResourceAttributes::default()
    }
}

fn decisions(m: &ReviewMetrics, kind: &str, result: &str, source: &str) -> u64 {
    m.decisions.with_label_values(&[kind, result, source]).get()
}

#[tokio::test]
async fn a_token_is_reviewed_once_and_its_identity_cached() {
    let server = ReviewServer::start().await;
    let (reviews, metrics, _dir) = server.reviews(ReviewConfig::default());
    for _ in 0..20 {
        assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    }
    assert_eq!(reviews.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
    assert_eq!(reviews.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
    assert_eq!(server.requests.load(Ordering::SeqCst), 2, "one review per token");
    assert_eq!(decisions(&metrics, "token", "authenticated", "review"), 1);
    assert_eq!(decisions(&metrics, "token", "authenticated", "cache"), 19);
    assert_eq!(decisions(&metrics, "token", "invalid", "cache"), 1);
    let sent = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(sent["kind"], "TokenReview");
    assert_eq!(sent["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(sent["spec"]["token"], "good");
}

#[tokio::test]
async fn concurrent_reads_of_one_identity_share_one_access_review() {
    let server = ReviewServer::start().await;
    let (reviews, metrics, _dir) = server.reviews(ReviewConfig::default());
    let reviews = Arc::new(reviews);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let reviews = reviews.clone();
            tokio::spawn(async move { reviews.authorize(&reader(), &list_configmaps("fx2")).await })
        })
        .collect();
    for t in tasks {
        let decision = t.await.unwrap().unwrap();
        assert!(decision.allowed);
        assert!(decision.reason.starts_with("RBAC: allowed by RoleBinding"));
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
    assert_eq!(decisions(&metrics, "access", "allowed", "review"), 1);
    assert_eq!(decisions(&metrics, "access", "allowed", "cache"), 49);
    // The review carries the whole identity and the read, as the apiserver's webhook sends it.
    let sent = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(sent["kind"], "SubjectAccessReview");
    assert_eq!(sent["spec"]["user"], "system:serviceaccount:fx2:reader");
    assert_eq!(sent["spec"]["uid"], "7fd04442-0fa4-40b5-927e-fc0fe5fc6819");
    assert_eq!(sent["spec"]["groups"][2], "system:authenticated");
    assert_eq!(
        sent["spec"]["extra"]["authentication.kubernetes.io/credential-id"][0],
        "JTI=16a0f477-2f24-4942-8a5a-795743a1c28b"
    );
    assert_eq!(
        sent["spec"]["resourceAttributes"],
        serde_json::json!({"verb": "list", "group": "", "version": "v1", "resource": "configmaps", "namespace": "fx2"})
    );
}

#[tokio::test]
async fn selectors_are_part_of_the_question_and_of_the_cache_key() {
    let server = ReviewServer::start().await;
    let (reviews, _metrics, _dir) = server.reviews(ReviewConfig::default());
    let node = UserInfo {
        username: "system:node:fx2-node-0".into(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        ..UserInfo::default()
    };
    let own_pods = ResourceAttributes {
        verb: "list".into(),
        version: "v1".into(),
        resource: "pods".into(),
        field_selector: Some("spec.nodeName=fx2-node-0".into()),
        label_selector: Some("app=web".into()),
        ..ResourceAttributes::default()
    };
    let all_pods =
        ResourceAttributes { field_selector: None, label_selector: None, ..own_pods.clone() };
    reviews.authorize(&node, &own_pods).await.unwrap();
    reviews.authorize(&node, &all_pods).await.unwrap();
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        2,
        "a different selector is a different read"
    );
    let sent = server.bodies.lock().unwrap().clone();
    assert_eq!(
        sent[0]["spec"]["resourceAttributes"]["fieldSelector"],
        serde_json::json!({"rawSelector": "spec.nodeName=fx2-node-0"})
    );
    assert_eq!(
        sent[0]["spec"]["resourceAttributes"]["labelSelector"],
        serde_json::json!({"rawSelector": "app=web"})
    );
    assert!(sent[1]["spec"]["resourceAttributes"].get("fieldSelector").is_none());
}

#[tokio::test]
async fn denials_are_remembered_for_less_time_than_grants() {
    let server = ReviewServer::start().await;
    let config = ReviewConfig {
        allowed_ttl: Duration::from_secs(60),
        denied_ttl: Duration::from_millis(200),
        ..ReviewConfig::default()
    };
    let (reviews, _metrics, _dir) = server.reviews(config);
    let denied = reviews.authorize(&reader(), &list_configmaps("fx2-other")).await.unwrap();
    assert!(!denied.allowed);
    reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap();
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_millis(400)).await;
    reviews.authorize(&reader(), &list_configmaps("fx2-other")).await.unwrap();
    reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap();
    assert_eq!(server.requests.load(Ordering::SeqCst), 3, "only the denial was asked again");
}

#[tokio::test]
async fn a_failed_review_is_an_error_and_is_not_cached() {
    // Nothing listens there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut server = ReviewServer::start().await;
    server.addr = addr;
    let (reviews, metrics, _dir) = server.reviews(ReviewConfig::default());
    for _ in 0..2 {
        assert!(reviews.authenticate("good").await.is_err());
        assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.is_err());
    }
    assert_eq!(decisions(&metrics, "token", "error", "review"), 2);
    assert_eq!(decisions(&metrics, "access", "error", "review"), 2);
}

#[tokio::test]
async fn the_caches_are_bounded() {
    let server = ReviewServer::start().await;
    let config = ReviewConfig { max_entries: 10, ..ReviewConfig::default() };
    let (reviews, _metrics, _dir) = server.reviews(config);
    for i in 0..100 {
        reviews.authenticate(&format!("token-{i}")).await.unwrap();
        reviews.authorize(&reader(), &list_configmaps(&format!("ns-{i}"))).await.unwrap();
    }
    reviews.tokens.run_pending_tasks().await;
    reviews.access.run_pending_tasks().await;
    assert!(reviews.tokens.entry_count() <= 10, "{}", reviews.tokens.entry_count());
    assert!(reviews.access.entry_count() <= 10, "{}", reviews.access.entry_count());
}
