use super::*;

const DAEMONSET: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/base/node/daemonset.yaml");
const POOL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/base/pool/pool.yaml");

#[test]
fn kubeplex_rbac_is_read_from_the_shipped_manifest() {
    let auth = policy(2, Path::new(DAEMONSET), Path::new(POOL)).expect("the manifests parse");
    let user = auth.authenticate_token(&node_tier_token(0)).expect("node-0's node tier");
    assert_eq!(user.extra["authentication.kubernetes.io/node-name"], ["node-0"]);
    let allowed = |verb: &str, group: &str, resource: &str, name: &str| {
        let attrs = kubeplex_sim::auth::Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        };
        auth.authorize(&attrs, &kubeplex_sim::auth::NoObjects).allowed
    };
    // What it caches cluster-wide, the reviews, and acting as its own node (constrained
    // impersonation); no pods, Nodes or Secrets of its own, no legacy impersonation.
    assert!(allowed("list", "discovery.k8s.io", "endpointslices", ""));
    assert!(allowed("create", "authorization.k8s.io", "subjectaccessreviews", ""));
    assert!(allowed("impersonate:associated-node", "authentication.k8s.io", "nodes", "*"));
    assert!(allowed("impersonate-on:associated-node:watch", "", "pods", ""));
    assert!(!allowed("watch", "", "pods", ""));
    assert!(!allowed("get", "", "nodes", "node-1"));
    assert!(!allowed("impersonate", "", "users", "system:node:node-0"));
    assert!(!allowed("impersonate:arbitrary-node", "authentication.k8s.io", "nodes", "node-1"));
    assert!(!allowed("list", "", "secrets", ""));
}

#[test]
fn the_pools_rbac_is_read_from_the_pool_manifest() {
    let auth = policy(2, Path::new(DAEMONSET), Path::new(POOL)).expect("the manifests parse");
    let allowed = |user: &kubeplex_sim::auth::UserInfo, verb: &str, resource: &str, name: &str| {
        let attrs = kubeplex_sim::auth::Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            version: "v1".into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        };
        auth.authorize(&attrs, &kubeplex_sim::auth::NoObjects).allowed
    };
    let pool = auth.authenticate_token(POOL_TOKEN).expect("the pool's token");
    assert!(allowed(&pool, "watch", "secrets", ""), "the pool caches Secrets");
    assert!(allowed(&pool, "watch", "serviceaccounts", ""), "and ServiceAccounts");
    assert!(
        !allowed(&pool, "impersonate", "users", "system:node:node-0"),
        "it impersonates nobody"
    );
}

#[test]
fn the_agents_identities_read_what_their_roles_allow() {
    let auth = policy(2, Path::new(DAEMONSET), Path::new(POOL)).expect("policy");
    let user = |token: &str| auth.authenticate_token(token).expect("a known token");
    assert_eq!(user(&kubelet_token(1)).username, "system:node:node-1");
    assert_eq!(user(&kube_proxy_token(0)).username, "system:serviceaccount:kube-system:kube-proxy");
    assert_eq!(user(&cni_token(1)).username, "system:serviceaccount:kube-system:cni-agent");
    assert_eq!(user(&logs_token(0)).username, "system:serviceaccount:kube-system:log-agent");
    assert!(auth.authenticate_token(&kubelet_token(2)).is_none(), "two nodes only");
}

#[test]
fn a_pods_references_are_what_the_kubelet_watches() {
    let spec = crate::node::tests::spec(2);
    let pod = pod(&spec, 3, "app-3-000001", "node-1", "10.244.0.3", false);
    let (configmaps, secrets) = references(&pod);
    assert_eq!(configmaps, ["app-3-config", "kube-root-ca.crt"]);
    assert_eq!(secrets, ["app-3-secret"]);
    assert!(pod.get("status").is_none(), "a new pod has no status yet");
}

#[test]
fn every_seed_object_is_accepted_by_the_fake_apiserver() {
    let spec = crate::node::tests::spec(3);
    let objects = objects(&spec);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let sim = kubeplex_sim::SimBuilder::new().seed(objects).start().await.expect("seeded");
        assert_eq!(sim.count("", "services"), spec.apps);
        assert_eq!(sim.count("node.k8s.io", "runtimeclasses"), 2);
        // Headless services are left out by the kubelet's selector.
        let visible = sim.select("", "services", None, "fieldSelector=spec.clusterIP%21%3DNone");
        assert_eq!(visible.map(|v| v.len()), Ok(spec.apps - spec.apps / 5));
    });
}
