//! The codec against real kube-apiserver captures (shared/fixtures) and Go's rules.

use serde_json::{json, Value};

use super::proto_decode::Reader;
use super::*;
use crate::gojson;

mod realcluster;
mod wire_fields;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../../shared/fixtures/{name}.body", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A JSON fixture body without the `\n` that json.Encoder appends.
fn json_fixture(name: &str) -> (Vec<u8>, Value) {
    let mut bytes = fixture(name);
    assert_eq!(bytes.pop(), Some(b'\n'), "{name} ends with a newline");
    let value = serde_json::from_slice(&bytes).unwrap();
    (bytes, value)
}

fn ty(api_version: &str, kind: &str) -> TypeRef {
    type_for(api_version, kind).unwrap()
}

/// The message inside a protobuf fixture's envelope, checked against `api_version`/`kind`.
fn proto_fixture(name: &str, api_version: &str, kind: &str) -> Vec<u8> {
    let body = fixture(name);
    let unknown = crate::proto::decode_unknown(&body).unwrap();
    assert_eq!((unknown.api_version, unknown.kind), (api_version, kind));
    assert_eq!((unknown.content_encoding, unknown.content_type), ("", ""));
    // The envelope itself is rebuilt byte for byte.
    assert_eq!(
        crate::proto::encode_unknown(api_version, kind, unknown.raw),
        body,
        "{name} envelope"
    );
    unknown.raw.to_vec()
}

/// The raw messages of a List's repeated `items` (field 2).
fn list_items(list: &[u8]) -> Vec<Vec<u8>> {
    let mut r = Reader { buf: list, pos: 0 };
    let mut items = Vec::new();
    while !r.done() {
        let (num, wire) = r.key().unwrap();
        let payload = r.expect_len(wire, "list").unwrap();
        if num == 2 {
            items.push(payload.to_vec());
        }
    }
    items
}

fn name_of(item: &Value) -> &str {
    item["metadata"]["name"].as_str().unwrap()
}

#[test]
fn configmap_get_protobuf_decodes_to_the_json_capture() {
    let raw = proto_fixture("cm-get-protobuf", "v1", "ConfigMap");
    let (json_bytes, _) = json_fixture("cm-get-json");
    let decoded = from_protobuf(ty("v1", "ConfigMap"), &raw).unwrap();
    assert_eq!(
        String::from_utf8(serde_json::to_vec(&decoded).unwrap()).unwrap(),
        String::from_utf8(json_bytes).unwrap()
    );
}

#[test]
fn configmap_json_encodes_to_the_protobuf_capture() {
    let raw = proto_fixture("cm-get-protobuf", "v1", "ConfigMap");
    let (_, object) = json_fixture("cm-get-json");
    assert_eq!(to_protobuf(ty("v1", "ConfigMap"), &object).unwrap(), raw);
}

#[test]
fn configmap_list_round_trips_between_the_captures() {
    let raw = proto_fixture("cm-list-protobuf", "v1", "ConfigMapList");
    let (json_bytes, object) = json_fixture("cm-list-json");
    let t = ty("v1", "ConfigMapList");
    let decoded = from_protobuf(t, &raw).unwrap();
    assert_eq!(serde_json::to_vec(&decoded).unwrap(), json_bytes);
    assert_eq!(to_protobuf(t, &object).unwrap(), raw);
}

#[test]
fn pod_list_protobuf_items_match_the_json_capture() {
    let raw = proto_fixture("pod-list-protobuf", "v1", "PodList");
    let (_, expected) = json_fixture("pod-list-fieldsel-node");
    let decoded = from_protobuf(ty("v1", "PodList"), &raw).unwrap();
    assert_eq!(decoded["kind"], "PodList");
    assert_eq!(decoded["metadata"], expected["metadata"]);
    let items = decoded["items"].as_array().unwrap();
    let wanted = expected["items"].as_array().unwrap();
    assert!(!wanted.is_empty());
    let raw_items = list_items(&raw);
    assert_eq!(raw_items.len(), items.len());
    for want in wanted {
        let i = items.iter().position(|item| name_of(item) == name_of(want)).unwrap();
        // List items carry no kind/apiVersion in JSON.
        assert_eq!(
            String::from_utf8(serde_json::to_vec(&items[i]).unwrap()).unwrap(),
            String::from_utf8(serde_json::to_vec(want).unwrap()).unwrap()
        );
        assert_eq!(to_protobuf(ty("v1", "Pod"), want).unwrap(), raw_items[i]);
    }
}

#[test]
fn every_pod_in_the_protobuf_list_survives_json_and_back() {
    let raw = proto_fixture("pod-list-protobuf", "v1", "PodList");
    let t = ty("v1", "PodList");
    let decoded = from_protobuf(t, &raw).unwrap();
    assert_eq!(to_protobuf(t, &decoded).unwrap(), raw);
}

#[test]
fn canonicalize_is_the_identity_on_captured_objects() {
    let cases = [
        ("cm-get-json", "v1", "ConfigMap"),
        ("cm-list-json", "v1", "ConfigMapList"),
        ("cm-list-page1", "v1", "ConfigMapList"),
        ("pod-list-fieldsel-node", "v1", "PodList"),
        ("cm-get-metadata", "meta.k8s.io/v1", "PartialObjectMetadata"),
        ("cm-list-metadata", "meta.k8s.io/v1", "PartialObjectMetadataList"),
        ("cm-get-notfound", "v1", "Status"),
        ("err-conflict", "v1", "Status"),
        ("err-too-large-rv", "v1", "Status"),
        ("err-rvmatch-exact-unset", "v1", "Status"),
    ];
    for (name, api_version, kind) in cases {
        let (bytes, object) = json_fixture(name);
        let canonical = canonicalize(ty(api_version, kind), &object).unwrap();
        assert_eq!(canonical.unknown_fields, Vec::<String>::new(), "{name}");
        assert_eq!(
            String::from_utf8(serde_json::to_vec(&canonical.value).unwrap()).unwrap(),
            String::from_utf8(bytes.clone()).unwrap(),
            "{name}"
        );
        assert_eq!(gojson::to_vec(&canonical.value), bytes, "{name} through write_json");
    }
}

/// Reverses the key order of every object except managed-fields sets, whose raw JSON the
/// apiserver keeps as sent.
fn shuffled(v: &Value) -> Value {
    match v {
        Value::Object(entries) => Value::Object(
            entries
                .iter()
                .rev()
                .map(|(k, v)| (k.clone(), if k == "fieldsV1" { v.clone() } else { shuffled(v) }))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(shuffled).collect()),
        other => other.clone(),
    }
}

#[test]
fn canonicalize_restores_go_order_from_shuffled_keys() {
    for (name, kind) in [("cm-get-json", "ConfigMap"), ("pod-list-fieldsel-node", "PodList")] {
        let (bytes, object) = json_fixture(name);
        let mixed = shuffled(&object);
        assert_ne!(serde_json::to_vec(&mixed).unwrap(), bytes);
        let canonical = canonicalize(ty("v1", kind), &mixed).unwrap();
        assert_eq!(serde_json::to_vec(&canonical.value).unwrap(), bytes, "{name}");
    }
}

#[test]
fn unknown_fields_are_dropped_and_named_as_strict_decoding_names_them() {
    let (bytes, object) = json_fixture("pod-list-fieldsel-node");
    let mut pod = object["items"][0].clone();
    pod["bogus"] = json!(1);
    pod["spec"]["foo"] = json!({"x": 1});
    pod["spec"]["containers"][0]["bar"] = json!(true);
    pod["metadata"]["labels"]["any-key"] = json!("label values are a map, never unknown");
    let canonical = canonicalize(ty("v1", "Pod"), &pod).unwrap();
    assert_eq!(canonical.unknown_fields, ["spec.containers[0].bar", "spec.foo", "bogus"]);
    let mut expected: Value = serde_json::from_slice(&bytes).unwrap();
    expected["items"][0]["metadata"]["labels"]["any-key"] =
        pod["metadata"]["labels"]["any-key"].clone();
    assert_eq!(canonical.value, expected["items"][0]);
}

#[test]
fn go_zero_values_and_omitempty() {
    let t = ty("v1", "Pod");
    let out = canonicalize(t, &json!({"metadata": {"name": "p", "labels": null}})).unwrap();
    // No omitempty on spec.containers: a nil slice is null. Structs are never omitted.
    assert_eq!(
        serde_json::to_string(&out.value).unwrap(),
        r#"{"metadata":{"name":"p"},"spec":{"containers":null},"status":{}}"#
    );
    let out = canonicalize(
        t,
        &json!({"spec": {"containers": [], "priority": 0, "hostNetwork": false,
            "securityContext": {}, "terminationGracePeriodSeconds": null}}),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&out.value).unwrap(),
        r#"{"metadata":{},"spec":{"containers":[],"securityContext":{},"priority":0},"status":{}}"#
    );
    let cm = canonicalize(
        ty("v1", "ConfigMap"),
        &json!({"data": {"b": "2", "a": null}, "binaryData": {"x": "aGk=", "y": null},
            "metadata": {"creationTimestamp": "0001-01-01T00:00:00Z", "deletionTimestamp": null}}),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&cm.value).unwrap(),
        r#"{"metadata":{},"data":{"a":"","b":"2"},"binaryData":{"x":"aGk=","y":null}}"#
    );
}

#[test]
fn special_types_are_written_as_their_go_marshallers_write_them() {
    let pod = json!({
        "metadata": {"creationTimestamp": "2026-11-22T12:18:33.75+02:00"},
        "spec": {"containers": [{
            "name": "c",
            "resources": {"limits": {"memory": "1024Mi", "cpu": 0.5}, "requests": {"cpu": "100m"}},
            "livenessProbe": {"httpGet": {"port": "http"}},
            "readinessProbe": {"tcpSocket": {"port": 8080}},
        }]},
    });
    let out = canonicalize(ty("v1", "Pod"), &pod).unwrap();
    assert_eq!(out.value["metadata"]["creationTimestamp"], "2026-11-22T10:18:33Z");
    let c = &out.value["spec"]["containers"][0];
    assert_eq!(
        c["resources"],
        json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m"}})
    );
    assert_eq!(c["livenessProbe"]["httpGet"], json!({"port": "http"}));
    assert_eq!(c["readinessProbe"]["tcpSocket"], json!({"port": 8080}));

    let event =
        canonicalize(ty("v1", "Event"), &json!({"eventTime": "2026-11-22T10:18:33.1234567Z"}))
            .unwrap();
    assert_eq!(event.value["eventTime"], "2026-11-22T10:18:33.123456Z");
    assert_eq!(event.value["firstTimestamp"], Value::Null);
    assert_eq!(event.value["involvedObject"], json!({}));
}

#[test]
fn type_errors_use_go_wording() {
    let err = canonicalize(
        ty("v1", "Pod"),
        &json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    let err = canonicalize(ty("v1", "Pod"), &json!({"spec": {"priority": 1.5}})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.priority of type int32"
    );
    let err = canonicalize(ty("v1", "Pod"), &json!([])).unwrap_err();
    assert_eq!(err.to_string(), "json: cannot unmarshal array into Go value of type v1.Pod");
    let err =
        canonicalize(ty("v1", "Pod"), &json!({"spec": {"overhead": {"cpu": "1kk"}}})).unwrap_err();
    assert_eq!(err.to_string(), "unable to parse quantity's suffix");
}

#[test]
fn protobuf_writes_scalars_always_and_pointers_when_set() {
    let t = ty("v1", "Service");
    let svc = json!({"spec": {"ports": [{"port": -1, "targetPort": "web"}], "allocateLoadBalancerNodePorts": false}});
    let bytes = to_protobuf(t, &svc).unwrap();
    // metadata (field 1) is written though empty, with every non-pointer scalar inside it.
    let meta = list_field(&bytes, 1);
    assert_eq!(meta, b"\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00");
    let spec = list_field(&bytes, 2);
    let port = list_field(&spec, 1);
    // port: name "", protocol "", port -1 as ten bytes, targetPort {type 1, 0, "web"}, nodePort 0.
    assert_eq!(
        port,
        b"\x0a\x00\x12\x00\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x22\x09\x08\x01\x10\x00\x1a\x03web\x28\x00"
    );
    // allocateLoadBalancerNodePorts (field 20) is a *bool set to false: written.
    assert!(spec.windows(3).any(|w| w == b"\xa0\x01\x00"));
    assert_eq!(from_protobuf(t, &bytes).unwrap()["spec"]["ports"][0]["port"], -1);
}

/// The last occurrence of length-delimited field `num`.
fn list_field(msg: &[u8], num: u32) -> Vec<u8> {
    let mut r = Reader { buf: msg, pos: 0 };
    let mut found = None;
    while !r.done() {
        let (n, wire) = r.key().unwrap();
        if wire == 2 {
            let payload = r.expect_len(wire, "").unwrap();
            if n == num {
                found = Some(payload.to_vec());
            }
        } else {
            r.skip(wire).unwrap();
        }
    }
    found.unwrap()
}

#[test]
fn secret_bytes_round_trip() {
    let t = ty("v1", "Secret");
    let secret = json!({"data": {"k": "aGVsbG8=", "e": ""}, "type": "Opaque"});
    let bytes = to_protobuf(t, &secret).unwrap();
    let back = from_protobuf(t, &bytes).unwrap();
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        r#"{"kind":"Secret","apiVersion":"v1","metadata":{},"data":{"e":"","k":"aGVsbG8="},"type":"Opaque"}"#
    );
    let err = canonicalize(t, &json!({"data": {"k": "not base64!"}})).unwrap_err();
    assert!(matches!(err, CodecError::JsonValue { ref field, .. } if field == "data.k"), "{err:?}");
}

#[test]
fn protobuf_errors_are_reported_not_panicked() {
    let t = ty("v1", "ConfigMap");
    assert_eq!(from_protobuf(t, b"\x0a\x05\x0a"), Err(CodecError::ProtoTruncated));
    assert_eq!(from_protobuf(t, b"\x00"), Err(CodecError::ProtoTag(0)));
    assert!(matches!(from_protobuf(t, b"\x08\x01"), Err(CodecError::ProtoWireType { .. })));
    // Unknown fields are skipped, as gogo's Unmarshal does.
    let out = from_protobuf(t, b"\x78\x05\x12\x06\x0a\x01a\x12\x01b").unwrap();
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{},"data":{"a":"b"}}"#
    );
}

#[test]
fn type_for_knows_the_served_kinds() {
    for (api_version, kind) in [
        ("v1", "Pod"),
        ("v1", "EndpointsList"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("meta.k8s.io/v1", "Status"),
        ("meta.k8s.io/v1", "PartialObjectMetadataList"),
    ] {
        let t = type_for(api_version, kind).unwrap();
        assert_eq!((t.api_version(), t.kind()), (api_version, kind));
    }
    assert!(type_for("v1", "Deployment").is_none());
    assert!(type_for("apps/v1", "Pod").is_none());
}

/// (type, object bytes) of each frame of a protobuf watch: a 4-byte big-endian length, then a
/// WatchEvent {type = 1, object = 2 RawExtension {raw = 1}}.
fn watch_frames(body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut rest = body;
    while let Some((len, after)) = rest.split_first_chunk::<4>() {
        let (frame, next) = after.split_at(u32::from_be_bytes(*len) as usize);
        rest = next;
        let mut r = Reader { buf: frame, pos: 0 };
        let (mut kind, mut object) = (String::new(), Vec::new());
        while !r.done() {
            let (num, wire) = r.key().unwrap();
            let payload = r.expect_len(wire, "event").unwrap();
            match num {
                1 => kind = String::from_utf8(payload.to_vec()).unwrap(),
                _ => object = list_field(payload, 1),
            }
        }
        frames.push((kind, object));
    }
    assert!(rest.is_empty());
    frames
}

#[test]
fn protobuf_watch_objects_round_trip_byte_for_byte() {
    for name in ["watch-protobuf", "watchlist-protobuf"] {
        let frames = watch_frames(&fixture(name));
        assert!(frames.len() >= 3, "{name}");
        for (event, object) in frames {
            let unknown = crate::proto::decode_unknown(&object).unwrap();
            let t = ty(unknown.api_version, unknown.kind);
            let decoded = from_protobuf(t, unknown.raw).unwrap();
            assert_eq!(to_protobuf(t, &decoded).unwrap(), unknown.raw, "{name} {event}");
            if event == "BOOKMARK" {
                assert!(decoded["metadata"]["resourceVersion"].is_string());
            }
        }
    }
}

#[test]
fn json_watch_objects_are_canonical_and_survive_protobuf() {
    let watch_event = ty("meta.k8s.io/v1", "WatchEvent");
    for name in
        ["watch-json", "watch-json-labelsel", "watch-rv0", "watchlist-json", "watch-metadata"]
    {
        let body = fixture(name);
        let lines: Vec<&[u8]> = body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
        assert!(lines.len() >= 2, "{name}");
        for line in lines {
            let event: Value = serde_json::from_slice(line).unwrap();
            let canonical = canonicalize(watch_event, &event).unwrap();
            assert_eq!(gojson::to_vec(&canonical.value), line, "{name}");
            let object = &event["object"];
            let t = ty(object["apiVersion"].as_str().unwrap(), object["kind"].as_str().unwrap());
            assert_eq!(canonicalize(t, object).unwrap().value, *object, "{name}");
            let back = from_protobuf(t, &to_protobuf(t, object).unwrap()).unwrap();
            assert_eq!(back, *object, "{name}");
        }
    }
}
