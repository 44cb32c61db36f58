use proptest::prelude::*;

use super::*;

/// A custom resource as the apiserver writes it (Go, unstructured: keys sorted).
const WIDGET: &str = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"annotations":{"a\u003cb":"x\u0026y"},"creationTimestamp":"2026-11-22T10:18:33Z","deletionGracePeriodSeconds":0,"deletionTimestamp":"2026-11-22T10:19:33Z","finalizers":["example.com/f"],"generation":3,"labels":{"app":"web"},"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:size":{}}},"manager":"kubectl","operation":"Update","time":"2026-11-22T10:18:33Z"},{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}},"manager":"ctl","operation":"Update","subresource":"status","time":"2026-11-22T10:18:34Z"}],"name":"w1","namespace":"fx","ownerReferences":[{"apiVersion":"v1","blockOwnerDeletion":false,"controller":true,"kind":"ConfigMap","name":"cm","uid":"u-1"}],"resourceVersion":"42","uid":"0c-1"},"spec":{"size":1}}"#;

#[test]
fn partial_object_metadata_matches_go() {
    // json.Marshal(meta.AsPartialObjectMetadata(u)) for WIDGET, apimachinery v0.36.4.
    let expected = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"w1","namespace":"fx","uid":"0c-1","resourceVersion":"42","generation":3,"creationTimestamp":"2026-11-22T10:18:33Z","deletionTimestamp":"2026-11-22T10:19:33Z","deletionGracePeriodSeconds":0,"labels":{"app":"web"},"annotations":{"a\u003cb":"x\u0026y"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u-1","controller":true,"blockOwnerDeletion":false}],"finalizers":["example.com/f"],"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"example.com/v1","time":"2026-11-22T10:18:33Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:size":{}}}},{"manager":"ctl","operation":"Update","apiVersion":"example.com/v1","time":"2026-11-22T10:18:34Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}},"subresource":"status"}]}}"#;
    let got = partial_object_metadata_json(WIDGET.as_bytes(), "meta.k8s.io/v1").unwrap();
    assert_eq!(String::from_utf8(got).unwrap(), expected);
}

#[test]
fn empty_members_are_omitted_like_go() {
    let object = br#"{"metadata":{"generation":0,"labels":{},"name":"","ownerReferences":[{"name":"o","uid":null}],"uid":"u","zz":1}}"#;
    let got = partial_object_metadata_json(object, "meta.k8s.io/v1").unwrap();
    let expected = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"uid":"u","ownerReferences":[{"apiVersion":"","kind":"","name":"o","uid":""}]}}"#;
    assert_eq!(String::from_utf8(got).unwrap(), expected);
    let meta = ListMeta { resource_version: "9", ..ListMeta::default() };
    let list = partial_object_metadata_list_json("meta.k8s.io/v1", &meta, &[object]).unwrap();
    let tail = b"\"ownerReferences\":[{\"apiVersion\":\"\",\"kind\":\"\",\"name\":\"o\",\"uid\":\"\"}]}}]}\n";
    assert!(list.ends_with(tail));
}

#[test]
fn lists_match_go() {
    // UnstructuredList encoded by the apiserver's JSON serializer (streaming or not).
    let meta =
        ListMeta { resource_version: "43", continue_token: "tok", remaining_item_count: Some(7) };
    let got = list_json("example.com/v1", "WidgetList", &meta, &[WIDGET, WIDGET]);
    let expected = format!(
        r#"{{"apiVersion":"example.com/v1","items":[{WIDGET},{WIDGET}],"kind":"WidgetList","metadata":{{"continue":"tok","remainingItemCount":7,"resourceVersion":"43"}}}}"#
    ) + "\n";
    assert_eq!(String::from_utf8(got).unwrap(), expected);
    let meta = ListMeta { resource_version: "44", ..ListMeta::default() };
    let empty: [&[u8]; 0] = [];
    assert_eq!(
        list_json("example.com/v1", "WidgetList", &meta, &empty),
        b"{\"apiVersion\":\"example.com/v1\",\"items\":[],\"kind\":\"WidgetList\",\"metadata\":{\"continue\":\"\",\"resourceVersion\":\"44\"}}\n"
    );
}

#[test]
fn bookmark_matches_go() {
    assert_eq!(
        bookmark_json("example.com/v1", "Widget", "45", true),
        br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"annotations":{"k8s.io/initial-events-end":"true"},"resourceVersion":"45"}}"#
    );
    assert_eq!(
        bookmark_json("example.com/v1", "Widget", "46", false),
        br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"resourceVersion":"46"}}"#
    );
}

proptest! {
    #[test]
    fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = partial_object_metadata_json(&data, "meta.k8s.io/v1");
    }

    #[test]
    fn never_panics_on_odd_metadata(meta in "\\{(\"(name|ownerReferences|managedFields|labels)\":(1|null|\\[\\]|\\[1\\]|\\[\\{\\}\\]|\"x\"|\\{\\}),?){0,4}\\}") {
        let object = format!("{{\"metadata\":{}}}", meta.trim_end_matches(",}").replace(",}", "}"));
        let _ = partial_object_metadata_json(object.as_bytes(), "meta.k8s.io/v1");
    }
}
