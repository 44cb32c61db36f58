use super::*;
use proptest::prelude::*;

const CM_GET: &[u8] = include_bytes!("../../../../shared/fixtures/cm-get-json.body");

#[test]
fn builtin_object_is_stored_as_its_list_item() {
    let cm = CachedObject::from_json_object("", "configmaps", Bytes::from_static(CM_GET), false)
        .unwrap();
    assert_eq!(cm.key, "fx/cm-a");
    assert_eq!((cm.namespace(), cm.name()), ("fx", "cm-a"));
    assert_eq!(cm.resource_version, 261);
    assert_eq!(
        cm.labels().to_vec(),
        [("app".into(), "web".into()), ("tier".into(), "front".into())]
    );
    assert_eq!(cm.field_set(), [("metadata.name", "cm-a"), ("metadata.namespace", "fx")]);
    assert!(cm.body.starts_with(br#"{"metadata":{"name":"cm-a","namespace":"fx","#));
    assert!(cm.body.ends_with(br#""data":{"key":"value-of-cm-a"}}"#));
    assert_eq!(cm.label("tier"), Some("front"));
    assert_eq!(cm.label("zone"), None);
    assert_eq!(cm.field("metadata.namespace"), Some("fx"));
    assert_eq!(cm.field("spec.nodeName"), None);
    assert_eq!((Encoding::Json.as_str(), Encoding::Protobuf.as_str()), ("json", "protobuf"));
}

#[test]
fn custom_resource_keeps_type_meta_and_bytes() {
    let body = Bytes::from_static(
        br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"labels":{"b":"2","a":"1"},"name":"w","namespace":"ns","resourceVersion":"7"},"spec":{}}"#,
    );
    let mut with_newline = body.to_vec();
    with_newline.push(b'\n');
    let w =
        CachedObject::from_json_object("example.com", "widgets", Bytes::from(with_newline), true)
            .unwrap();
    assert_eq!(w.body, body);
    assert_eq!(w.key, "ns/w");
    assert_eq!(w.labels().to_vec(), [("a".into(), "1".into()), ("b".into(), "2".into())]);
    // Without the flag, a custom resource would lose what its list items keep.
    let stripped =
        CachedObject::from_json_object("example.com", "widgets", body.clone(), false).unwrap();
    assert!(stripped.body.starts_with(br#"{"metadata":"#));
}

#[test]
fn cluster_scoped_key_and_fields() {
    let node = br#"{"metadata":{"name":"n1","resourceVersion":"3"},"spec":{"unschedulable":true}}"#;
    let n = CachedObject::from_json_item("", "nodes", Bytes::from_static(node)).unwrap();
    assert_eq!((n.key.as_str(), n.namespace()), ("n1", ""));
    assert_eq!(n.field_set(), [("metadata.name", "n1"), ("spec.unschedulable", "true")]);
    assert_eq!(n.field("metadata.namespace"), None, "not in a cluster-scoped kind's set");
}

#[test]
fn repeated_label_keeps_the_last_value() {
    let body = br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"1","labels":{"k":"1","k":"2"}}}"#;
    let o = CachedObject::from_json_item("", "configmaps", Bytes::from_static(body)).unwrap();
    assert_eq!(o.labels().to_vec(), [("k".into(), "2".into())]);
}

#[test]
fn bad_objects_are_errors() {
    let err = |b: &'static [u8]| {
        CachedObject::from_json_item("", "pods", Bytes::from_static(b)).unwrap_err().to_string()
    };
    assert_eq!(err(br#"{"metadata":{"resourceVersion":"1"}}"#), "object has no metadata.name");
    assert_eq!(
        err(br#"{"metadata":{"name":"a","resourceVersion":"x1"}}"#),
        r#"object has an invalid metadata.resourceVersion "x1""#
    );
    assert_eq!(
        err(br#"{"metadata":{"name":"a"}}"#),
        r#"object has an invalid metadata.resourceVersion """#
    );
    assert!(err(b"[1]").starts_with("object is not valid json: invalid json: "));
    let proto = CachedObject::from_protobuf_message("", "pods", Bytes::from_static(b"\x0a\x02"));
    assert_eq!(
        proto.unwrap_err().to_string(),
        "object is not a valid protobuf message: message is truncated"
    );
    // A pod whose spec.nodeName (spec = 2, nodeName = 10) is a varint is refused, not cached
    // with a guessed node; a configmap's message is not read past ObjectMeta.
    let bad_node = b"\x0a\x06\x0a\x01p\x32\x01\x31\x12\x02\x50\x01";
    let pod = CachedObject::from_protobuf_message("", "pods", Bytes::from_static(bad_node));
    assert_eq!(
        pod.unwrap_err().to_string(),
        "object is not a valid protobuf message: field nodeName has the wrong wire type"
    );
    let cm = CachedObject::from_protobuf_message("", "configmaps", Bytes::from_static(bad_node));
    assert_eq!(cm.unwrap().field_set(), [("metadata.name", "p"), ("metadata.namespace", "")]);
}

proptest! {
    #[test]
    fn constructors_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
        let raw = Bytes::from(raw);
        let _ = CachedObject::from_json_item("", "pods", raw.clone());
        let _ = CachedObject::from_json_object("", "pods", raw.clone(), false);
        let _ = CachedObject::from_protobuf_message("", "pods", raw);
    }

    #[test]
    fn json_objects_round_their_metadata(
        name in "[a-z0-9.-]{0,8}",
        rv in "[0-9]{0,22}",
        labels in proptest::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..4),
    ) {
        let labels_json = serde_json::to_string(&labels).unwrap();
        let body = format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"n","resourceVersion":"{rv}","labels":{labels_json}}},"spec":{{}}}}"#
        );
        let built = CachedObject::from_json_object("", "pods", Bytes::from(body), false);
        match (name.is_empty(), rv.parse::<u64>()) {
            (true, _) => prop_assert!(matches!(built, Err(ObjectError::MissingName))),
            (false, Err(_)) => prop_assert!(matches!(built, Err(ObjectError::ResourceVersion(_)))),
            (false, Ok(rv)) => {
                let o = built.unwrap();
                prop_assert_eq!(&o.key, &format!("n/{name}"));
                prop_assert_eq!(o.resource_version, rv);
                prop_assert_eq!(&o.labels().to_vec(), &labels.into_iter().collect::<Vec<_>>());
                prop_assert_eq!(o.field("spec.nodeName"), Some(""));
                prop_assert_eq!(o.body.get(..12), Some(br#"{"metadata":"#.as_slice()));
            }
        }
    }
}

#[test]
fn labels_and_fields_are_read_back_as_they_were_whatever_their_bytes() {
    let pairs = [("", ""), ("a\0b", "x"), ("app", ""), ("k8s.io/name", "ünï\0códe")];
    let fields = [("spec.nodeName", "n\u{ff}"), ("status.phase", "")];
    let (pairs, fields, none): (&[_], &[_], &[(&str, &str)]) = (&pairs, &fields, &[]);
    for (labels, fields) in [(pairs, fields), (pairs, none), (none, fields), (none, none)] {
        let attributes = Attributes::new(labels.iter().copied(), fields.iter().copied());
        let read = attributes.labels();
        assert_eq!(read.iter().collect::<Vec<_>>(), labels);
        assert_eq!(read.is_empty(), labels.is_empty());
        assert_eq!(attributes.fields().collect::<Vec<_>>(), fields);
        if !labels.is_empty() {
            assert_eq!(read.get("app"), Some(""));
            assert_eq!(read.get("a\0b"), Some("x"));
        }
        assert_eq!(read.get("a"), None);
        assert_eq!(read.get("spec.nodeName"), None, "a field is no label");
    }
    // The same labels read the same whatever fields follow them.
    let with = Attributes::new(pairs.iter().copied(), fields.iter().copied());
    let without = Attributes::new(pairs.iter().copied(), []);
    assert_eq!(with.labels(), without.labels());
}
