//! A node tier holds no more power than its node (issue 44): its credential is a ServiceAccount
//! token bound to its pod on node-0, and the RBAC `deploy/base/node` grants it — constrained
//! impersonation of its associated node, the review APIs, reads of what every node's agents
//! read cluster-wide (services, endpoint slices) and nothing of pods, Nodes, ConfigMaps or
//! Secrets. Holding it, everything node-1's kubelet may do and node-0's may not is refused —
//! through the pool and straight at the apiserver alike, with the apiserver's status — while
//! node-0's own reads work, as node-0's kubelet gets them directly.

use kubeplex_test_support as support;
use std::time::{Duration, Instant};

use http::Method;
use kubeplex_sim::auth::{Rule, Subject};
use serde_json::{json, Value};
use support::node::{
    associated_node_impersonation, policy, Node, NodeOptions, ADMIN_TOKEN, NODE_TIER_ACCOUNT,
    NODE_TIER_TOKEN,
};
use support::tls::{Credentials, TlsClient};

/// [`policy`] with the node tier's ServiceAccount granted what `deploy/base/node` grants it,
/// and nothing else.
fn shipped_policy() -> kubeplex_sim::auth::Auth {
    let sa = || Subject::service_account("kube-system", NODE_TIER_ACCOUNT);
    let mut auth = policy();
    // The harness binds the node tier's account to the broad test role for the suites run
    // through two tiers; the shipped role is this one.
    auth = auth.without_bindings_of(&sa());
    auth.cluster_role_binding("shipped-auth-delegator", "system:auth-delegator", vec![sa()])
        .grant(sa(), None, associated_node_impersonation())
        .grant(
            sa(),
            None,
            vec![
                Rule::read(&[""], &["services", "namespaces"]),
                Rule::read(&["discovery.k8s.io"], &["endpointslices"]),
            ],
        )
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team-0"}, "data": {"k": name}})
}

fn pod(name: &str, node: &str, configmap: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-0"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app:1"}],
            "volumes": [{"name": "v", "configMap": {"name": configmap}}]}})
}

const AS_B: &[(&str, &str)] = &[("Impersonate-User", "system:node:node-1")];
const AS_A: &[(&str, &str)] = &[("Impersonate-User", "system:node:node-0")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tiers_credential_reaches_its_own_node_only() {
    let node = Node::start_with(NodeOptions {
        pool: true,
        node_authorizer: true,
        authorizers_grant_whole: true,
        ..Default::default()
    })
    .await;
    node.sim.set_auth(Some(shipped_policy()));
    for name in ["a-only", "b-only"] {
        node.sim.create(configmap(name)).unwrap();
    }
    node.sim.create(pod("on-a", "node-0", "a-only")).unwrap();
    node.sim.create(pod("on-b", "node-1", "b-only")).unwrap();
    let pool = node.behind.as_ref().expect("a pool").addr.to_string();
    let apiserver = node.sim.addr().to_string();
    let stolen = TlsClient::new(&node.pki.ca_pem, &Credentials::token(NODE_TIER_TOKEN), false);
    let bearer = format!("Bearer {NODE_TIER_TOKEN}");
    let directly = |method: Method, path: &'static str, extra: &'static [(&str, &str)]| {
        let (apiserver, bearer) = (apiserver.clone(), bearer.clone());
        async move {
            let mut headers = vec![("Accept", "application/json"), ("Authorization", &*bearer)];
            headers.extend(extra.iter().copied());
            let body = (method == Method::PATCH).then(|| b"{}".to_vec());
            if body.is_some() {
                headers.push(("Content-Type", "application/merge-patch+json"));
            }
            support::request(&apiserver, method, path, &headers, body).await
        }
    };
    // What node-0's kubelet gets directly (its certificate's user and group).
    let as_kubelet_a = |method: Method, path: &'static str| {
        let apiserver = apiserver.clone();
        async move {
            let admin = format!("Bearer {ADMIN_TOKEN}");
            let headers = [
                ("Accept", "application/json"),
                ("Authorization", admin.as_str()),
                ("Impersonate-User", "system:node:node-0"),
                ("Impersonate-Group", "system:nodes"),
                ("Content-Type", "application/merge-patch+json"),
            ];
            let body = (method == Method::PATCH).then(|| b"{}".to_vec());
            support::request(&apiserver, method, path, &headers, body).await.status
        }
    };
    // Past the time the pool gives the apiserver's graph before its rules grant through a pod.
    tokio::time::sleep(Duration::from_millis(3200)).await;

    let refused = [
        (
            "node-1's pods",
            Method::GET,
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=0",
        ),
        (
            "a pod of node-1 by name",
            Method::GET,
            "/api/v1/namespaces/team-0/pods/on-b?resourceVersion=0",
        ),
        ("node-1's Node", Method::GET, "/api/v1/nodes/node-1?resourceVersion=0"),
        (
            "a ConfigMap only node-1's pod uses",
            Method::GET,
            "/api/v1/namespaces/team-0/configmaps/b-only?resourceVersion=0",
        ),
        ("a status patch of node-1's Node", Method::PATCH, "/api/v1/nodes/node-1/status"),
        (
            "a status patch of node-1's pod",
            Method::PATCH,
            "/api/v1/namespaces/team-0/pods/on-b/status",
        ),
    ];
    let mut table = vec![format!(
        "{:45} {:>8} {:>8} {:>8}",
        "node-0's node-tier token:", "pool", "direct", "kubelet"
    )];
    for (what, method, path) in refused {
        let kubelet = as_kubelet_a(method.clone(), path).await;
        assert_eq!(kubelet, 403, "node-0's kubelet is refused {what}");
        for (how, headers) in [("as itself", &[][..]), ("as node-1", AS_B), ("as node-0", AS_A)] {
            let through = stolen
                .request(
                    &pool,
                    method.clone(),
                    path,
                    &[&[("Accept", "application/json")][..], headers].concat(),
                )
                .await;
            let direct = directly(method.clone(), path, headers).await;
            table.push(format!(
                "{:45} {:>8} {:>8} {:>8}",
                format!("{what}, {how}"),
                through.status,
                direct.status,
                kubelet
            ));
            assert_eq!(
                direct.status,
                403,
                "directly, {what} {how}: {}",
                String::from_utf8_lossy(&direct.body)
            );
            assert_eq!(
                through.status,
                403,
                "through the pool, {what} {how}: {}",
                String::from_utf8_lossy(&through.body)
            );
            assert_eq!(through.body, direct.body, "the apiserver's refusal: {what} {how}");
        }
    }
    let impersonations: [(&str, &[(&str, &str)]); 3] = [
        ("impersonating system:node:node-1", AS_B),
        (
            "impersonating system:masters",
            &[("Impersonate-User", "admin"), ("Impersonate-Group", "system:masters")],
        ),
        (
            "impersonating a ServiceAccount",
            &[("Impersonate-User", "system:serviceaccount:team-0:reader")],
        ),
    ];
    for (what, headers) in impersonations {
        let path = "/api/v1/namespaces/team-0/configmaps?resourceVersion=0";
        let through = stolen
            .request(
                &pool,
                Method::GET,
                path,
                &[&[("Accept", "application/json")][..], headers].concat(),
            )
            .await;
        let direct = directly(Method::GET, path, headers).await;
        table.push(format!("{:45} {:>8} {:>8} {:>8}", what, through.status, direct.status, "-"));
        assert_eq!((through.status, direct.status), (403, 403), "{what}");
        assert_eq!(through.body, direct.body, "{what}");
    }
    // node-0's own reads work, as its kubelet gets them.
    let own = [
        ("node-0's pods", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0"),
        ("node-0's Node", "/api/v1/nodes/node-0?resourceVersion=0"),
        (
            "a ConfigMap node-0's pod uses",
            "/api/v1/namespaces/team-0/configmaps/a-only?resourceVersion=0",
        ),
        ("a pod of node-0 by name", "/api/v1/namespaces/team-0/pods/on-a?resourceVersion=0"),
    ];
    for (what, path) in own {
        let kubelet = as_kubelet_a(Method::GET, path).await;
        let started = Instant::now();
        let through = loop {
            let r = stolen
                .request(&pool, Method::GET, path, &[("Accept", "application/json"), AS_A[0]])
                .await;
            if r.status == 200 || started.elapsed() > Duration::from_secs(5) {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        table.push(format!(
            "{:45} {:>8} {:>8} {:>8}",
            format!("{what}, as node-0"),
            through.status,
            directly(Method::GET, path, AS_A).await.status,
            kubelet
        ));
        assert_eq!(
            (through.status, kubelet),
            (200, 200),
            "{what}: {}",
            String::from_utf8_lossy(&through.body)
        );
    }
    println!("{}", table.join("\n"));
}

/// A node tier bound to node-0 loads the caches of its node's own pods and Node as node-0
/// (`Impersonate-User: system:node:node-0` alone): its ServiceAccount may read no pod and no
/// Node itself, yet its kubelet's reads are answered from those caches. A kubelet of another
/// node connecting to it is passed on as that node, which its credential cannot be: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tier_loads_its_nodes_own_pods_and_node_as_that_node() {
    let node = Node::start_with(NodeOptions {
        pool: true,
        node_authorizer: true,
        authorizers_grant_whole: true,
        caches: vec![
            "pods:protobuf?fieldSelector=spec.nodeName=node-0".into(),
            "nodes:protobuf?fieldSelector=metadata.name=node-0".into(),
        ],
        policy: Some(shipped_policy()),
        ..Default::default()
    })
    .await;
    let kubelet = node.pki.client("system:node:node-0", &["system:nodes"]);
    let kubelet = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(kubelet), false);
    let own = [
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-0&resourceVersion=0",
    ];
    let cached = node.served("cache").0;
    // As the kubelet reads them: in protobuf.
    let protobuf = [("Accept", "application/vnd.kubernetes.protobuf")];
    for path in own {
        let answer = kubelet.request(&node.addr(), Method::GET, path, &protobuf).await;
        assert_eq!(answer.status, 200, "{path}: {}", String::from_utf8_lossy(&answer.body));
        assert!(String::from_utf8_lossy(&answer.body).contains("node-0"), "{path}");
    }
    let admin = node.proxy.admin_addr.expect("admin").to_string();
    let debug = support::get(&admin, "/debug/caches").await.json();
    assert_eq!(
        node.served("cache").0,
        cached + 2,
        "from the node tier's own caches: {debug} upstream {:?} denied {:?}",
        node.served("upstream"),
        node.served("denied")
    );
    // Its ServiceAccount itself may list neither, directly.
    let bearer = format!("Bearer {NODE_TIER_TOKEN}");
    let headers = [("Accept", "application/json"), ("Authorization", bearer.as_str())];
    for path in own {
        let direct =
            support::request(&node.sim.addr().to_string(), Method::GET, path, &headers, None).await;
        assert_eq!(direct.status, 403, "{path}");
    }
    // A kubelet of node-1 at node-0's tier.
    let stranger = node.pki.client("system:node:node-1", &["system:nodes"]);
    let stranger = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(stranger), false);
    let theirs = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=0";
    let refused = stranger.get(&node.addr(), theirs).await;
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
}

/// With `verifyServiceAccountTokens`, a pool verifies a node tier's token itself, as the
/// apiserver's ServiceAccount authenticator does — the apiserver's key, issuer and audience,
/// and the pod and ServiceAccount it is bound to as the pool's live caches show them — and asks
/// no TokenReview for it; once the node tier's pod is deleted its token works no more: the pool
/// asks the apiserver, which refuses it (401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_verifies_a_node_tiers_bound_token_itself_while_its_pod_exists() {
    let node = Node::start_with(NodeOptions {
        pool: true,
        node_authorizer: true,
        signed_node_tier_token: true,
        verify_service_account_tokens: true,
        caches: vec!["pods".into(), "configmaps".into(), "serviceaccounts".into()],
        ..Default::default()
    })
    .await;
    let pool = node.behind.as_ref().expect("a pool");
    let kubelet = node.pki.client("system:node:node-0", &["system:nodes"]);
    let kubelet = TlsClient::new(&node.pki.ca_pem, &Credentials::cert(kubelet), false);
    let pool_metric = |name: &str, labels: &[(&str, &str)]| {
        let text: String = pool.state.metrics.render().into_iter().map(char::from).collect();
        support::node::sum_series(&text, name, labels)
    };
    let verified = || {
        pool_metric("kubeplex_auth_decisions_total", &[("kind", "token"), ("source", "verified")])
    };
    // The pool's keys are fetched as it starts; the node tier's first requests may come before.
    let started = Instant::now();
    while verified() == 0 {
        let path = "/api/v1/namespaces/team-0/pods/nope";
        let _ = kubelet.get(&node.addr(), path).await;
        assert!(started.elapsed() < Duration::from_secs(10), "the pool never verified a token");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reviews = node.sim_reviews("tokenreview");
    let before = verified();
    let own = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0";
    for _ in 0..3 {
        assert_eq!(kubelet.get(&node.addr(), own).await.status, 200);
    }
    assert!(verified() > before, "verified by the pool");
    // The verified token is held in the pool's bounded cache, which /metrics shows (moka counts
    // its entries as it does its housekeeping: on later requests).
    let held = || pool_metric("kubeplex_auth_cache_entries", &[("cache", "sa_verified")]);
    let started = Instant::now();
    while held() == 0 && started.elapsed() < Duration::from_secs(10) {
        let _ = kubelet.get(&node.addr(), own).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(held() >= 1, "kubeplex_auth_cache_entries{{cache=\"sa_verified\"}}: {}", held());
    assert_eq!(node.sim_reviews("tokenreview"), reviews, "no TokenReview for it");

    // The node tier's pod is deleted: its token is the apiserver's to judge, and it refuses it.
    let kubeconfig: Value =
        serde_json::from_slice(&std::fs::read(node.dir.join("node-tier.kubeconfig")).unwrap())
            .unwrap();
    let token = kubeconfig["users"][0]["user"]["token"].as_str().unwrap().to_string();
    node.sim.delete("", "pods", "kube-system", "kubeplex-node-0").unwrap();
    let stolen = TlsClient::new(&node.pki.ca_pem, &Credentials::token(&token), false);
    let started = Instant::now();
    let refused = loop {
        let answer =
            stolen.get(&pool.addr.to_string(), "/api/v1/namespaces/default/services").await;
        if answer.status != 200 {
            break answer;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the token still works");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.status, 401, "{}", String::from_utf8_lossy(&refused.body));
    // The apiserver's judgement, not the pool's: the pool vouches for the token no more (a
    // TokenReview, or one it asked before — a refusal is kept a little while — decides, and the
    // request goes up as it came).
    let vouched = verified();
    let again = stolen.get(&pool.addr.to_string(), "/api/v1/namespaces/default/services").await;
    assert_eq!(again.status, 401);
    assert_eq!(verified(), vouched, "the pool verified a token whose pod is gone");
}
