//! The codec against a real kube-apiserver 1.36 (`scripts/realcluster/codec-capture.py`: lists
//! of every built-in kind the node agents read, and the ones a sidecar commonly serves, taken
//! in JSON and in protobuf at one resourceVersion during a run of real kubelets and
//! kube-proxies, in `tests/fixtures/realcluster/`): each list the apiserver wrote in one
//! encoding, rendered by the codec in the other, is the bytes the apiserver wrote — the whole
//! list and every item — as issue 31's one upstream watch per resource needs of it.

use serde_json::Value;

use super::{list_items, ty};
use crate::codec::{from_protobuf, to_protobuf};
use crate::gojson;

/// (fixture, apiVersion, list kind, item kind): every kind captured.
const CAPTURED: &[(&str, &str, &str, &str)] = &[
    ("pods", "v1", "PodList", "Pod"),
    ("nodes", "v1", "NodeList", "Node"),
    ("services", "v1", "ServiceList", "Service"),
    ("endpointslices", "discovery.k8s.io/v1", "EndpointSliceList", "EndpointSlice"),
    ("configmaps", "v1", "ConfigMapList", "ConfigMap"),
    ("secrets", "v1", "SecretList", "Secret"),
    ("namespaces", "v1", "NamespaceList", "Namespace"),
    ("deployments", "apps/v1", "DeploymentList", "Deployment"),
    ("replicasets", "apps/v1", "ReplicaSetList", "ReplicaSet"),
    ("leases", "coordination.k8s.io/v1", "LeaseList", "Lease"),
    ("events", "v1", "EventList", "Event"),
    ("endpoints", "v1", "EndpointsList", "Endpoints"),
    ("runtimeclasses", "node.k8s.io/v1", "RuntimeClassList", "RuntimeClass"),
    ("csidrivers", "storage.k8s.io/v1", "CSIDriverList", "CSIDriver"),
    ("servicecidrs", "networking.k8s.io/v1", "ServiceCIDRList", "ServiceCIDR"),
];

fn captured(name: &str, ext: &str) -> Vec<u8> {
    let path =
        format!("{}/../../tests/fixtures/realcluster/{name}.{ext}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_captured_list_renders_in_the_other_encoding_as_the_apiserver_wrote_it() {
    let mut items_checked = 0;
    for &(name, api_version, list_kind, kind) in CAPTURED {
        let mut json_bytes = captured(name, "json");
        assert_eq!(json_bytes.pop(), Some(b'\n'), "{name}: json.Encoder's newline");
        let json: Value = serde_json::from_slice(&json_bytes).unwrap();
        let body = captured(name, "pb");
        let envelope = crate::proto::decode_unknown(&body).unwrap();
        assert_eq!((envelope.api_version, envelope.kind), (api_version, list_kind), "{name}");
        let raw = envelope.raw;
        let list = ty(api_version, list_kind);
        // The whole list, both ways.
        let decoded = from_protobuf(list, raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            String::from_utf8(gojson::to_vec(&decoded)).unwrap(),
            String::from_utf8(json_bytes.clone()).unwrap(),
            "{name}: protobuf rendered as JSON"
        );
        assert!(
            to_protobuf(list, &json).unwrap_or_else(|e| panic!("{name}: {e}")) == raw,
            "{name}: JSON rendered as protobuf"
        );
        // Each item on its own, as a cache holds it.
        let items = json["items"].as_array().unwrap();
        let raw_items = list_items(raw);
        assert_eq!(items.len(), raw_items.len(), "{name}");
        for (item, raw_item) in items.iter().zip(&raw_items) {
            let item_name = item["metadata"]["name"].as_str().unwrap_or("?");
            assert!(
                &to_protobuf(ty(api_version, kind), item).unwrap() == raw_item,
                "{name}/{item_name}: JSON rendered as protobuf"
            );
            items_checked += 1;
        }
    }
    // The capture had objects of the kinds the node agents read (a run of real agents).
    assert!(items_checked >= 100, "{items_checked} items");
}
