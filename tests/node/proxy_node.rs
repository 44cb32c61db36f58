//! The node-local mode against the fake apiserver with RBAC, the Node authorizer, TokenReview
//! and SubjectAccessReview (`kubeplex_sim::auth`): for several identities — a ServiceAccount
//! token, a node's client certificate, a token with no rights, anonymous, a bad token, a
//! certificate of another CA — every read through kubeplex gets the status the apiserver gives
//! that identity directly, what is allowed is served from the cache, and nothing is ever
//! served from the cache for a request the upstream would refuse.

use kubeplex_test_support as support;
use std::time::{Duration, Instant};

use support::node::{Node, NodeOptions, ADMIN_TOKEN, NOBODY_TOKEN, READER_TOKEN, VIEWER_TOKEN};
use support::tls::{Credentials, Pki, TlsClient};

/// How a test identity reaches kubeplex, and how the same identity reaches the apiserver
/// directly (a certificate identity by an admin impersonating it, as the apiserver would see
/// the certificate's user and groups).
struct Who {
    name: &'static str,
    through: Credentials,
    direct: Vec<(&'static str, String)>,
}

fn identities(pki: &Pki, other: &Pki) -> Vec<Who> {
    let bearer = |t: &str| vec![("Authorization", format!("Bearer {t}"))];
    vec![
        Who {
            name: "reader",
            through: Credentials::token(READER_TOKEN),
            direct: bearer(READER_TOKEN),
        },
        Who {
            name: "viewer",
            through: Credentials::token(VIEWER_TOKEN),
            direct: bearer(VIEWER_TOKEN),
        },
        Who {
            name: "node-0",
            through: Credentials::cert(pki.client("system:node:node-0", &["system:nodes"])),
            direct: vec![
                ("Authorization", format!("Bearer {ADMIN_TOKEN}")),
                ("Impersonate-User", "system:node:node-0".into()),
                ("Impersonate-Group", "system:nodes".into()),
            ],
        },
        Who {
            name: "nobody",
            through: Credentials::token(NOBODY_TOKEN),
            direct: bearer(NOBODY_TOKEN),
        },
        Who { name: "anonymous", through: Credentials::none(), direct: vec![] },
        Who { name: "bad-token", through: Credentials::token("forged"), direct: bearer("forged") },
    ]
    .into_iter()
    .chain(std::iter::once(Who {
        // A certificate the cluster CA did not sign: 401 from kubeplex; the apiserver would
        // refuse it the same way, which a plain-HTTP fake cannot show, so its direct twin is a
        // token the apiserver does not know.
        name: "foreign-cert",
        through: Credentials::cert(other.client("system:node:node-0", &["system:nodes"])),
        direct: bearer("forged"),
    }))
    .collect()
}

/// Every kind of read: own namespace, another, cluster-wide, by name, node-narrowed, watches.
fn reads() -> Vec<&'static str> {
    vec![
        "/api/v1/namespaces/team-0/configmaps?resourceVersion=0",
        "/api/v1/namespaces/team-1/configmaps?resourceVersion=0",
        "/api/v1/configmaps?resourceVersion=0",
        "/api/v1/namespaces/team-0/configmaps/config-0?resourceVersion=0",
        "/api/v1/namespaces/team-1/configmaps/config-1?resourceVersion=0",
        "/api/v1/namespaces/team-0/pods?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-0",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1",
        "/api/v1/namespaces/team-0/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1&fieldSelector=spec.nodeName%3Dnode-0",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_identity_gets_the_apiservers_answer_and_only_allowed_reads_come_from_the_cache() {
    let node = Node::start().await;
    let other = Pki::new("not-the-cluster-ca");
    let upstream = node.sim.addr().to_string();
    let mut allowed = 0;
    let mut refused = 0;
    // Refusals of a certificate kubeplex cannot verify: its own 401, as the apiserver's TLS
    // would refuse it (no upstream request can carry that certificate).
    let mut unverified = 0;
    let mut table = Vec::new();
    for who in identities(&node.pki, &other) {
        let client = TlsClient::new(&node.pki.ca_pem, &who.through, false);
        for path in reads() {
            let headers: Vec<(&str, &str)> = std::iter::once(("Accept", "application/json"))
                .chain(who.direct.iter().map(|(k, v)| (*k, v.as_str())))
                .collect();
            let direct = support::request(&upstream, http::Method::GET, path, &headers, None).await;
            let through = client.get(&node.addr(), path).await;
            table.push(format!("{:12} {} {} {}", who.name, direct.status, through.status, path));
            assert_eq!(through.status, direct.status, "{}: {path}", who.name);
            if direct.status == 200 {
                allowed += 1;
                if !path.contains("watch=1") {
                    assert_eq!(
                        through.body, direct.body,
                        "{}: {path}: the apiserver's bytes",
                        who.name
                    );
                }
            } else {
                refused += 1;
                if who.name == "foreign-cert" {
                    unverified += 1;
                }
                // The refusal is the apiserver's Status, byte for byte.
                assert_eq!(through.body, direct.body, "{}: {path}", who.name);
            }
        }
    }
    eprintln!("{}", table.join("\n"));
    // Each identity is allowed something and refused something, or the matrix proves little.
    assert!(allowed >= 18 && refused >= 60, "allowed {allowed}, refused {refused}");
    let (from_cache, cache_not_ok) = node.served("cache");
    let (denied, _) = node.served("denied");
    let (_, upstream_not_ok) = node.served("upstream");
    assert_eq!(cache_not_ok, 0, "nothing refused came from the cache");
    assert_eq!(from_cache, allowed, "every allowed read was served from the cache");
    // A refusal is never replayed from kubeplex's memory: every read it was not granted went
    // upstream, and the apiserver refused it then and there.
    assert_eq!(denied, unverified, "kubeplex refused only certificates it cannot verify");
    assert_eq!(upstream_not_ok, refused - unverified, "every other refusal was the apiserver's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_is_reviewed_once_for_many_reads() {
    let node = Node::start().await;
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::token(READER_TOKEN), true);
    let path = "/api/v1/namespaces/team-0/configmaps?resourceVersion=0";
    // Through a pool tier, the pool has reviewed the node tier's own reads (its caches) at
    // start: counted from here.
    let before = (node.sim_reviews("tokenreview"), node.sim_reviews("subjectaccessreview"));
    let first = client.get(&node.addr(), path).await;
    assert_eq!(first.status, 200);
    let (tokens, accesses) =
        (node.sim_reviews("tokenreview"), node.sim_reviews("subjectaccessreview"));
    assert_eq!((tokens - before.0, accesses - before.1), (1, 1));
    for _ in 0..20 {
        let again = client.get(&node.addr(), path).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.body, first.body);
    }
    assert_eq!(node.sim_reviews("tokenreview"), tokens, "the token's identity is cached");
    assert_eq!(node.sim_reviews("subjectaccessreview"), accesses, "the decision is cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_keeps_the_clients_identity() {
    let node = Node::start().await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let as_node = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), true);
    let as_reader = TlsClient::new(&node.pki.ca_pem, &Credentials::token(READER_TOKEN), true);
    let anonymous = TlsClient::new(&node.pki.ca_pem, &Credentials::none(), true);
    let addr = node.addr();
    // Not cacheable (a consistent read of a quiet resource passes through, and the node's own
    // Node object), so these reach the upstream with the client's identity.
    let own = as_node.get(&addr, "/api/v1/nodes/node-0").await;
    assert_eq!(own.status, 200, "the node reads its own Node, impersonated");
    let other = as_node.get(&addr, "/api/v1/nodes/node-1").await;
    assert_eq!(other.status, 403);
    assert!(other.json()["message"].as_str().unwrap().contains(r#"User "system:node:node-0""#));
    let mine = as_reader.get(&addr, "/api/v1/namespaces/team-0/services").await;
    assert_eq!(mine.status, 403, "the reader's token went upstream as is: {}", mine.json());
    assert!(mine.json()["message"]
        .as_str()
        .unwrap()
        .contains(r#"User "system:serviceaccount:team-0:reader""#));
    let anon = anonymous.get(&addr, "/api/v1/namespaces/team-0/services").await;
    assert_eq!(anon.status, 403);
    assert!(anon.json()["message"].as_str().unwrap().contains(r#"User "system:anonymous""#));
    // A certificate user's own impersonation is reviewed for it, not for kubeplex.
    let impersonating = as_node
        .request(
            &addr,
            http::Method::GET,
            "/api/v1/namespaces/team-0/configmaps",
            &[("Accept", "application/json"), ("Impersonate-User", "admin")],
        )
        .await;
    assert_eq!(impersonating.status, 403);
    assert_eq!(
        impersonating.json()["message"],
        r#"users "admin" is forbidden: User "system:node:node-0" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
}

/// Right after a pod is bound to a node, the Node authorizer refuses that node's reads of what
/// the pod uses for a moment (its graph catches up: the fake apiserver lags by the 0.9 s
/// measured on 1.36). Kubelets retry. Through kubeplex such a read is refused exactly as long as
/// the apiserver refuses it — its refusal passed through, never replayed from kubeplex's
/// memory — and once the apiserver allows it, it is reviewed again and served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_refused_for_a_moment_is_refused_no_longer_than_the_apiserver_refuses_it() {
    // No hold (`nodeGraphLag: 0s`): the refusals themselves, as when no cache of pods shows
    // the binding.
    let node =
        Node::start_with(NodeOptions { graph_lag: Duration::ZERO, ..Default::default() }).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    let direct = |path: &str| {
        let upstream = node.sim.addr().to_string();
        let path = path.to_string();
        async move {
            let headers = [
                ("Accept", "application/json".to_string()),
                ("Authorization", format!("Bearer {ADMIN_TOKEN}")),
                ("Impersonate-User", "system:node:node-0".into()),
                ("Impersonate-Group", "system:nodes".into()),
            ];
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            support::request(&upstream, http::Method::GET, &path, &headers, None).await
        }
    };
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fresh", "namespace": "team-0"}, "data": {"k": "v"}}))
        .expect("create");
    // The kubelet's read of one ConfigMap: a list by name, answered by the configmaps cache.
    let path = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dfresh&resourceVersion=0";
    let before = client.get(&node.addr(), path).await;
    assert_eq!(before.status, 403, "no pod of node-0 uses it yet");
    // Now one does (a pod created bound to node-0, as the scheduler's binding leaves it).
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "uses-fresh", "namespace": "team-0"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
                "volumes": [{"name": "v", "configMap": {"name": "fresh"}}]}}))
        .expect("create");
    let bound = std::time::Instant::now();
    let (mut direct_allowed, mut through_allowed) = (None, None);
    while bound.elapsed() < std::time::Duration::from_secs(5) {
        let d = direct(path).await;
        let t = client.get(&node.addr(), path).await;
        if d.status == 200 && direct_allowed.is_none() {
            direct_allowed = Some(bound.elapsed());
        }
        if t.status == 200 && through_allowed.is_none() {
            through_allowed = Some(bound.elapsed());
            // The graph may have caught up between the direct read and this one (it only
            // moves forward): then the apiserver's answer now is the one to compare with.
            let now = if d.status == 200 { d.body.clone() } else { direct(path).await.body };
            assert_eq!(t.body, now, "the apiserver's bytes");
        }
        if t.status != 200 {
            assert_eq!(t.status, d.status, "refused as the apiserver refuses it");
            assert_eq!(t.body, d.body, "the apiserver's own refusal");
        }
        if through_allowed.is_some() && direct_allowed.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let direct_allowed = direct_allowed.expect("the apiserver allows it once its graph caught up");
    let through_allowed = through_allowed.expect("kubeplex allows it too");
    assert!(direct_allowed >= std::time::Duration::from_millis(500), "{direct_allowed:?}");
    assert!(
        through_allowed <= direct_allowed + std::time::Duration::from_millis(200),
        "refused through kubeplex until {through_allowed:?}, by the apiserver until {direct_allowed:?}"
    );
    assert_eq!(node.served("denied").0, 0, "no refusal was kubeplex's own");
    // Granted now: the next reads come from the cache.
    let (from_cache, _) = node.served("cache");
    for _ in 0..3 {
        assert_eq!(client.get(&node.addr(), path).await.status, 200);
    }
    assert_eq!(node.served("cache").0, from_cache + 3, "served from the cache once granted");
}

/// With `KUBEPLEX_TEST_TIERS=2` (scripts/test-tiers.sh) every test here runs through a node tier
/// in front of a pool tier. This one shows the chain is real: the node tier's caches are filled
/// from the pool (which authenticated its certificate), and a kubelet's reads of its own pods
/// and of another node's are answered as directly. In one tier it checks the node tier alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_pool_tier_the_node_tiers_caches_are_filled_from_the_pool() {
    let node = Node::start().await;
    let text = |proxy: &kubeplex::serve::Proxy| -> String {
        String::from_utf8_lossy(&proxy.state.metrics.render()).into_owned()
    };
    let active: Vec<String> = text(&node.proxy)
        .lines()
        .filter(|l| l.starts_with("kubeplex_upstream_active{") && l.ends_with(" 1"))
        .map(str::to_string)
        .collect();
    assert_eq!(active.len(), 1, "{active:?}");
    match &node.behind {
        Some(pool) => {
            assert!(active[0].contains(&pool.addr.to_string()), "{active:?}");
            // The node tier's list+watch of pods and configmaps were the pool's to answer,
            // from its cache, as the node tiers' certificate identity.
            let pool_metrics = text(pool);
            let from_cache: u64 = pool_metrics
                .lines()
                .filter(|l| {
                    l.starts_with("kubeplex_requests_total{") && l.contains("source=\"cache\"")
                })
                .filter(|l| l.contains("verb=\"WATCH\"") || l.contains("verb=\"LIST\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .map(|v| v as u64)
                .sum();
            assert!(from_cache >= 2, "the pool served the node tier's caches:\n{pool_metrics}");
        }
        None => assert!(active[0].contains(&node.sim.addr().to_string()), "{active:?}"),
    }
    let kubelet = node.pki.client("system:node:node-0", &["system:nodes"]);
    let kubelet = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(kubelet), true);
    let own = kubelet.get(&node.addr(), "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0").await;
    assert_eq!(own.status, 200);
    let items = own.json()["items"].as_array().unwrap().len();
    let want = node.sim.select("", "pods", None, "fieldSelector=spec.nodeName%3Dnode-0").unwrap();
    assert!(items > 0);
    assert_eq!(items, want.len());
    let other =
        kubelet.get(&node.addr(), "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1").await;
    assert_eq!(other.status, 403, "{}", other.json());
    // The apiserver's own refusal of the kubelet (its Node authorizer's reason), reached through
    // every tier as the kubelet.
    let message = other.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(r#"User "system:node:node-0""#), "{message}");
    assert!(
        message.contains("can only list/watch pods with spec.nodeName field selector"),
        "{message}"
    );
}

/// What a pool tier does for a node tier that vouches for its kubelet: a certificate client
/// impersonating `system:node:node-0` is answered from the cache as that kubelet — once the
/// apiserver agreed the client may impersonate it — and refused what the kubelet is refused. A
/// client that may not impersonate gets the apiserver's refusal, never the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_as_an_impersonated_kubelet_is_answered_from_the_cache_as_the_kubelet() {
    use http::Method;
    let node = Node::start().await;
    if node.behind.is_some() {
        // A pool's side of a node tier that presents a certificate and the legacy
        // impersonation; through two tiers the front is a node tier bound to its node.
        return;
    }
    let tier = node.pki.client("kubeplex-node-tier", &[support::node::NODE_TIERS_GROUP]);
    let tier = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(tier), true);
    let kubelet = node.pki.client("system:node:node-0", &["system:nodes"]);
    let kubelet = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(kubelet), true);
    let as_kubelet = [
        ("Accept", "application/json"),
        ("Impersonate-User", "system:node:node-0"),
        ("Impersonate-Group", "system:nodes"),
    ];
    let addr = node.addr();
    let own = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    let cached_before = node.served("cache").0;
    let vouched = tier.request(&addr, Method::GET, own, &as_kubelet).await;
    assert_eq!(vouched.status, 200, "{}", String::from_utf8_lossy(&vouched.body));
    assert_eq!(node.served("cache").0, cached_before + 1, "answered from the cache");
    let itself = kubelet.get(&addr, own).await;
    assert_eq!(vouched.body, itself.body, "what the kubelet itself gets");
    // Another node's pods: the Node authorizer's refusal, for the kubelet.
    let other = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=0";
    let refused = tier.request(&addr, Method::GET, other, &as_kubelet).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.body, kubelet.get(&addr, other).await.body);
    // A client that may not impersonate: the apiserver's impersonation refusal.
    let nobody = node.pki.client("someone", &["some-group"]);
    let nobody = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(nobody), true);
    let cached_before = node.served("cache").0;
    let denied = nobody.request(&addr, Method::GET, own, &as_kubelet).await;
    assert_eq!(denied.status, 403, "{}", String::from_utf8_lossy(&denied.body));
    let message = denied.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(r#"User "someone" cannot impersonate resource "users""#), "{message}");
    assert_eq!(node.served("cache").0, cached_before, "nothing from the cache");
}

/// A kubelet's watch of a ConfigMap refused for a moment (the Node authorizer's graph not yet
/// knowing the pod that uses it) and retried: once the apiserver grants it, the retry is
/// answered from the cache — the remembered denial is asked again for a watch — rather than
/// passed through to hold an apiserver watch for its whole life.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_refused_for_a_moment_is_answered_from_the_cache_once_granted() {
    // No hold (`nodeGraphLag: 0s`): the refused watch's retries themselves.
    let node =
        Node::start_with(NodeOptions { graph_lag: Duration::ZERO, ..Default::default() }).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fresh-w", "namespace": "team-0"}, "data": {"k": "v"}}))
        .expect("create");
    let path = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dfresh-w&watch=1&resourceVersion=0&timeoutSeconds=1";
    assert_eq!(client.get(&node.addr(), path).await.status, 403, "no pod of node-0 uses it");
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "uses-fresh-w", "namespace": "team-0"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
                "volumes": [{"name": "v", "configMap": {"name": "fresh-w"}}]}}))
        .expect("create");
    let started = std::time::Instant::now();
    let granted = loop {
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "never granted");
        let (cache, upstream) = (node.served("cache").0, node.served("upstream").0);
        let answer = client.get(&node.addr(), path).await;
        if answer.status == 200 {
            break (answer, node.served("cache").0 - cache, node.served("upstream").0 - upstream);
        }
        assert_eq!(answer.status, 403, "refused as the apiserver refuses it");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let (answer, mut from_cache, mut passed) = granted;
    assert!(String::from_utf8_lossy(&answer.body).contains("\"fresh-w\""));
    if (from_cache, passed) == (0, 1) {
        // The apiserver's graph caught up between kubeplex's review of this read (refused) and
        // the read passed through (granted): that one answer was the apiserver's, as it should
        // be (a refusal is not answered from memory). Through two tiers the review goes
        // through the pool, which widens that moment. The next read is the cache's.
        let (cache, upstream) = (node.served("cache").0, node.served("upstream").0);
        let again = client.get(&node.addr(), path).await;
        assert_eq!(again.status, 200);
        (from_cache, passed) =
            (node.served("cache").0 - cache, node.served("upstream").0 - upstream);
    }
    assert_eq!((from_cache, passed), (1, 0), "the granted watch came from the cache");
}

/// Node tiers in front of a pool each ask it for the same few discovery documents when they
/// start (what kubeplex needs to know of a resource it is asked for). kubeplex answers a
/// group-version's document from its own copy — the one its own decisions rest on — to a
/// client the apiserver lets read it (`get` of the path: system:discovery), with the
/// apiserver's bytes; a group-version the apiserver does not serve, and a client that may not
/// read discovery, get the apiserver's own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_documents_are_answered_from_kubeplexs_own_to_clients_that_may_read_them() {
    use http::Method;
    let node = Node::start().await;
    let kubelet = node.pki.client("system:node:node-0", &["system:nodes"]);
    let tier = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(kubelet), true);
    let upstream = node.sim.addr().to_string();
    let direct = |path: &'static str, token: Option<&'static str>| {
        let upstream = upstream.clone();
        async move {
            let auth = token.map(|t| format!("Bearer {t}"));
            let mut headers = vec![("Accept", "application/json")];
            if let Some(auth) = &auth {
                headers.push(("Authorization", auth.as_str()));
            }
            support::request(&upstream, Method::GET, path, &headers, None).await
        }
    };
    let counts = || (node.served("cache").0, node.served("upstream").0);

    // The core group-version: kubeplex caches pods and configmaps of it.
    let expected = direct("/api/v1", Some(ADMIN_TOKEN)).await;
    assert_eq!(expected.status, 200);
    let (cached, passed) = counts();
    for _ in 0..3 {
        let answer = tier.get(&node.addr(), "/api/v1").await;
        assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
        assert_eq!(answer.body, expected.body, "the apiserver's bytes");
        assert_eq!(
            answer.headers.get("content-type").and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
    }
    assert_eq!(counts(), (cached + 3, passed), "from kubeplex's own document");

    // A group-version kubeplex had not used: fetched once, for the readers asking meanwhile.
    let (cached, passed) = counts();
    let apps = direct("/apis/apps/v1", Some(ADMIN_TOKEN)).await;
    for _ in 0..2 {
        let answer = tier.get(&node.addr(), "/apis/apps/v1").await;
        assert_eq!((answer.status, answer.body), (200, apps.body.clone()));
    }
    assert_eq!(counts(), (cached + 2, passed));
    // One the apiserver does not serve, and a query: the apiserver's answers.
    let made_up = "/apis/made-up.example.com/v1";
    let unknown = tier.get(&node.addr(), made_up).await;
    let expected_unknown = direct(made_up, Some(ADMIN_TOKEN)).await;
    assert_eq!((unknown.status, unknown.body), (expected_unknown.status, expected_unknown.body));
    let with_query = tier.get(&node.addr(), "/api/v1?timeout=32s").await;
    assert_eq!(with_query.body, expected.body);
    assert_eq!(counts(), (cached + 2, passed + 2), "passed through");

    // Anonymous may not read discovery (1.36's default RBAC): the apiserver's refusal.
    let anonymous = TlsClient::new(&node.pki.ca_pem, &Credentials::none(), true);
    let (cached, passed) = counts();
    let refused = anonymous.get(&node.addr(), "/api/v1").await;
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.body, direct("/api/v1", None).await.body, "the apiserver's own refusal");
    assert_eq!(counts(), (cached, passed + 1));
}

/// Right after a pod is bound to its node the kubelet reads what the pod uses, and the Node
/// authorizer refuses those reads until its graph has caught up. Through kubeplex, which saw the
/// binding in its cache of pods, such a read goes upstream at once and, refused, is sent again
/// after short back-offs until the apiserver grants it: the kubelet gets the answer about when
/// the apiserver's graph caught up, with no refusal to retry on its own schedule — and long
/// before kubeplex's window (`nodeGraphLag`) ends. A read no new pod of the node can explain
/// (another namespace) is refused at once, by the apiserver, as before; one the apiserver
/// grants at once is not delayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_read_refused_right_after_a_binding_is_retried_until_the_apiserver_grants_it() {
    let (apiserver_lag, window) = (Duration::from_millis(1500), Duration::from_secs(6));
    let options =
        NodeOptions { graph_lag: window, apiserver_graph_lag: apiserver_lag, ..Default::default() };
    let node = Node::start_with(options).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    for ns in ["team-0", "team-1"] {
        node.sim
            .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "retried", "namespace": ns}, "data": {"k": "v"}}))
            .expect("create");
    }
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "uses-retried", "namespace": "team-0"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
                "volumes": [{"name": "v", "configMap": {"name": "retried"}}]}}))
        .expect("create");
    let created = Instant::now();
    // The kubelet sees its new pod (its watch of its pods, from kubeplex's cache).
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    while !String::from_utf8_lossy(&client.get(&node.addr(), pods).await.body)
        .contains("uses-retried")
    {
        assert!(created.elapsed() < Duration::from_secs(1), "kubeplex never saw the binding");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused_before = node.upstream_answered("configmaps", "403");
    // Another namespace's ConfigMap: no new pod of node-0 there, so not retried: the
    // apiserver's refusal, at once.
    let other = client.get(&node.addr(), "/api/v1/namespaces/team-1/configmaps/retried").await;
    assert_eq!(other.status, 403, "{}", String::from_utf8_lossy(&other.body));
    assert!(created.elapsed() < apiserver_lag, "the other read was not retried");
    assert_eq!(node.upstream_answered("configmaps", "403"), refused_before + 1);
    // The new pod's ConfigMap, by name as the kubelet's watch of it asks: refused by the
    // apiserver, sent again, and answered once its graph caught up.
    let named = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dretried&resourceVersion=0";
    let answer = client.get(&node.addr(), named).await;
    let answered = created.elapsed();
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    assert!(String::from_utf8_lossy(&answer.body).contains("\"retried\""));
    assert!(answered >= apiserver_lag, "granted only once the apiserver's graph caught up");
    assert!(
        answered < window - Duration::from_secs(2),
        "answered when the apiserver granted it ({answered:?}), not at the window's end"
    );
    // The pod itself, by name (the status manager's GET): granted now, at once.
    let pod = client.get(&node.addr(), "/api/v1/namespaces/team-0/pods/uses-retried").await;
    assert_eq!(pod.status, 200, "{}", String::from_utf8_lossy(&pod.body));
    assert_eq!(node.tiers_metric("kubeplex_auth_node_graph_retry_seconds_count", &[]), 1);
    assert_eq!(
        node.tiers_metric("kubeplex_auth_node_graph_retry_seconds_count", &[("result", "granted")]),
        1
    );
    // What the retries cost: one refused read, then reviews (refused by the apiserver) until
    // the grant — a handful, growing apart — and no refused read besides.
    let retries = node.tiers_metric("kubeplex_auth_node_graph_retry_requests_total", &[]);
    assert!((2..=10).contains(&retries), "{retries} retries");
    assert_eq!(node.upstream_answered("pods", "403"), 0);
    if node.behind.is_none() {
        assert_eq!(
            node.upstream_answered("configmaps", "403"),
            refused_before + 2,
            "the other namespace's read and the first send of this one"
        );
    }
    assert_eq!(node.served("denied").0, 0, "no refusal was kubeplex's own");
}

/// A kubelet's WatchList of a ConfigMap its new pod uses, refused by the Node authorizer's graph,
/// goes to the kubelet at once — the apiserver's own refusal, not sent again — as directly:
/// client-go's reflector answers a failed WatchList by listing at `resourceVersion=0` at once,
/// which the apiserver serves from its watch cache, where the WatchList it retried would have
/// waited for the consistent read it asks for. That list, refused in turn, is what kubeplex
/// sends again until the apiserver grants it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watchlist_goes_to_the_kubelet_at_once_and_its_fallback_list_is_retried() {
    let (apiserver_lag, window) = (Duration::from_millis(1500), Duration::from_secs(6));
    let options =
        NodeOptions { graph_lag: window, apiserver_graph_lag: apiserver_lag, ..Default::default() };
    let node = Node::start_with(options).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "listed", "namespace": "team-0"}, "data": {"k": "v"}}))
        .expect("create");
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "uses-listed", "namespace": "team-0"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
                "volumes": [{"name": "v", "configMap": {"name": "listed"}}]}}))
        .expect("create");
    let created = Instant::now();
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    while !String::from_utf8_lossy(&client.get(&node.addr(), pods).await.body)
        .contains("uses-listed")
    {
        assert!(created.elapsed() < Duration::from_secs(1), "kubeplex never saw the binding");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused_before = node.upstream_answered("configmaps", "403");
    // The kubelet's WatchList of the ConfigMap, as client-go sends it.
    let watch_list = "/api/v1/namespaces/team-0/configmaps?allowWatchBookmarks=true\
        &fieldSelector=metadata.name%3Dlisted&resourceVersionMatch=NotOlderThan\
        &sendInitialEvents=true&timeoutSeconds=300&watch=true";
    let refused = client.get(&node.addr(), watch_list).await;
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    let message = refused.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.ends_with("no relationship found between node 'node-0' and this object"));
    assert!(created.elapsed() < apiserver_lag, "passed on at once, not sent again");
    assert_eq!(node.tiers_metric("kubeplex_auth_node_graph_retry_requests_total", &[]), 0);
    // Its fallback list, as client-go sends it at once: refused too, sent again, and answered
    // once the apiserver's graph caught up.
    let list = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dlisted\
        &limit=500&resourceVersion=0";
    let answer = client.get(&node.addr(), list).await;
    let answered = created.elapsed();
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    assert!(String::from_utf8_lossy(&answer.body).contains("\"listed\""));
    assert!(answered >= apiserver_lag, "granted only once the apiserver's graph caught up");
    assert!(answered < window - Duration::from_secs(2), "not held to the window's end");
    assert_eq!(
        node.tiers_metric("kubeplex_auth_node_graph_retry_seconds_count", &[("result", "granted")]),
        1,
        "the list was retried; the WatchList was not"
    );
    if node.behind.is_none() {
        assert_eq!(
            node.upstream_answered("configmaps", "403"),
            refused_before + 2,
            "the WatchList and the first send of the list: what the kubelet costs directly"
        );
    }
    assert_eq!(node.served("denied").0, 0, "no refusal was kubeplex's own");
}

/// A read the apiserver refuses for longer than kubeplex's window after the binding
/// (`nodeGraphLag`) is sent again until the window ends, and the client gets the apiserver's
/// refusal of that moment — never a remembered one, and never later than the window plus one
/// send. The kubelet then retries on its own schedule, as it would directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_refused_past_the_window_gets_the_apiservers_refusal_when_the_window_ends() {
    let (apiserver_lag, window) = (Duration::from_secs(5), Duration::from_millis(900));
    let options =
        NodeOptions { graph_lag: window, apiserver_graph_lag: apiserver_lag, ..Default::default() };
    let node = Node::start_with(options).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    node.sim
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "late-graph", "namespace": "team-0"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}]}}))
        .expect("create");
    let created = Instant::now();
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    while !String::from_utf8_lossy(&client.get(&node.addr(), pods).await.body)
        .contains("late-graph")
    {
        assert!(created.elapsed() < window, "kubeplex never saw the binding");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let path = "/api/v1/namespaces/team-0/pods/late-graph";
    let refused = client.get(&node.addr(), path).await;
    let answered = created.elapsed();
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    let message = refused.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.ends_with("no relationship found between node 'node-0' and this object"));
    assert!(answered >= window - Duration::from_millis(100), "retried until the window's end");
    assert!(answered < apiserver_lag, "{answered:?}: not held past the window");
    // The apiserver still refuses it: the refusal was the apiserver's of that moment.
    let headers = [
        ("Accept", "application/json".to_string()),
        ("Authorization", format!("Bearer {ADMIN_TOKEN}")),
        ("Impersonate-User", "system:node:node-0".into()),
        ("Impersonate-Group", "system:nodes".into()),
    ];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let upstream = node.sim.addr().to_string();
    let direct = support::request(&upstream, http::Method::GET, path, &headers, None).await;
    assert_eq!(direct.status, 403);
    assert_eq!(refused.body, direct.body, "the apiserver's own refusal");
    // Through two tiers the pool's window ends first, then the node tier's.
    let refused = ("result", "refused");
    let ended = node.tiers_metric("kubeplex_auth_node_graph_retry_seconds_count", &[refused]);
    assert!((1..=2).contains(&ended), "{ended}");
    assert_eq!(node.served("denied").0, 0, "no refusal was kubeplex's own");
}

/// A review the apiserver throttles (429: priority and fairness, more reviews than their
/// share) gets the read answered as the apiserver would answer it — 429 with `Retry-After` —
/// rather than passed on to it as a list or a watch, which would cost it far more; the read
/// sent again once the review is answered is served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_whose_review_the_apiserver_throttles_is_answered_429_not_passed_on() {
    let node = Node::start().await;
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::token(VIEWER_TOKEN), true);
    // The token is known and one namespace's configmaps reviewed.
    let addr = node.addr();
    let warm = client.get(&addr, "/api/v1/namespaces/team-0/configmaps?resourceVersion=0").await;
    assert_eq!(warm.status, 200);
    let lists = || node.sim_requests("configmaps", "LIST");
    let before = lists();
    // Another namespace: a review of its own, which the apiserver throttles.
    let path = "/api/v1/namespaces/team-1/configmaps?resourceVersion=0";
    node.sim.throttle_reviews(1);
    let throttled = client.get(&addr, path).await;
    assert_eq!(throttled.status, 429, "{}", String::from_utf8_lossy(&throttled.body));
    assert_eq!(throttled.header("retry-after"), "1");
    assert_eq!(&throttled.body[..], b"Too many requests, please try again later.\n");
    assert_eq!(lists(), before, "the read was not passed on to the throttled apiserver");
    // Sent again, as client-go does after Retry-After: reviewed, and served from the cache.
    let again = client.get(&addr, path).await;
    assert_eq!(again.status, 200);
    assert_eq!(lists(), before, "served from the cache");
}

/// A review the overloaded apiserver leaves unanswered past `reviewTimeout`: a watch that
/// needed it is answered 429 with `Retry-After`, as the apiserver's priority and fairness would
/// answer it — not passed on, where it would hold the overloaded apiserver for minutes (1,000
/// node tiers starting at once had ~10,000 of their kubelets' watches passed on so); a list is
/// passed through as before (one request, what the client would have sent directly). The watch
/// sent again once reviews are answered is served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_review_goes_unanswered_is_answered_429_not_passed_on() {
    let reviews = kubeplex::auth::ReviewConfig {
        timeout: Duration::from_millis(300),
        ..kubeplex::auth::ReviewConfig::default()
    };
    let node = Node::start_with(NodeOptions { reviews, ..Default::default() }).await;
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::token(VIEWER_TOKEN), true);
    let addr = node.addr();
    // The token is known and one namespace's configmaps reviewed.
    let warm = client.get(&addr, "/api/v1/namespaces/team-0/configmaps?resourceVersion=0").await;
    assert_eq!(warm.status, 200);
    let (lists, watches) =
        (|| node.sim_requests("configmaps", "LIST"), || node.sim_requests("configmaps", "WATCH"));
    let (lists_before, watches_before) = (lists(), watches());
    node.sim.slow_reviews(Some(Duration::from_secs(2)));
    let watch = "/api/v1/namespaces/team-1/configmaps?watch=1&resourceVersion=0&timeoutSeconds=2";
    let refused = client.get(&addr, watch).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(&refused.body[..], b"Too many requests, please try again later.\n");
    assert_eq!(watches(), watches_before, "the watch was not passed on");
    // A list whose review goes unanswered is passed through: the apiserver's own answer.
    let list = "/api/v1/namespaces/team-2/configmaps?resourceVersion=0";
    let passed = client.get(&addr, list).await;
    assert_eq!(passed.status, 200, "{}", String::from_utf8_lossy(&passed.body));
    assert_eq!(lists(), lists_before + 1, "passed through");
    // Reviews answered again: the watch, sent again, is served from the cache.
    node.sim.slow_reviews(None);
    let again = client.get(&addr, watch).await;
    assert_eq!(again.status, 200, "{}", String::from_utf8_lossy(&again.body));
    assert_eq!(watches(), watches_before, "served from the cache");
}

/// A node tier vouches for many kubelets (`Impersonate-User: system:node:NAME`), and may
/// impersonate any user (deploy/base/node, `kubeplex:impersonator`): with
/// `authorizersGrantWhole`, that is reviewed once —
/// a review of impersonating all users — not once per kubelet, so a pool serving 2,000 node
/// tiers does not review 2,000 impersonations a minute for their Lease renewals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tier_vouching_for_many_kubelets_is_reviewed_once_for_all() {
    let whole = NodeOptions { authorizers_grant_whole: true, ..Default::default() };
    let node = Node::start_with(whole).await;
    if node.behind.is_some() {
        // A pool's side of a node tier that presents a certificate and the legacy
        // impersonation; through two tiers the front is a node tier bound to its node.
        return;
    }
    let cert = node.pki.client("kubeplex-node-tier", &[support::node::NODE_TIERS_GROUP]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    let addr = node.addr();
    let get_own_node = |i: usize| {
        let (client, addr) = (&client, &addr);
        async move {
            let user = format!("system:node:node-{i}");
            let headers = [
                ("Accept", "application/json"),
                ("Impersonate-User", user.as_str()),
                ("Impersonate-Group", "system:nodes"),
            ];
            let path = format!("/api/v1/nodes/node-{i}");
            client.request(addr, http::Method::GET, &path, &headers).await
        }
    };
    let reviews = || node.sim_reviews("subjectaccessreview");
    let before = reviews();
    let first = get_own_node(0).await;
    assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body));
    let for_one = reviews() - before;
    assert!(for_one > 0, "the node tier's impersonation is reviewed");
    for i in 1..3 {
        let next = get_own_node(i).await;
        assert_ne!(next.status, 403, "{}", String::from_utf8_lossy(&next.body));
    }
    assert_eq!(reviews() - before, for_one, "another kubelet cost no review of its own");
}

/// With `nodeAuthorizer: true`, a kubelet's reads that the apiserver's Node authorizer grants
/// by rule come from the cache without a SubjectAccessReview — its own pods, a pod bound to
/// it for longer than the graph takes to settle, and a ConfigMap that pod mounts, by name, as a
/// list, a watch and a GET — at 2,000 nodes these were ~36,000 reviews when a pool started. Whatever
/// kubeplex cannot tell is still reviewed and answered by the apiserver: a ConfigMap no pod of
/// the node uses, another node's pods, a ConfigMap of a pod bound a moment ago, and one only a
/// mirror pod names (the graph links nothing to mirror pods).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_reads_the_node_authorizer_grants_by_rule_cost_no_review() {
    let node = Node::start_with(NodeOptions { node_authorizer: true, ..Default::default() }).await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    let addr = node.addr();
    for name in ["ruled", "unused", "fresh", "mirrored"] {
        node.sim
            .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "team-0"}, "data": {"k": "v"}}))
            .expect("create");
    }
    let pod = |name: &str, configmap: &str, mirror: bool| {
        let mut metadata = serde_json::json!({"name": name, "namespace": "team-0"});
        if mirror {
            metadata["annotations"] = serde_json::json!({"kubernetes.io/config.mirror": "x"});
        }
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
                "volumes": [{"name": "v", "configMap": {"name": configmap}}]}})
    };
    node.sim.create(pod("uses-ruled", "ruled", false)).expect("create");
    node.sim.create(pod("static-pod", "mirrored", true)).expect("create");
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    let seen = |body: &[u8], name: &str| String::from_utf8_lossy(body).contains(name);
    let started = Instant::now();
    while !seen(&client.get(&addr, pods).await.body, "static-pod") {
        assert!(started.elapsed() < Duration::from_secs(5), "kubeplex never saw the pods");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Past the time kubeplex gives the apiserver's graph (twice nodeGraphLag, 3 s).
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let reviews = || node.sim_reviews("subjectaccessreview");
    let by_rules =
        || node.tiers_metric("kubeplex_auth_decisions_total", &[("source", "node_rules")]);
    let from_caches = || node.tiers_metric("kubeplex_requests_total", &[("source", "cache")]);
    let named = |name: &str| {
        format!("/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3D{name}")
    };
    let by_rule = [
        pods.to_string(),
        format!("{}&resourceVersion=0", named("ruled")),
        format!("{}&watch=1&resourceVersion=0&timeoutSeconds=1", named("ruled")),
        "/api/v1/namespaces/team-0/configmaps/ruled?resourceVersion=0".to_string(),
        "/api/v1/namespaces/team-0/pods/uses-ruled?resourceVersion=0".to_string(),
    ];
    if node.behind.is_some() {
        // Through two tiers, the node tier's view of pods comes from the pool: what it would
        // grant through a pod goes up to the pool as node-0, which grants it from its own live
        // view once the node tier may act as node-0 — constrained impersonation's reviews,
        // asked once for every node tier of its ServiceAccount (each verb and resource, and
        // each name unless the authorizers grant whole): taken here first.
        for path in &by_rule {
            let _ = client.get(&addr, path).await;
        }
    }
    let (before, cached, granted) = (reviews(), from_caches(), by_rules());
    for path in &by_rule {
        let answer = client.get(&addr, path).await;
        assert_eq!(answer.status, 200, "{path}: {}", String::from_utf8_lossy(&answer.body));
        assert!(seen(&answer.body, "uses-ruled") || seen(&answer.body, "\"ruled\""), "{path}");
    }
    assert_eq!(reviews(), before, "no review for what the Node authorizer grants by rule");
    assert_eq!(from_caches(), cached + by_rule.len() as u64, "all from a cache");
    assert_eq!(by_rules() - granted, by_rule.len() as u64);
    // Still reviewed, and answered as the apiserver answers the kubelet.
    let unused = client.get(&addr, &format!("{}&resourceVersion=0", named("unused"))).await;
    assert_eq!(unused.status, 403, "no pod of node-0 uses it");
    let other = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=0";
    assert_eq!(client.get(&addr, other).await.status, 403, "another node's pods");
    let mirrored = client.get(&addr, &format!("{}&resourceVersion=0", named("mirrored"))).await;
    assert_eq!(mirrored.status, 403, "only a mirror pod names it");
    assert!(reviews() >= before + 3, "each of them reviewed");
    // A pod bound a moment ago: its ConfigMap is reviewed, however the apiserver answers.
    node.sim.create(pod("uses-fresh", "fresh", false)).expect("create");
    let started = Instant::now();
    while !seen(&client.get(&addr, pods).await.body, "uses-fresh") {
        assert!(started.elapsed() < Duration::from_secs(5), "kubeplex never saw the pod");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (before, granted) = (reviews(), by_rules());
    let _ = client.get(&addr, &format!("{}&resourceVersion=0", named("fresh"))).await;
    assert!(reviews() > before, "a binding of a moment ago is the apiserver's to judge");
    assert_eq!(by_rules(), granted);
}

/// Without `nodeAuthorizer` (the default) every read from the cache is reviewed, a node's
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_node_authorizer_setting_a_nodes_reads_are_reviewed() {
    let node = Node::start().await;
    let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
    let client = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false);
    let before = node.sim_reviews("subjectaccessreview");
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
    assert_eq!(client.get(&node.addr(), pods).await.status, 200);
    assert!(node.sim_reviews("subjectaccessreview") > before);
    assert_eq!(node.metric("kubeplex_auth_decisions_total", &[("source", "node_rules")]), 0);
}

/// With `authorizersGrantWhole`, one identity reading with a selector of each node, or by name —
/// a CNI agent's pods of its node — is reviewed once for all: the read
/// without its selectors and name is granted, and whoever may read all may be shown any. A read
/// the wider review does not grant is reviewed itself, and refused by the apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_narrowed_by_selectors_are_granted_by_one_review_of_the_whole() {
    let whole = NodeOptions { authorizers_grant_whole: true, ..Default::default() };
    let node = Node::start_with(whole).await;
    let viewer = TlsClient::new(&node.pki.ca_pem, &Credentials::token(VIEWER_TOKEN), true);
    let reviews = || node.sim_reviews("subjectaccessreview");
    let before = reviews();
    for n in 0..3 {
        let path = format!("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-{n}&resourceVersion=0");
        let answer = viewer.get(&node.addr(), &path).await;
        assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    }
    let named =
        "/api/v1/namespaces/team-1/configmaps?fieldSelector=metadata.name%3Dx&resourceVersion=0";
    assert_eq!(viewer.get(&node.addr(), named).await.status, 200);
    assert_eq!(reviews() - before, 2, "one review of all pods, one of all configmaps");
    // A reader of team-0 only: its read of team-1 is not granted by a review of the whole
    // (that is refused too), and the apiserver refuses it.
    let reader = TlsClient::new(&node.pki.ca_pem, &Credentials::token(READER_TOKEN), true);
    let other =
        "/api/v1/namespaces/team-1/configmaps?fieldSelector=metadata.name%3Dx&resourceVersion=0";
    assert_eq!(reader.get(&node.addr(), other).await.status, 403);
}

/// A webhook authorizer between the Node authorizer and RBAC (structured authorization
/// configuration) denies one ConfigMap by name to a reader RBAC lets read every ConfigMap of
/// its namespace. By default kubeplex reviews the named read as it is, and the reader gets the
/// webhook's refusal, as directly — by name and by a `metadata.name=` list. With
/// `authorizersGrantWhole` (whose assumption such a webhook breaks, docs/operations.md) one
/// review of the whole collection grants it: the webhook is not asked (its matchConditions see
/// no name), and the cache answers what the apiserver refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_denies_one_name_is_bypassed_only_when_authorizers_grant_whole() {
    use kubeplex_sim::auth::{Denial, Webhook};
    for whole in [false, true] {
        let node =
            Node::start_with(NodeOptions { authorizers_grant_whole: whole, ..Default::default() })
                .await;
        let webhook =
            Webhook { deny: vec![Denial::named("configmaps", "team-0", "db-root", "off limits")] };
        node.sim.set_auth(Some(support::node::policy().webhook(webhook)));
        node.sim
            .create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "db-root", "namespace": "team-0"},
                "data": {"password": "hunter2"}}))
            .expect("create");
        let reader = TlsClient::new(&node.pki.ca_pem, &Credentials::token(READER_TOKEN), true);
        let upstream = node.sim.addr().to_string();
        let bearer = format!("Bearer {READER_TOKEN}");
        let headers = [("Accept", "application/json"), ("Authorization", bearer.as_str())];
        let paths = [
            "/api/v1/namespaces/team-0/configmaps/db-root?resourceVersion=0",
            "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Ddb-root&resourceVersion=0",
        ];
        for path in paths {
            let direct = support::request(&upstream, http::Method::GET, path, &headers, None).await;
            assert_eq!(direct.status, 403, "the apiserver refuses it: {path}");
            let started = Instant::now();
            let through = loop {
                let answer = reader.get(&node.addr(), path).await;
                // Until the cache has the new ConfigMap, an allowed read may not show it yet.
                if answer.status != 200 || String::from_utf8_lossy(&answer.body).contains("hunter2")
                {
                    break answer;
                }
                assert!(started.elapsed() < Duration::from_secs(5), "{path}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let body = String::from_utf8_lossy(&through.body);
            match whole {
                false => {
                    assert_eq!(through.status, 403, "{path}: {body}");
                    assert!(body.contains("off limits"), "the webhook's reason: {body}");
                    assert_eq!(body, String::from_utf8_lossy(&direct.body), "the same refusal");
                }
                true => {
                    assert_eq!(through.status, 200, "{path}: {body}");
                    assert!(body.contains("hunter2"), "what the setting trades away: {body}");
                }
            }
        }
        // Another name the webhook has no opinion on is served from the cache either way.
        let other = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dx&resourceVersion=0";
        assert_eq!(reader.get(&node.addr(), other).await.status, 200);
    }
}
