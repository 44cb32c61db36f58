use serde_json::json;

use super::*;

fn read(
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> ResourceAttributes {
    ResourceAttributes {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..ResourceAttributes::default()
    }
}

fn selecting(verb: &str, resource: &str, selector: &str) -> ResourceAttributes {
    ResourceAttributes { field_selector: Some(selector.into()), ..read(verb, "", resource, "", "") }
}

/// What the Node authorizer of 1.36 grants `system:node:n1` by rule, and what it leaves to its
/// graph (a ConfigMap or Secret by name) or refuses (everything else here).
#[test]
fn the_rules_are_the_node_authorizers() {
    let granted = [
        (read("get", "", "nodes", "", "n1"), NodeRule::OwnNode),
        (read("watch", "", "nodes", "", "n1"), NodeRule::OwnNode),
        (selecting("watch", "pods", "spec.nodeName=n1"), NodeRule::OwnPods),
        (selecting("list", "pods", "spec.nodeName==n1,status.phase!=Failed"), NodeRule::OwnPods),
        (read("watch", "", "services", "", ""), NodeRule::Static),
        (read("get", "", "services", "ns", "s"), NodeRule::Static),
        (read("list", "node.k8s.io", "runtimeclasses", "", ""), NodeRule::Static),
        (read("watch", "storage.k8s.io", "csidrivers", "", ""), NodeRule::Static),
        (read("get", "", "endpoints", "ns", "e"), NodeRule::Static),
        (read("watch", "", "configmaps", "ns", "c"), NodeRule::PodReference),
        (read("get", "", "secrets", "ns", "s"), NodeRule::PodReference),
        (read("get", "", "pods", "ns", "p"), NodeRule::BoundPod),
        (read("watch", "", "pods", "ns", "p"), NodeRule::BoundPod),
    ];
    for (a, rule) in granted {
        assert_eq!(rule_for("n1", &a), Some(rule), "{a:?}");
    }
    let mut status = read("get", "", "nodes", "", "n1");
    status.subresource = "status".into();
    let mut other_group = read("get", "apps", "nodes", "", "n1");
    other_group.group = "apps".into();
    let refused = [
        read("get", "", "nodes", "", "n2"),
        read("list", "", "nodes", "", ""),
        status,
        other_group,
        selecting("watch", "pods", "spec.nodeName=n2"),
        selecting("watch", "pods", "spec.nodeName!=n1"),
        selecting("watch", "pods", "spec.nodeName"),
        read("watch", "", "pods", "", ""),
        read("get", "", "pods", "", "p"),
        read("create", "", "services", "ns", ""),
        read("list", "", "endpoints", "ns", ""),
        read("watch", "", "configmaps", "ns", ""),
        read("get", "", "configmaps", "", "c"),
        read("get", "", "persistentvolumeclaims", "ns", "c"),
        read("list", "discovery.k8s.io", "endpointslices", "", ""),
        read("list", "", "namespaces", "", ""),
    ];
    for a in refused {
        assert_eq!(rule_for("n1", &a), None, "{a:?}");
    }
    let discovery = ResourceAttributes::non_resource("get", "/api/v1");
    assert_eq!(rule_for("n1", &discovery), None);
}

fn pod(spec: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
}

/// A cached pod's references are the settled walk's (`kubeplex_wire::pod`), and none of a
/// mirror pod's or of a body that cannot be read.
#[test]
fn a_cached_pods_references_are_those_the_graph_surely_holds() {
    let spec = json!({
        "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "env-secret"}}]}],
        "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "later"}}]}],
        "volumes": [{"name": "a", "configMap": {"name": "vol-cm"}}]
    });
    let body = serde_json::to_vec(&pod(spec.clone())).unwrap();
    assert_eq!(references(Encoding::Json, &body, false), ["vol-cm"]);
    assert_eq!(references(Encoding::Json, &body, true), ["env-secret"]);
    let mut mirror = pod(spec);
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
    let body = serde_json::to_vec(&mirror).unwrap();
    assert!(references(Encoding::Json, &body, false).is_empty());
    assert!(references(Encoding::Json, &body, true).is_empty());
    assert!(references(Encoding::Json, b"{not json", true).is_empty());
}

/// A pod cached in protobuf is read with the 1.36 schema: the same references as its JSON.
#[test]
fn a_protobuf_pods_references_are_read_with_the_schema() {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "app:1"}],
            "volumes": [{"name": "a", "configMap": {"name": "vol-cm"}},
                        {"name": "b", "secret": {"secretName": "vol-secret"}}]}});
    let t = codec::type_for("v1", "Pod").unwrap();
    let canonical = codec::canonicalize(t, &object).unwrap();
    let message = codec::canonical_to_protobuf(t, &canonical.value).unwrap();
    assert_eq!(references(Encoding::Protobuf, &message, false), ["vol-cm"]);
    assert_eq!(references(Encoding::Protobuf, &message, true), ["vol-secret"]);
    assert!(references(Encoding::Protobuf, b"\xff\xff", true).is_empty());
}

#[test]
fn the_graph_is_taken_to_have_settled_after_twice_the_lag_and_at_least_three_seconds() {
    assert_eq!(graph_settled(Duration::ZERO), Duration::from_secs(3));
    assert_eq!(graph_settled(Duration::from_millis(1500)), Duration::from_secs(3));
    assert_eq!(graph_settled(Duration::from_secs(4)), Duration::from_secs(8));
}
