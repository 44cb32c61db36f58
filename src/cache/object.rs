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
    pub key: Key,
    /// The length of the namespace at the start of `key` (0: cluster-scoped): the namespace
    /// and name are read from the key rather than kept again ([`CachedObject::namespace`],
    /// [`CachedObject::name`]).
    namespace_len: u32,
    pub resource_version: u64,
    /// `metadata.labels`, sorted by key, one entry per key ([`CachedObject::labels`]); and the
    /// value of each selectable field of the resource that its field set has (the registry's
    /// `GetAttrs`), but `metadata.name` and `metadata.namespace`, which are `name` and
    /// `namespace` (most kinds select on nothing else: their objects hold no field here); a
    /// field missing reads as "" to a selector, as in `fields.Set.Get`
    /// ([`CachedObject::field`]).
    attributes: Attributes,
    /// Whether the field set has `metadata.namespace` (namespaced kinds).
    namespace_field: bool,
    /// The object as it appears in a list: JSON list item or bare protobuf message.
    pub body: Bytes,
}

/// An object's key (`namespace/name`), one allocation shared by the object, the store's map and
/// the indexes (reference-counted: measured, three copies of each key were ~15 MB for 100,000
/// objects). Reads as the `str` it holds.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(std::sync::Arc<str>);

impl Key {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The same allocation, for an index's entry.
    pub fn shared(&self) -> std::sync::Arc<str> {
        self.0.clone()
    }
}

impl std::ops::Deref for Key {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for Key {
    fn from(key: String) -> Self {
        Key(key.into())
    }
}

impl From<&str> for Key {
    fn from(key: &str) -> Self {
        Key(key.into())
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Key {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// An object's labels and selectable fields in one allocation: the labels' (key, value) pairs
/// sorted by key, then — after a mark, when there are any — the fields' (name, value) pairs;
/// each string after its length (4 bytes, little-endian). Kept as strings of their own they
/// were an allocation each: measured, ~10 MB for 100,000 ConfigMaps of one label; a pod's
/// eight selectable fields were nine allocations.
#[derive(Clone, Default, PartialEq, Eq)]
struct Attributes(Box<[u8]>);

/// Where the fields begin: a length no string has.
const FIELDS_MARK: [u8; 4] = u32::MAX.to_le_bytes();

impl Attributes {
    /// From labels already sorted by key (each key once), and fields.
    fn new<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let mut packed = Vec::new();
        push_pairs(&mut packed, labels);
        let mut fields = fields.into_iter().peekable();
        if fields.peek().is_some() {
            packed.extend_from_slice(&FIELDS_MARK);
            push_pairs(&mut packed, fields);
        }
        Attributes(packed.into_boxed_slice())
    }

    /// The labels: the pairs before the mark.
    fn labels(&self) -> Labels<'_> {
        Labels(&self.0)
    }

    /// The fields' (name, value) pairs: those after the mark, found by stepping over the
    /// labels' strings.
    fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut at = 0;
        while let Some(len) = self.0.get(at..at + 4) {
            if len == FIELDS_MARK {
                return pairs(&self.0[at + 4..]);
            }
            at += 4 + u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        }
        pairs(&[])
    }
}

/// Appends `pairs` to `packed`, each string after its length.
fn push_pairs<'a>(packed: &mut Vec<u8>, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) {
    for (k, v) in pairs {
        for s in [k, v] {
            // A label is at most 63 bytes (317 with a key's prefix), a field's value about as
            // long; a longer one is cut off short of the mark.
            let len = u32::try_from(s.len()).unwrap_or(u32::MAX - 1).min(u32::MAX - 1);
            packed.extend_from_slice(&len.to_le_bytes());
            packed.extend_from_slice(&s.as_bytes()[..len as usize]);
        }
    }
}

/// The (first, second) string pairs packed in `bytes`, until the bytes end, the fields' mark,
/// or what is not a pair.
fn pairs(mut rest: &[u8]) -> impl Iterator<Item = (&str, &str)> {
    let mut next = move || {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        if *len == FIELDS_MARK {
            return None;
        }
        let len = u32::from_le_bytes(*len) as usize;
        let (s, tail) = tail.split_at_checked(len)?;
        rest = tail;
        std::str::from_utf8(s).ok()
    };
    std::iter::from_fn(move || Some((next()?, next()?)))
}

/// An object's labels (`metadata.labels`), sorted by key: its packed attributes, read up to the
/// fields' mark.
#[derive(Clone, Copy, Default)]
pub struct Labels<'a>(&'a [u8]);

/// The same labels, whatever fields follow them.
impl PartialEq for Labels<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Labels<'_> {}

impl<'a> Labels<'a> {
    /// The (key, value) pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        pairs(self.0)
    }

    /// A label's value.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The pairs as strings (tests, and printing).
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }
}

impl std::fmt::Debug for Labels<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attributes")
            .field("labels", &self.labels())
            .field("fields", &self.fields().collect::<Vec<_>>())
            .finish()
    }
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
        let object = Self::build(meta, fields)?;
        Ok(CachedObject { body: item, ..object })
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
        let object = Self::build(meta, fields)?;
        Ok(CachedObject { body: raw, ..object })
    }

    /// The object `meta` and `fields` describe, its body still empty: the caller moves the
    /// upstream's buffer in once `meta`, which borrows it, is gone — a copy of that `Bytes`
    /// would be a shared handle allocated for every object.
    fn build(
        meta: ObjectMetaRef<'_>,
        fields: Vec<(&'static str, String)>,
    ) -> Result<Self, ObjectError> {
        if meta.name.is_empty() {
            return Err(ObjectError::MissingName);
        }
        let resource_version = meta.resource_version.parse::<u64>().map_err(|_| {
            ObjectError::ResourceVersion(meta.resource_version.clone().into_owned())
        })?;
        // Go decodes a map with a repeated key to its last value; a BTreeMap does the same and
        // sorts.
        let labels: BTreeMap<&str, &str> = meta.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
        let namespace_field = fields.iter().any(|(f, _)| *f == "metadata.namespace");
        let fields = fields
            .iter()
            .filter(|(f, _)| !matches!(*f, "metadata.name" | "metadata.namespace"))
            .map(|(f, v)| (*f, v.as_str()));
        Ok(Self {
            key: Key::from(Self::key_for(&meta.namespace, &meta.name)),
            // A namespace is a DNS label (at most 63 bytes); one past u32 is no object's.
            namespace_len: u32::try_from(meta.namespace.len())
                .map_err(|_| ObjectError::MissingName)?,
            resource_version,
            attributes: Attributes::new(labels, fields),
            namespace_field,
            body: Bytes::new(),
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

    /// The same object at another RV, with the bytes that say so (a deletion a relist found,
    /// sent at the list's RV).
    pub fn at(self, resource_version: u64, body: Bytes) -> Self {
        CachedObject { resource_version, body, ..self }
    }

    /// Empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        &self.key[..self.namespace_len as usize]
    }

    pub fn name(&self) -> &str {
        match self.namespace_len as usize {
            0 => &self.key,
            n => &self.key[n + 1..],
        }
    }

    /// `metadata.labels`, sorted by key.
    pub fn labels(&self) -> Labels<'_> {
        self.attributes.labels()
    }

    /// A label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().get(key)
    }

    /// A selectable field's value; `None` when the object's field set lacks it (reads as "").
    pub fn field(&self, name: &str) -> Option<&str> {
        match name {
            "metadata.name" => Some(self.name()),
            "metadata.namespace" => self.namespace_field.then_some(self.namespace()),
            _ => self.attributes.fields().find(|(f, _)| *f == name).map(|(_, v)| v),
        }
    }

    /// Its field set: each selectable field it has and its value (`metadata.name`,
    /// `metadata.namespace` first).
    pub fn field_set(&self) -> Vec<(&str, &str)> {
        let mut set = vec![("metadata.name", self.name())];
        if self.namespace_field {
            set.push(("metadata.namespace", self.namespace()));
        }
        set.extend(self.attributes.fields());
        set
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
fn field_set(
    rules: FieldRules,
    fields: impl Iterator<Item = &'static str>,
    object: &impl FieldSource,
) -> Vec<(&'static str, String)> {
    fields.filter_map(|f| rules.field_value(object, f).map(|v| (f, v))).collect()
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
mod tests;
