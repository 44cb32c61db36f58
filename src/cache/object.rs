//! One cached object: its bytes exactly as the upstream sent them, plus the few fields the cache
//! routes and filters on (key, namespace, name, resourceVersion, labels, selectable fields).
//!
//! Everything here is computed once, when the object enters the cache; answering a request only
//! compares these fields and copies `body`.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use crate::wire::meta::{self, ObjectMetaRef};
use crate::wire::proto;
use crate::wire::resource::ResourceInfo;
use crate::wire::selector::fields_by_kind::{FieldRules, FieldSource};
use crate::wire::selector::LabelSource;

pub use crate::wire::resource::Encoding;

/// An object in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    /// `namespace/name`, or `name` for cluster-scoped objects. Objects are ordered by the bytes of
    /// this string, which is etcd's key order (`a-b/x` sorts before `a/x`).
    pub key: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub resource_version: u64,
    /// `metadata.labels`, sorted by key, one entry per key.
    pub labels: Vec<(String, String)>,
    /// The value of each selectable field of the resource that its field set has (the registry's
    /// `GetAttrs`); a field missing here reads as "" to a selector, as in `fields.Set.Get`.
    pub fields: Vec<(String, String)>,
    /// The object as it appears in a list: JSON list item or bare protobuf message.
    pub body: Bytes,
}

/// Why an object from the upstream could not be cached.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object is not valid json: {0}")]
    Json(#[from] meta::Error),
    #[error("object is not a valid protobuf message: {0}")]
    Protobuf(#[from] proto::Error),
    #[error("object has no metadata.name")]
    MissingName,
    #[error("object has an invalid metadata.resourceVersion {0:?}")]
    ResourceVersion(String),
}

/// Whether a cache of this encoding holds the value of `field` (a canonical field name of the
/// resource): a JSON cache every selectable field of built-in kinds; a protobuf cache those its
/// partial decode reads (`proto::fields`: ObjectMeta's, and the kind's table entry).
pub fn holds_field(encoding: Encoding, group: &str, resource: &str, field: &str) -> bool {
    match encoding {
        Encoding::Json => true,
        Encoding::Protobuf => proto::fields::holds_field(group, resource, field),
    }
}

impl CachedObject {
    /// A JSON object on its own, as a watch event or a GET carries it (`kind` and `apiVersion`
    /// first). Built-in kinds are stored in list-item form, without those two members (which is a
    /// new buffer); a custom resource keeps them, as its list items do, and its bytes are kept.
    pub fn from_json_object(
        group: &str,
        resource: &str,
        object: Bytes,
        custom_resource: bool,
    ) -> Result<Self, ObjectError> {
        let object = trim(object);
        if custom_resource {
            return Self::from_json_item(group, resource, object);
        }
        let item = meta::strip_type_meta(&object)?;
        // An object that had no type meta comes out identical: keep the upstream's buffer.
        let body = if item == object.as_ref() { object } else { Bytes::from(item) };
        Self::from_json_item(group, resource, body)
    }

    /// A JSON list item, kept byte for byte (pass `Bytes::slice_ref` of the list body to avoid a
    /// copy).
    pub fn from_json_item(group: &str, resource: &str, item: Bytes) -> Result<Self, ObjectError> {
        let item = trim(item);
        let rules = FieldRules::for_resource(group, resource);
        let meta = meta::object_meta_json(&item)?;
        // Only kinds with selectable fields outside ObjectMeta pay for a full parse.
        let needs_body = rules.supported_fields().iter().any(|f| !f.starts_with("metadata."));
        let fields = if needs_body {
            let value: Value = serde_json::from_slice(&item).map_err(meta::Error::from)?;
            field_set(rules, rules.supported_fields().iter().copied(), &value)
        } else {
            field_set(rules, rules.supported_fields().iter().copied(), &meta_value(&meta))
        };
        Self::build(meta, fields, item.clone())
    }

    /// A bare protobuf message (a list item, or `raw` of a watch event's envelope), kept byte for
    /// byte. Its selectable fields are those [`holds_field`] names, read by one pass over the
    /// message that borrows the few scalars they need.
    pub fn from_protobuf_message(
        group: &str,
        resource: &str,
        raw: Bytes,
    ) -> Result<Self, ObjectError> {
        let rules = FieldRules::for_resource(group, resource);
        let meta = proto::object_meta(&raw)?;
        let fields = {
            let source = proto::fields::selectable_fields(group, resource, &raw, &meta)?;
            // The other fields `holds_field` admits are outside the field set and read as "".
            let held = rules.supported_fields().iter().copied();
            field_set(rules, held.filter(|f| source.reads(f)), &source)
        };
        Self::build(meta, fields, raw.clone())
    }

    fn build(
        meta: ObjectMetaRef<'_>,
        fields: Vec<(String, String)>,
        body: Bytes,
    ) -> Result<Self, ObjectError> {
        if meta.name.is_empty() {
            return Err(ObjectError::MissingName);
        }
        let resource_version = meta.resource_version.parse::<u64>().map_err(|_| {
            ObjectError::ResourceVersion(meta.resource_version.clone().into_owned())
        })?;
        // Go decodes a map with a repeated key to its last value; a BTreeMap does the same and
        // sorts.
        let labels: BTreeMap<String, String> =
            meta.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Ok(Self {
            key: Self::key_for(&meta.namespace, &meta.name),
            namespace: meta.namespace.into_owned(),
            name: meta.name.into_owned(),
            resource_version,
            labels: labels.into_iter().collect(),
            fields,
            body,
        })
    }

    /// The cache key of an object: `namespace/name`, or `name` when the namespace is empty.
    pub fn key_for(namespace: &str, name: &str) -> String {
        if namespace.is_empty() {
            name.to_owned()
        } else {
            let mut key = String::with_capacity(namespace.len() + name.len() + 1);
            key.push_str(namespace);
            key.push('/');
            key.push_str(name);
            key
        }
    }

    /// A label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        let i = self.labels.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok()?;
        self.labels.get(i).map(|(_, v)| v.as_str())
    }

    /// A selectable field's value; `None` when the object's field set lacks it (reads as "").
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(f, _)| f == name).map(|(_, v)| v.as_str())
    }
}

/// Decoding what a reflector received, for the cache of `info` in `encoding`.
impl CachedObject {
    /// A list item as the upstream sent it (JSON item form, or a bare protobuf message).
    pub fn from_list_item(
        info: &ResourceInfo,
        encoding: Encoding,
        bytes: Bytes,
    ) -> Result<Self, ObjectError> {
        match encoding {
            Encoding::Json => CachedObject::from_json_item(&info.group, &info.resource, bytes),
            Encoding::Protobuf => {
                CachedObject::from_protobuf_message(&info.group, &info.resource, bytes)
            }
        }
    }

    /// A watch event's object (full JSON object, or a bare protobuf message).
    pub fn from_watch_object(
        info: &ResourceInfo,
        encoding: Encoding,
        bytes: Bytes,
    ) -> Result<Self, ObjectError> {
        match encoding {
            Encoding::Json => CachedObject::from_json_object(
                &info.group,
                &info.resource,
                bytes,
                !info.is_builtin(),
            ),
            Encoding::Protobuf => {
                CachedObject::from_protobuf_message(&info.group, &info.resource, bytes)
            }
        }
    }
}

impl LabelSource for CachedObject {
    fn label(&self, key: &str) -> Option<&str> {
        CachedObject::label(self, key)
    }
}

/// The values `fields` have for the object, as the registry's field set holds them.
fn field_set<'f>(
    rules: FieldRules,
    fields: impl Iterator<Item = &'f str>,
    object: &impl FieldSource,
) -> Vec<(String, String)> {
    fields.filter_map(|f| rules.field_value(object, f).map(|v| (f.to_owned(), v))).collect()
}

/// Just enough of an object for `field_value` to read `metadata.name` and `metadata.namespace`.
fn meta_value(meta: &ObjectMetaRef<'_>) -> Value {
    serde_json::json!({"metadata": {"name": meta.name, "namespace": meta.namespace}})
}

/// A GET body ends with `\n`; list items and event objects do not.
fn trim(bytes: Bytes) -> Bytes {
    let trimmed = bytes.trim_ascii();
    if trimmed.len() == bytes.len() {
        return bytes;
    }
    bytes.slice_ref(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CM_GET: &[u8] = include_bytes!("../../../shared/fixtures/cm-get-json.body");

    #[test]
    fn builtin_object_is_stored_as_its_list_item() {
        let cm =
            CachedObject::from_json_object("", "configmaps", Bytes::from_static(CM_GET), false)
                .unwrap();
        assert_eq!(cm.key, "fx/cm-a");
        assert_eq!((cm.namespace.as_str(), cm.name.as_str()), ("fx", "cm-a"));
        assert_eq!(cm.resource_version, 261);
        assert_eq!(cm.labels, [("app".into(), "web".into()), ("tier".into(), "front".into())]);
        assert_eq!(
            cm.fields,
            [
                ("metadata.name".to_owned(), "cm-a".to_owned()),
                ("metadata.namespace".to_owned(), "fx".to_owned())
            ]
        );
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
        let w = CachedObject::from_json_object(
            "example.com",
            "widgets",
            Bytes::from(with_newline),
            true,
        )
        .unwrap();
        assert_eq!(w.body, body);
        assert_eq!(w.key, "ns/w");
        assert_eq!(w.labels, [("a".into(), "1".into()), ("b".into(), "2".into())]);
        // Without the flag, a custom resource would lose what its list items keep.
        let stripped =
            CachedObject::from_json_object("example.com", "widgets", body.clone(), false).unwrap();
        assert!(stripped.body.starts_with(br#"{"metadata":"#));
    }

    #[test]
    fn cluster_scoped_key_and_fields() {
        let node =
            br#"{"metadata":{"name":"n1","resourceVersion":"3"},"spec":{"unschedulable":true}}"#;
        let n = CachedObject::from_json_item("", "nodes", Bytes::from_static(node)).unwrap();
        assert_eq!((n.key.as_str(), n.namespace.as_str()), ("n1", ""));
        assert_eq!(
            n.fields,
            [
                ("metadata.name".to_owned(), "n1".to_owned()),
                ("spec.unschedulable".to_owned(), "true".to_owned())
            ]
        );
    }

    #[test]
    fn repeated_label_keeps_the_last_value() {
        let body = br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"1","labels":{"k":"1","k":"2"}}}"#;
        let o = CachedObject::from_json_item("", "configmaps", Bytes::from_static(body)).unwrap();
        assert_eq!(o.labels, [("k".into(), "2".into())]);
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
        let proto =
            CachedObject::from_protobuf_message("", "pods", Bytes::from_static(b"\x0a\x02"));
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
        let cm =
            CachedObject::from_protobuf_message("", "configmaps", Bytes::from_static(bad_node));
        assert_eq!(
            cm.unwrap().fields,
            [("metadata.name".into(), "p".into()), ("metadata.namespace".into(), "".into())]
        );
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
                    prop_assert_eq!(&o.labels, &labels.into_iter().collect::<Vec<_>>());
                    prop_assert_eq!(o.field("spec.nodeName"), Some(""));
                    prop_assert_eq!(o.body.get(..12), Some(br#"{"metadata":"#.as_slice()));
                }
            }
        }
    }
}
