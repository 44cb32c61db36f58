//! The transcoder against a real kube-apiserver 1.36's lists (`tests/fixtures/realcluster/`,
//! taken by `scripts/realcluster/codec-capture.py` in JSON and in protobuf at one RV): every
//! cached object of one encoding, rendered in the other, is the object a cache of that encoding
//! holds from the apiserver's own list — its bytes and every field it is routed on.

use bytes::Bytes;

use super::*;
use crate::wire::list_watch::parse_list_page;

/// (resource, group, version, kind, namespaced): every kind `codec-capture.py` takes.
const CAPTURED: &[(&str, &str, &str, &str, bool)] = &[
    ("pods", "", "v1", "Pod", true),
    ("nodes", "", "v1", "Node", false),
    ("services", "", "v1", "Service", true),
    ("endpointslices", "discovery.k8s.io", "v1", "EndpointSlice", true),
    ("configmaps", "", "v1", "ConfigMap", true),
    ("secrets", "", "v1", "Secret", true),
    ("namespaces", "", "v1", "Namespace", false),
    ("deployments", "apps", "v1", "Deployment", true),
    ("replicasets", "apps", "v1", "ReplicaSet", true),
    ("leases", "coordination.k8s.io", "v1", "Lease", true),
    ("events", "", "v1", "Event", true),
    ("endpoints", "", "v1", "Endpoints", true),
    ("runtimeclasses", "node.k8s.io", "v1", "RuntimeClass", false),
    ("csidrivers", "storage.k8s.io", "v1", "CSIDriver", false),
    ("servicecidrs", "networking.k8s.io", "v1", "ServiceCIDR", false),
];

fn info(resource: &str, group: &str, version: &str, kind: &str, namespaced: bool) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced,
        verbs: ["get", "list", "watch"].map(String::from).to_vec(),
    }
}

/// The objects a cache of `info` in `encoding` holds from the captured list.
fn cached(info: &ResourceInfo, encoding: Encoding) -> Vec<CachedObject> {
    let ext = match encoding {
        Encoding::Json => "json",
        Encoding::Protobuf => "pb",
    };
    let path = format!(
        "{}/tests/fixtures/realcluster/{}.{ext}",
        env!("CARGO_MANIFEST_DIR"),
        info.resource
    );
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let page = parse_list_page(encoding, &body).unwrap_or_else(|e| panic!("{path}: {e}"));
    page.items
        .into_iter()
        .map(|item| CachedObject::from_list_item(info, encoding, item).expect("cacheable"))
        .collect()
}

#[test]
fn every_captured_object_renders_as_the_other_encodings_cache_holds_it() {
    let mut checked = 0;
    for &(resource, group, version, kind, namespaced) in CAPTURED {
        let info = info(resource, group, version, kind, namespaced);
        let json = cached(&info, Encoding::Json);
        let protobuf = cached(&info, Encoding::Protobuf);
        assert_eq!(json.len(), protobuf.len(), "{resource}");
        let to_protobuf = Transcoder::new(&info, Encoding::Protobuf).expect("a built-in kind");
        let to_json = Transcoder::new(&info, Encoding::Json).expect("a built-in kind");
        for (j, p) in json.iter().zip(&protobuf) {
            let rendered = to_protobuf.object(j).unwrap_or_else(|e| panic!("{}: {e}", j.key));
            assert_eq!(rendered, *p, "{resource} {}: JSON rendered as protobuf", j.key);
            let rendered = to_json.object(p).unwrap_or_else(|e| panic!("{}: {e}", p.key));
            assert_eq!(
                String::from_utf8_lossy(&rendered.body),
                String::from_utf8_lossy(&j.body),
                "{resource} {}: protobuf rendered as JSON",
                p.key
            );
            assert_eq!(rendered, *j, "{resource} {}: the JSON cache's fields", p.key);
            checked += 1;
        }
    }
    assert!(checked >= 100, "{checked} objects");
}

/// A field the 1.36 schema lacks (a newer apiserver's) is never dropped from the other
/// encoding: the object is refused, and its cache falls back to a watch of its own.
#[test]
fn an_object_with_a_field_the_schema_lacks_is_not_rendered() {
    let info = info("configmaps", "", "v1", "ConfigMap", true);
    let item = br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7"},"data":{"k":"v"},"futureField":"x"}"#;
    let object = CachedObject::from_json_item("", "configmaps", Bytes::from_static(item)).unwrap();
    let to_protobuf = Transcoder::new(&info, Encoding::Protobuf).unwrap();
    assert!(matches!(to_protobuf.object(&object), Err(TranscodeError::NotExact)));
    // Without it, the same object renders.
    let item =
        br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7"},"data":{"k":"v"}}"#;
    let object = CachedObject::from_json_item("", "configmaps", Bytes::from_static(item)).unwrap();
    let message = to_protobuf.object(&object).expect("renders").body;
    // A field number the schema lacks, at the end of the message (gogo writes fields in
    // ascending order): refused the other way too.
    let mut newer = message.to_vec();
    newer.extend_from_slice(&[0xfa, 0x01, 0x01, b'x']); // field 31, length-delimited, "x"
    let object = CachedObject::from_protobuf_message("", "configmaps", Bytes::from(newer)).unwrap();
    let to_json = Transcoder::new(&info, Encoding::Json).unwrap();
    assert!(matches!(
        to_json.object(&object),
        Err(TranscodeError::NotExact | TranscodeError::Decode(_))
    ));
    // JSON the schema would write otherwise (members out of Go's order) is refused as well.
    let item =
        br#"{"data":{"k":"v"},"metadata":{"name":"a","namespace":"n","resourceVersion":"7"}}"#;
    let object = CachedObject::from_json_item("", "configmaps", Bytes::from_static(item)).unwrap();
    assert!(matches!(to_protobuf.object(&object), Err(TranscodeError::NotExact)));
}

#[test]
fn custom_resources_and_kinds_the_schema_lacks_have_no_transcoder() {
    let crd = info("widgets", "example.com", "v1", "Widget", true);
    assert!(Transcoder::new(&crd, Encoding::Protobuf).is_none());
    let unknown = info("volumeattachments", "storage.k8s.io", "v1", "VolumeAttachment", false);
    assert!(Transcoder::new(&unknown, Encoding::Json).is_none());
}

mod renderings;
