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
        tier: TierConfig {
            bin: "kubeplex".into(),
            config: "node.yaml".into(),
            pool_config: "pool.yaml".into(),
        },
        daemonset: "daemonset.yaml".into(),
        pool_manifest: "pool.yaml".into(),
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

#[test]
fn the_first_pods_spread_every_app_over_nodes_and_every_node_runs_many_apps() {
    for (nodes, apps) in [(10, 20), (20, 20), (3, 5)] {
        let spec = NodeSpec { nodes, pods_per_node: 10, apps, ..spec(nodes) };
        let (_, pods) = churn::Churn::initial(&spec);
        assert_eq!(pods.len(), nodes * 10);
        let mut apps_on: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for p in &pods {
            let node =
                p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").to_string();
            let app = p.pointer("/metadata/labels/app").and_then(Value::as_str).unwrap_or("");
            apps_on.entry(node).or_default().insert(app.to_string());
        }
        assert_eq!(apps_on.len(), nodes, "every node runs pods");
        let fewest = apps_on.values().map(|a| a.len()).min().unwrap_or(0);
        assert!(fewest >= 5.min(apps), "{nodes} nodes, {apps} apps: {apps_on:?}");
    }
}
