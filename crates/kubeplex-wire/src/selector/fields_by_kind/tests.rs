use super::*;
use serde_json::json;

fn check(group: &str, resource: &str, selector: &str) -> Result<String, String> {
    let sel = FieldSelector::parse(selector).map_err(|e| e.to_string())?;
    let rules = FieldRules::for_resource(group, resource);
    rules.convert(&sel).map(|s| s.to_string()).map_err(|e| e.to_string())
}

#[test]
fn unsupported_fields_get_the_apiservers_message() {
    // Fixture err-bad-fieldselector.
    assert_eq!(
        check("", "configmaps", "data.key=x"),
        Err(r#""data.key" is not a known field selector: only "metadata.name", "metadata.namespace""#.into())
    );
    assert_eq!(
        check("discovery.k8s.io", "endpointslices", "é\t=1"),
        Err("\"é\\t\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".into())
    );
    assert_eq!(
        check("", "pods", "status.hostIP=1"),
        Err("field label not supported: status.hostIP".into())
    );
    assert_eq!(
        check("", "nodes", "metadata.namespace=x"),
        Err("field label not supported: metadata.namespace".into())
    );
    assert_eq!(
        check("", "persistentvolumeclaims", "name=x"),
        Err(r#""name" is not a known field selector: only "metadata.name", "metadata.namespace""#
            .into())
    );
    assert_eq!(check("", "namespaces", "name=x"), Err("field label not supported: name".into()));
    assert_eq!(
        check("example.com", "widgets", "spec.size=1"),
        Err("field label not supported: spec.size".into())
    );
    // Built-in kinds of other groups without a conversion of their own, cluster-scoped ones
    // included, take the default conversion (name and namespace).
    for (group, resource) in [
        ("coordination.k8s.io", "leases"),
        ("node.k8s.io", "runtimeclasses"),
        ("storage.k8s.io", "csidrivers"),
        ("networking.k8s.io", "servicecidrs"),
    ] {
        assert_eq!(
            check(group, resource, "spec.x=1"),
            Err(r#""spec.x" is not a known field selector: only "metadata.name", "metadata.namespace""#.into()),
            "{resource}"
        );
        assert_eq!(check(group, resource, "metadata.namespace="), Ok("metadata.namespace=".into()));
    }
    // The first refused term in sorted order is the one reported.
    assert_eq!(check("", "pods", "zz=1,aa=2"), Err("field label not supported: aa".into()));
}

#[test]
fn supported_fields_pass_and_spec_host_becomes_node_name() {
    assert_eq!(
        check("", "pods", "spec.host=n1,status.podIPs=x"),
        Ok("spec.nodeName=n1,status.podIPs=x".into())
    );
    assert_eq!(
        check("", "events", "source=kubelet,involvedObject.uid!=u"),
        Ok("involvedObject.uid!=u,source=kubelet".into())
    );
    assert_eq!(check("", "secrets", "type=Opaque"), Ok("type=Opaque".into()));
    assert_eq!(
        check("", "configmaps", "metadata.namespace=fx"),
        Ok("metadata.namespace=fx".into())
    );
    let cluster_cr = FieldRules::Custom { cluster_scoped: true };
    let sel = FieldSelector::parse("metadata.namespace=x").unwrap();
    assert_eq!(
        cluster_cr.convert(&sel).unwrap_err().to_string(),
        "field label not supported: metadata.namespace"
    );
    assert_eq!(supported_fields("", "nodes"), ["metadata.name", "spec.unschedulable"]);
    assert_eq!(supported_fields("", "endpoints"), ["metadata.name", "metadata.namespace"]);
}

#[test]
fn pod_field_values_follow_the_registry() {
    let pod = json!({
        "metadata": {"name": "p-1", "namespace": "fx"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Always", "serviceAccount": "old"},
        "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}]}
    });
    let v = |f: &str| field_value("", "pods", &pod, f);
    assert_eq!(v("metadata.name").as_deref(), Some("p-1"));
    assert_eq!(v("metadata.namespace").as_deref(), Some("fx"));
    assert_eq!(v("spec.nodeName").as_deref(), Some("node-1"));
    assert_eq!(v("spec.hostNetwork").as_deref(), Some("false"));
    assert_eq!(v("spec.serviceAccountName").as_deref(), Some("old"));
    assert_eq!(v("spec.schedulerName").as_deref(), Some(""));
    assert_eq!(v("status.podIP").as_deref(), Some("10.0.0.7"));
    assert_eq!(v("status.nominatedNodeName").as_deref(), Some(""));
    // Accepted by the conversion but absent from the field set: reads as "".
    assert_eq!(v("status.podIPs"), None);
    let sel = FieldSelector::parse("status.podIPs=,spec.nodeName=node-1").unwrap();
    assert!(sel.matches(v));
    let sel = FieldSelector::parse("status.podIPs=10.0.0.7").unwrap();
    assert!(!sel.matches(v));

    let host = json!({"spec": {"hostNetwork": true, "serviceAccountName": "new", "serviceAccount": "old"}, "status": {"podIP": "1.2.3.4", "podIPs": [{"ip": "9.9.9.9"}]}});
    assert_eq!(field_value("", "pods", &host, "spec.hostNetwork").as_deref(), Some("true"));
    assert_eq!(field_value("", "pods", &host, "spec.serviceAccountName").as_deref(), Some("new"));
    assert_eq!(field_value("", "pods", &host, "status.podIP").as_deref(), Some("1.2.3.4"));
}

#[test]
fn other_kinds_field_values() {
    let node = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
    assert_eq!(field_value("", "nodes", &node, "spec.unschedulable").as_deref(), Some("true"));
    assert_eq!(
        field_value("", "nodes", &json!({}), "spec.unschedulable").as_deref(),
        Some("false")
    );
    assert_eq!(field_value("", "nodes", &node, "metadata.namespace"), None);
    let rc = json!({"status": {"replicas": 3}});
    assert_eq!(
        field_value("", "replicationcontrollers", &rc, "status.replicas").as_deref(),
        Some("3")
    );
    assert_eq!(
        field_value("", "replicationcontrollers", &json!({}), "status.replicas").as_deref(),
        Some("0")
    );
    let ev = json!({"metadata": {"name": "e", "namespace": "fx"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reportingComponent": "ctrl", "type": "Normal"});
    assert_eq!(field_value("", "events", &ev, "source").as_deref(), Some("ctrl"));
    assert_eq!(field_value("", "events", &ev, "involvedObject.kind").as_deref(), Some("Pod"));
    assert_eq!(field_value("", "events", &ev, "involvedObject.uid").as_deref(), Some(""));
    let ev2 = json!({"source": {"component": "kubelet"}, "reportingComponent": "ctrl"});
    assert_eq!(field_value("", "events", &ev2, "source").as_deref(), Some("kubelet"));
    let svc = json!({"spec": {"clusterIP": "None", "type": "ClusterIP"}});
    assert_eq!(field_value("", "services", &svc, "spec.clusterIP").as_deref(), Some("None"));
    let secret = json!({"type": "kubernetes.io/tls"});
    assert_eq!(field_value("", "secrets", &secret, "type").as_deref(), Some("kubernetes.io/tls"));
    let cm = json!({"metadata": {"name": "cm-a", "namespace": "fx"}, "data": {"key": "v"}});
    assert_eq!(field_value("", "configmaps", &cm, "metadata.namespace").as_deref(), Some("fx"));
    assert_eq!(field_value("", "configmaps", &cm, "data.key"), None);
    assert_eq!(
        field_value(
            "",
            "namespaces",
            &json!({"metadata": {"name": "fx"}, "status": {"phase": "Active"}}),
            "status.phase"
        )
        .as_deref(),
        Some("Active")
    );
}
