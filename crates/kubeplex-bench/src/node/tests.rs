use super::*;

/// A small spec for unit tests.
pub(crate) fn spec(nodes: usize) -> NodeSpec {
    NodeSpec {
        nodes,
        pods_per_node: 2,
        apps: 5,
        namespaces: 2,
        duration: Duration::from_secs(1),
        pod_rate: 1.0,
        service_every: Duration::from_secs(1),
        node_status_every: Duration::from_secs(1),
        settle: Duration::from_secs(1),
        mode: Mode::Direct,
        tier: TierConfig { bin: "kubeplex".into(), config: "node.yaml".into() },
        daemonset: "daemonset.yaml".into(),
        work_dir: std::env::temp_dir(),
    }
}

#[test]
fn collections_name_their_group_resource_and_namespace() {
    let c = |p: &str| collection_of(p);
    assert_eq!(c("/api/v1/pods"), ("".into(), "pods".into(), None));
    assert_eq!(
        c("/api/v1/namespaces/team-0/configmaps"),
        ("".into(), "configmaps".into(), Some("team-0".into()))
    );
    assert_eq!(
        c("/apis/discovery.k8s.io/v1/endpointslices"),
        ("discovery.k8s.io".into(), "endpointslices".into(), None)
    );
    assert_eq!(
        c("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
        ("coordination.k8s.io".into(), "leases".into(), Some("kube-node-lease".into()))
    );
}
