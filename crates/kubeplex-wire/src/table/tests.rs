//! Byte-for-byte comparisons with the kube-apiserver captures, and per-printer behaviour.

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../../shared/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(&format!("{name}.body"))).unwrap_or(Value::Null)
}

fn time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

/// The capture's `Date` response header: when the apiserver computed the ages.
fn date_header(name: &str) -> DateTime<Utc> {
    let http = String::from_utf8(fixture(&format!("{name}.http"))).unwrap_or_default();
    let date = http.lines().find_map(|l| l.strip_prefix("Date: ")).unwrap_or_default();
    DateTime::parse_from_rfc2822(date).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_default()
}

#[test]
fn configmap_list_matches_capture() {
    let list = fixture_json("cm-list-json");
    let items: Vec<&Value> = fields::arr_at(&list, &["items"]).iter().collect();
    assert_eq!(items.len(), 4);
    let meta = ListMetaOut { resource_version: "265".to_string(), ..Default::default() };
    let now = date_header("cm-list-table");
    let body = table_for_list("configmaps", "", &items, meta, IncludeObject::Metadata, now);
    assert_eq!(text(body), text(fixture("cm-list-table.body")));
}

#[test]
fn deployment_list_matches_capture() {
    let expected = fixture_json("deploy-list-table");
    // The capture keeps the deployment's metadata; its spec and status are what the capture
    // run created (`kubectl create deployment d --image=registry.example/app:1 --replicas=0`
    // with container `c`, label `app=x`), with the apiserver's defaults.
    let deployment = json!({
        "kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": expected["rows"][0]["object"]["metadata"].clone(),
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": 1, "terminatingReplicas": 0}
    });
    let meta = ListMetaOut { resource_version: "17718".to_string(), ..Default::default() };
    let now = date_header("deploy-list-table");
    let body =
        table_for_list("deployments", "apps", &[&deployment], meta, IncludeObject::Metadata, now);
    assert_eq!(text(body), text(fixture("deploy-list-table.body")));
}

#[test]
fn pod_list_matches_capture() {
    let expected = fixture_json("pod-list-table");
    // p-1 is captured whole in pod-list-fieldsel-node; p-2 only differs in metadata (taken
    // from the table's PartialObjectMetadata) and node.
    let p1 = fields::arr_at(&fixture_json("pod-list-fieldsel-node"), &["items"])
        .first()
        .cloned()
        .unwrap_or(Value::Null);
    let mut p2 = p1.clone();
    p2["metadata"] = expected["rows"][1]["object"]["metadata"].clone();
    p2["spec"]["nodeName"] = json!("node-2");
    let meta = ListMetaOut { resource_version: "265".to_string(), ..Default::default() };
    let now = date_header("pod-list-table");
    let body = table_for_list("pods", "", &[&p1, &p2], meta, IncludeObject::Metadata, now);
    assert_eq!(text(body), text(fixture("pod-list-table.body")));
}

#[test]
fn watch_events_match_capture() {
    let body = text(fixture("watch-table.body"));
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 4);
    for (i, line) in lines.iter().enumerate() {
        let event: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let prefix = format!(r#"{{"type":{},"object":"#, event["type"]);
        let expected = line.strip_prefix(&prefix).and_then(|l| l.strip_suffix('}'));
        let metadata = event["object"]["rows"][0]["object"]["metadata"].clone();
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": metadata,
            "data": {"k": "v"}});
        // The apiserver converted each event right after the write recorded in managedFields.
        let now = time(cm["metadata"]["managedFields"][0]["time"].as_str().unwrap_or_default());
        let got =
            table_for_watch_event("configmaps", "", &cm, IncludeObject::Metadata, now, i == 0);
        assert_eq!(Some(text(got).as_str()), expected, "event {i}");
    }
    assert!(lines.get(1).is_some_and(|l| l.contains(r#""columnDefinitions":null"#)));
}

#[test]
fn get_is_the_first_watch_event_plus_newline() {
    let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "a", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let now = time("2026-01-01T00:00:05Z");
    let mut event = table_for_watch_event("configmaps", "", &cm, IncludeObject::None, now, true);
    event.push(b'\n');
    assert_eq!(table_for_object("configmaps", "", &cm, IncludeObject::None, now), event);
    assert_eq!(
        text(event),
        concat!(
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"#,
            r#""columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"#,
            r#""Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names","priority":0},"#,
            r#"{"name":"Data","type":"string","format":"","description":"Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.","priority":0},"#,
            r#"{"name":"Age","type":"string","format":"","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata","priority":0}],"#,
            r#""rows":[{"cells":["a",0,"5s"],"object":null}]}"#,
            "\n"
        )
    );
}

#[test]
fn include_object_parsing_and_rendering() {
    assert_eq!(IncludeObject::from_query(None), Ok(IncludeObject::Metadata));
    assert_eq!(IncludeObject::from_query(Some("")), Ok(IncludeObject::Metadata));
    assert_eq!(IncludeObject::from_query(Some("Metadata")), Ok(IncludeObject::Metadata));
    assert_eq!(IncludeObject::from_query(Some("None")), Ok(IncludeObject::None));
    assert_eq!(IncludeObject::from_query(Some("Object")), Ok(IncludeObject::Object));
    let err = IncludeObject::from_query(Some("object<1>")).err().map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(
            "Unable to convert to Table as requested: includeObject: Invalid value: \
             \"object\\u003c1\\u003e\": must be 'Metadata', 'Object', 'None', or empty"
        )
    );

    let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "a", "resourceVersion": "7"}, "data": {"x": "<&>"}});
    let now = time("2026-01-01T00:00:05Z");
    let body =
        text(table_for_watch_event("configmaps", "", &cm, IncludeObject::Object, now, false));
    assert!(body.ends_with(concat!(
        r#""rows":[{"cells":["a",1,"\u003cunknown\u003e"],"object":{"kind":"ConfigMap","#,
        r#""apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7"},"#,
        r#""data":{"x":"\u003c\u0026\u003e"}}}]}"#
    )));
}

#[test]
fn list_meta_and_empty_lists() {
    let meta = ListMetaOut {
        resource_version: "10".to_string(),
        continue_token: Some("eyJ2Ijo".to_string()),
        remaining_item_count: Some(0),
    };
    let now = time("2026-01-01T00:00:00Z");
    let body = text(table_for_list("secrets", "", &[], meta, IncludeObject::Metadata, now));
    assert!(body.starts_with(concat!(
        r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","#,
        r#""metadata":{"resourceVersion":"10","continue":"eyJ2Ijo","remainingItemCount":0},"#
    )));
    assert!(body.ends_with("\"rows\":[]}\n"));
    let meta = ListMetaOut { continue_token: Some(String::new()), ..Default::default() };
    let body = text(table_for_list("x", "example.com", &[], meta, IncludeObject::None, now));
    assert!(body.starts_with(r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"#));
}

#[test]
fn supported_resources() {
    for (resource, group) in [
        ("configmaps", ""),
        ("pods", ""),
        ("secrets", ""),
        ("services", ""),
        ("namespaces", ""),
        ("nodes", ""),
        ("events", ""),
        ("events", "events.k8s.io"),
        ("endpoints", ""),
        ("endpointslices", "discovery.k8s.io"),
        ("deployments", "apps"),
        ("replicasets", "apps"),
        ("widgets", "example.com"),
        ("gateways", "gateway.networking.k8s.io"),
    ] {
        assert!(supports(resource, group), "{group}/{resource}");
    }
    for (resource, group) in
        [("daemonsets", "apps"), ("serviceaccounts", ""), ("leases", "coordination.k8s.io")]
    {
        assert!(!supports(resource, group), "{group}/{resource}");
    }
}

/// The cells of one object's row, as JSON.
pub(super) fn cells(resource: &str, group: &str, obj: &Value, now: DateTime<Utc>) -> Value {
    let body = table_for_watch_event(resource, group, obj, IncludeObject::None, now, false);
    let table: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    table["rows"][0]["cells"].clone()
}

fn at_ago(now: DateTime<Utc>, secs: i64) -> String {
    (now - Duration::seconds(secs)).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

mod pods;
mod printers;

/// Arbitrary JSON, shallow enough to stay fast. Floats are optional because Go (and so this
/// module) prints an integral float as an integer, which reads back as a different Number.
fn arb_json(floats: bool) -> impl Strategy<Value = Value> {
    // Value::from maps a non-finite float to null.
    let float = any::<f64>().prop_map(move |f| if floats { Value::from(f) } else { Value::Null });
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        float,
        "[a-zA-Z<&>:\" ]{0,8}".prop_map(Value::from),
        Just(Value::from("2026-01-01T00:00:00Z")),
        Just(Value::from("Always")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec(
                (
                    prop_oneof![
                        "[a-z]{1,6}".boxed(),
                        Just("state".to_string()).boxed(),
                        Just("terminated".to_string()).boxed(),
                        Just("name".to_string()).boxed(),
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_panics_and_always_emits_json(
        top in arb_json(true),
        metadata in arb_json(true),
        spec in arb_json(true),
        status in arb_json(true),
        which in 0usize..11,
    ) {
        let (resource, group) = [
            ("configmaps", ""), ("pods", ""), ("secrets", ""), ("services", ""),
            ("namespaces", ""), ("nodes", ""), ("events", ""), ("events", "events.k8s.io"),
            ("endpoints", ""), ("endpointslices", "discovery.k8s.io"), ("widgets", "x.io"),
        ][which];
        let shaped = json!({"metadata": metadata, "spec": spec, "status": status,
            "subsets": top.clone(), "endpoints": top.clone(), "ports": top.clone()});
        let now = time("2026-01-01T00:00:00Z");
        for obj in [&top, &shaped] {
            for include in [IncludeObject::None, IncludeObject::Metadata, IncludeObject::Object] {
                let body = table_for_object(resource, group, obj, include, now);
                let parsed: Result<Value, _> = serde_json::from_slice(&body);
                prop_assert!(parsed.is_ok(), "{}", String::from_utf8_lossy(&body));
            }
        }
    }

    #[test]
    fn object_rows_round_trip(obj in arb_json(false)) {
        let now = time("2026-01-01T00:00:00Z");
        let body = table_for_object("widgets", "x.io", &obj, IncludeObject::Object, now);
        let table: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        prop_assert_eq!(&table["rows"][0]["object"], &obj);
    }
}
