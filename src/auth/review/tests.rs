//! Reviews against a loopback upstream answering with kube-apiserver 1.36's captured reviews.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;
use std::time::Duration;

use prometheus::Registry;

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
    /// While set, every review is answered 503, as a load balancer with no apiserver behind it
    /// answers.
    down: Arc<AtomicBool>,
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
        let down = Arc::new(AtomicBool::new(false));
        let (seen, count, is_down) = (bodies.clone(), requests.clone(), down.clone());
        let task = tokio::spawn(kubeplex_net::serve(listener, move |req: Request<_>| {
            let (seen, count, is_down) = (seen.clone(), count.clone(), is_down.clone());
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                if is_down.load(Ordering::SeqCst) {
                    return http::Response::builder()
                        .status(503)
                        .body(Full::new(Bytes::from_static(b"no healthy upstream")))
                        .unwrap();
                }
                let path = req.uri().path().to_string();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
                seen.lock().unwrap().push(review.clone());
                let answer: &[u8] = if path.ends_with("/tokenreviews") {
                    if review["spec"]["token"].as_str().is_some_and(|t| t.starts_with("good")) {
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
        ReviewServer { addr, bodies, requests, down, task }
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

/// A review whose connection breaks under it is asked again on a fresh one: the first
/// connection to the upstream is closed once the request has been read.
#[tokio::test]
async fn a_review_whose_connection_broke_is_asked_again() {
    let server = ReviewServer::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    let behind = server.addr;
    let relay = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut first = true;
        while let Ok((mut conn, _)) = listener.accept().await {
            if std::mem::take(&mut first) {
                let mut head = [0u8; 64];
                let _ = conn.read(&mut head).await;
                drop(conn);
                continue;
            }
            tokio::spawn(async move {
                let Ok(mut upstream) = tokio::net::TcpStream::connect(behind).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
            });
        }
    });
    let mut broken = ReviewServer::start().await;
    broken.addr = front;
    let (reviews, metrics, _dir) = broken.reviews(ReviewConfig::default());
    let decision = reviews.authorize(&reader(), &list_configmaps("fx2")).await;
    assert!(decision.as_ref().is_ok_and(|d| d.allowed), "{decision:?}");
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        1,
        "answered once, on the second connection"
    );
    assert_eq!(decisions(&metrics, "access", "error", "review"), 0);
    relay.abort();
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
    reviews.known_tokens.run_pending_tasks().await;
    reviews.known_access.run_pending_tasks().await;
    assert!(reviews.known_tokens.entry_count() <= 10);
    assert!(reviews.known_access.entry_count() <= 10);
}

/// TTLs far shorter than the outages of the tests below.
fn short_ttls() -> ReviewConfig {
    ReviewConfig {
        token_ttl: Duration::from_millis(150),
        invalid_token_ttl: Duration::from_millis(150),
        allowed_ttl: Duration::from_millis(150),
        denied_ttl: Duration::from_millis(150),
        ..ReviewConfig::default()
    }
}

/// A JWT-shaped token the review server calls valid, whose `exp` is `exp` (Unix seconds).
fn jwt(exp: u64) -> String {
    use base64::Engine;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::json!({"iss": "kubernetes/serviceaccount", "exp": exp}).to_string());
    format!("good.{claims}.c2lnbmF0dXJl")
}

#[tokio::test]
async fn the_last_answers_stand_in_for_reviews_while_the_upstream_is_unreachable() {
    let server = ReviewServer::start().await;
    let (reviews, metrics, _dir) = server.reviews(short_ttls());
    let now = crate::cache::clock::unix_now();
    let (long_lived, expiring) = (jwt(now + 3600), jwt(now + 1));
    assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    assert_eq!(reviews.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
    assert_eq!(reviews.authenticate(&long_lived).await.unwrap(), TokenIdentity::User(reader()));
    assert_eq!(reviews.authenticate(&expiring).await.unwrap(), TokenIdentity::User(reader()));
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    assert!(!reviews.authorize(&reader(), &list_configmaps("fx3")).await.unwrap().allowed);

    // The upstream goes away for far longer than every TTL.
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let before = server.requests.load(Ordering::SeqCst);
    for _ in 0..10 {
        assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
        assert_eq!(reviews.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
        assert_eq!(reviews.authenticate(&long_lived).await.unwrap(), TokenIdentity::User(reader()));
        let allowed = reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap();
        assert!(allowed.allowed);
        assert!(allowed.reason.starts_with("RBAC: allowed by RoleBinding"), "the reason kept");
        assert!(!reviews.authorize(&reader(), &list_configmaps("fx3")).await.unwrap().allowed);
    }
    // A JWT past its `exp`, and what was never asked, have no answer to stand in.
    assert!(matches!(
        reviews.authenticate(&expiring).await,
        Err(ReviewError::Status { status: 503 })
    ));
    assert!(reviews.authenticate("good-never-seen").await.is_err());
    assert!(reviews.authorize(&reader(), &list_configmaps("fx4")).await.is_err());
    // Reviews were tried again at most once a second, not once per read.
    let tried = server.requests.load(Ordering::SeqCst) - before;
    assert!((1..=4).contains(&tried), "{tried} reviews tried in the outage");
    assert_eq!(decisions(&metrics, "token", "authenticated", "last_known"), 20);
    assert_eq!(decisions(&metrics, "token", "invalid", "last_known"), 10);
    assert_eq!(decisions(&metrics, "access", "allowed", "last_known"), 10);
    assert_eq!(decisions(&metrics, "access", "denied", "last_known"), 10);

    // Back: reviews are asked again (after at most one retry interval), and answered.
    server.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(RETRY_INTERVAL).await;
    let before = server.requests.load(Ordering::SeqCst);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx4")).await.is_ok());
    assert_eq!(server.requests.load(Ordering::SeqCst) - before, 2);
    assert_eq!(decisions(&metrics, "access", "allowed", "review"), 2);
}

#[tokio::test]
async fn an_answer_no_longer_recent_when_the_upstream_last_answered_is_not_used() {
    // Recent: within its TTL plus `outage_recent` (here 100 ms) of the upstream's last answer.
    let config = ReviewConfig { outage_recent: Duration::from_millis(100), ..short_ttls() };
    let server = ReviewServer::start().await;
    let (reviews, _metrics, _dir) = server.reviews(config);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The upstream answers something else well after that grant expired: the policy it
    // answers with from then on may no longer grant it.
    assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.is_err());
    assert!(reviews.authenticate("good").await.is_ok(), "recent when it last answered");

    // With the default 15 minutes, the same grant stands in: an agent that reviewed its watch
    // a few minutes before the outage (past the TTL) is answered through it.
    let server = ReviewServer::start().await;
    let (reviews, _metrics, _dir) = server.reviews(short_ttls());
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
}

#[tokio::test]
async fn the_last_answers_are_used_for_the_outage_grace_at_most_and_never_when_it_is_zero() {
    let server = ReviewServer::start().await;
    let config = ReviewConfig { outage_grace: Duration::from_millis(600), ..short_ttls() };
    // (The grace runs from the upstream's last answer, whatever the answers' age.)
    let (reviews, _metrics, _dir) = server.reviews(config);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.is_err());

    let server = ReviewServer::start().await;
    let config = ReviewConfig { outage_grace: Duration::ZERO, ..short_ttls() };
    let (reviews, _metrics, _dir) = server.reviews(config);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.is_err());
}

#[test]
fn only_an_upstream_that_is_not_there_is_an_outage() {
    // A refusal (kubeplex may not create reviews), a failure of the apiserver itself or an
    // answer kubeplex cannot read is the cluster answering: the last answers do not stand in.
    for answered in [
        ReviewError::Status { status: 403 },
        ReviewError::Status { status: 500 },
        ReviewError::Status { status: 429 },
        ReviewError::Decode("x".into()),
    ] {
        assert!(!answered.unreachable(), "{answered}");
    }
    for gone in [
        ReviewError::Status { status: 502 },
        ReviewError::Status { status: 503 },
        ReviewError::Status { status: 504 },
        ReviewError::Transport("connection refused".into()),
    ] {
        assert!(gone.unreachable(), "{gone}");
    }
}

#[test]
fn jwt_expiry_is_read_from_the_claims() {
    let now = crate::cache::clock::unix_now();
    assert!(jwt_expired(&jwt(now - 10)));
    assert!(!jwt_expired(&jwt(now + 3600)));
    for opaque in ["good", "a.b", "a.!!!.c", "a.e30.c", "a.b.c.d", "", "..", "x.bm90IGpzb24.y"] {
        assert!(!jwt_expired(opaque), "{opaque:?}");
    }
}

#[tokio::test]
async fn saved_answers_stand_in_after_a_restart_during_an_outage() {
    let server = ReviewServer::start().await;
    let (reviews, _metrics, _dir) = server.reviews(short_ttls());
    assert!(reviews.export().is_none(), "nothing to save yet");
    assert_eq!(reviews.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    assert_eq!(reviews.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
    assert!(reviews.authorize(&reader(), &list_configmaps("fx2")).await.unwrap().allowed);
    assert!(!reviews.authorize(&reader(), &list_configmaps("fx3")).await.unwrap().allowed);
    let saved = reviews.export().expect("answers to save");
    let text = String::from_utf8_lossy(&saved);
    assert!(!text.contains("\"good\""), "a token is saved as its hash only: {text}");

    // A new process, the upstream down from its start.
    server.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (restarted, metrics, _dir2) = server.reviews(short_ttls());
    assert!(restarted.authorize(&reader(), &list_configmaps("fx2")).await.is_err(), "not yet");
    tokio::time::sleep(RETRY_INTERVAL).await;
    assert_eq!(restarted.import(&saved).await, Ok(4));
    assert_eq!(restarted.authenticate("good").await.unwrap(), TokenIdentity::User(reader()));
    assert_eq!(restarted.authenticate("bad").await.unwrap(), TokenIdentity::Invalid);
    let allowed = restarted.authorize(&reader(), &list_configmaps("fx2")).await.unwrap();
    assert!(allowed.allowed && allowed.reason.starts_with("RBAC: allowed by RoleBinding"));
    assert!(!restarted.authorize(&reader(), &list_configmaps("fx3")).await.unwrap().allowed);
    assert!(restarted.authorize(&reader(), &list_configmaps("fx4")).await.is_err());
    assert!(restarted.authenticate("good-never-seen").await.is_err());
    assert_eq!(decisions(&metrics, "access", "allowed", "last_known"), 1);

    // Saved answers whose use is over (their TTL and the grace both past) are not taken in;
    // a damaged file is refused whole.
    let short_grace = ReviewConfig {
        outage_grace: Duration::from_millis(100),
        outage_recent: Duration::ZERO,
        ..short_ttls()
    };
    let (late, _metrics, _dir3) = server.reviews(short_grace);
    assert_eq!(late.import(&saved).await, Ok(0));
    assert!(late.import(b"{\"tokens\": [").await.is_err());
    assert!(late.import(b"[]").await.is_err());
    let odd = br#"{"answered_at_ms": 1, "tokens": [{"sha256": "zz", "user": null, "expires_at_ms": 18446744073709551615}], "access": []}"#;
    assert_eq!(late.import(odd).await, Ok(0), "a malformed hash is skipped");
}
