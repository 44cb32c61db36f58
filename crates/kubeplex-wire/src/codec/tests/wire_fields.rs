//! `wire::proto::fields` checked against the generated schema of k8s.io/api and against the
//! JSON cache's field values.

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use crate::codec;
use crate::proto::fields::*;
use crate::proto::object_meta;
use crate::selector::fields_by_kind::FieldRules;

/// Every entry's numbers and scalar type are those of k8s.io/api's Go types, as the codec's
/// generated schema has them.
#[test]
fn every_entry_matches_the_generated_schema() {
    for kind in KINDS {
        let t = codec::type_for(kind.api_version, kind.kind).expect(kind.kind);
        for source in kind.sources {
            let (numbers, go_type) = codec::proto_path(t, source.json)
                .unwrap_or_else(|| panic!("{} {:?} is not in the schema", kind.kind, source.json));
            assert_eq!(source.numbers, numbers.as_slice(), "{} {:?}", kind.kind, source.json);
            let scalar = match go_type {
                "string" => Scalar::Str,
                "bool" => Scalar::Bool,
                other => panic!("{} {:?}: {other} has no scalar here", kind.kind, source.json),
            };
            assert_eq!(source.scalar, scalar, "{} {:?}", kind.kind, source.json);
            assert!(source.numbers.len() <= 4, "deeper than `walk` goes");
        }
    }
    // The checker itself tells a wrong number or path.
    let pod = codec::type_for("v1", "Pod").unwrap();
    assert_eq!(codec::proto_path(pod, &["spec", "nodeName"]), Some((vec![2, 10], "string")));
    assert_eq!(codec::proto_path(pod, &["status", "podIPs", "0", "ip"]).unwrap().0, [3, 12, 1]);
    assert_eq!(codec::proto_path(pod, &["spec", "nodename"]), None);
    assert_eq!(codec::proto_path(pod, &["spec"]), None);
}

/// The table covers every field each kind's field set has: every field the rules accept is held,
/// from the entry, ObjectMeta, or because the field set lacks it (pods' `status.podIPs`, which
/// reads as "").
#[test]
fn every_selectable_field_is_covered() {
    for kind in KINDS {
        let rules = FieldRules::for_resource(kind.group, kind.resource);
        for field in rules.supported_fields() {
            assert!(holds_field(kind.group, kind.resource, field), "{} {field}", kind.resource);
        }
        // An entry exists only for a kind with fields beyond ObjectMeta's to read.
        assert!(!kind.sources.is_empty(), "{}", kind.resource);
    }
    for resource in ["configmaps", "endpoints", "persistentvolumeclaims"] {
        let rules = FieldRules::for_resource("", resource);
        assert!(rules.supported_fields().iter().all(|f| holds_field("", resource, f)));
    }
    assert!(holds_field("discovery.k8s.io", "endpointslices", "metadata.namespace"));
    assert!(holds_field("", "pods", "status.podIPs"));
    // Not in the table, so passed through: the count is in the field set.
    assert!(!holds_field("", "replicationcontrollers", "status.replicas"));
    assert!(holds_field("", "replicationcontrollers", "metadata.name"));
}

/// The field set of `object` (a v1 JSON object of `api_version`/`kind`) read from its protobuf
/// message, and the one read from its JSON, by `FieldRules::field_value`.
fn both_ways(
    group: &str,
    resource: &str,
    api_version: &str,
    kind: &str,
    object: &Json,
) -> [Vec<(String, String)>; 2] {
    let t = codec::type_for(api_version, kind).unwrap();
    let canonical = codec::canonicalize(t, object).unwrap().value;
    let message = codec::to_protobuf(t, object).unwrap();
    let meta = object_meta(&message).unwrap();
    let decoded = selectable_fields(group, resource, &message, &meta).unwrap();
    let rules = FieldRules::for_resource(group, resource);
    let held = rules.supported_fields().iter().filter(|f| holds_field(group, resource, f));
    let from_proto =
        held.clone().filter_map(|f| Some((f.to_string(), rules.field_value(&decoded, f)?)));
    let from_json = held.filter_map(|f| Some((f.to_string(), rules.field_value(&canonical, f)?)));
    [from_proto.collect(), from_json.collect()]
}

#[test]
fn values_equal_the_json_caches_for_every_kind() {
    let cases: &[(&str, &str, &str, Json)] = &[
        (
            "pods",
            "v1",
            "Pod",
            json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "node-1", "restartPolicy": "Never",
                         "schedulerName": "s", "serviceAccountName": "sa", "serviceAccount": "old", "hostNetwork": true},
                "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                           "nominatedNodeName": "node-2"}
            }),
        ),
        // Fallbacks: serviceAccount when serviceAccountName is empty, podIPs[0] without podIP.
        (
            "pods",
            "v1",
            "Pod",
            json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [], "serviceAccount": "old"},
                "status": {"podIPs": [{"ip": "fd00::7"}, {"ip": "10.0.0.7"}]}
            }),
        ),
        ("pods", "v1", "Pod", json!({"metadata": {"name": "p", "namespace": "ns"}})),
        (
            "nodes",
            "v1",
            "Node",
            json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}}),
        ),
        ("nodes", "v1", "Node", json!({"metadata": {"name": "n"}})),
        (
            "namespaces",
            "v1",
            "Namespace",
            json!({"metadata": {"name": "n"}, "status": {"phase": "Terminating"}}),
        ),
        (
            "secrets",
            "v1",
            "Secret",
            json!({"metadata": {"name": "s", "namespace": "ns"}, "type": "kubernetes.io/tls"}),
        ),
        (
            "events",
            "v1",
            "Event",
            json!({
                "metadata": {"name": "e", "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1",
                                   "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
                "reason": "Started", "source": {"component": "kubelet", "host": "node-1"}, "type": "Normal",
                "reportingComponent": "kubelet"
            }),
        ),
        // `source` falls back to reportingComponent.
        (
            "events",
            "v1",
            "Event",
            json!({"metadata": {"name": "e", "namespace": "ns"}, "reportingComponent": "ctrl"}),
        ),
        (
            "services",
            "v1",
            "Service",
            json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": {"clusterIP": "None", "type": "ClusterIP"}}),
        ),
        (
            "configmaps",
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}}),
        ),
        ("endpoints", "v1", "Endpoints", json!({"metadata": {"name": "e", "namespace": "ns"}})),
    ];
    for (resource, api_version, kind, object) in cases {
        let [proto, json] = both_ways("", resource, api_version, kind, object);
        assert_eq!(proto, json, "{kind} {object}");
        assert!(proto.len() >= 2 || *kind == "Node" || *kind == "Namespace", "{kind}");
    }
    let [pod, _] = both_ways("", "pods", "v1", "Pod", &cases[1].3);
    let value = |f: &str| pod.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    assert_eq!(value("spec.serviceAccountName"), Some("old"));
    assert_eq!(value("status.podIP"), Some("fd00::7"));
    assert_eq!(value("spec.hostNetwork"), Some("false"));
    assert_eq!(value("spec.nodeName"), Some(""));
    assert_eq!(value("status.podIPs"), None);
}

fn pod_strategy() -> impl Strategy<Value = Json> {
    let opt = || proptest::option::of("[a-z0-9.:-]{0,6}");
    (
        opt(),
        opt(),
        opt(),
        opt(),
        proptest::option::of(any::<bool>()),
        opt(),
        opt(),
        proptest::collection::vec("[a-f0-9:.]{0,5}", 0..3),
    )
        .prop_map(|(node, sa, old_sa, phase, host, ip, nominated, ips)| {
            let mut spec = serde_json::Map::new();
            let mut status = serde_json::Map::new();
            let put = |m: &mut serde_json::Map<String, Json>, k: &str, v: Option<String>| {
                if let Some(v) = v {
                    m.insert(k.to_owned(), Json::String(v));
                }
            };
            put(&mut spec, "nodeName", node);
            put(&mut spec, "serviceAccountName", sa);
            put(&mut spec, "serviceAccount", old_sa);
            put(&mut status, "phase", phase);
            put(&mut status, "podIP", ip);
            put(&mut status, "nominatedNodeName", nominated);
            if let Some(h) = host {
                spec.insert("hostNetwork".to_owned(), Json::Bool(h));
            }
            let ips: Vec<Json> = ips.into_iter().map(|ip| json!({"ip": ip})).collect();
            if !ips.is_empty() {
                status.insert("podIPs".to_owned(), Json::Array(ips));
            }
            json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": status})
        })
}

proptest! {
    #[test]
    fn pods_read_from_protobuf_equal_their_json(pod in pod_strategy()) {
        let [proto, json] = both_ways("", "pods", "v1", "Pod", &pod);
        prop_assert_eq!(proto, json);
    }

}
