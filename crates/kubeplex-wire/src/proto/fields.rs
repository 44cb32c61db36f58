//! The selectable fields of built-in kinds, read from their protobuf messages without decoding
//! them: a table of where each field the registries' `GetAttrs` read lives in the message
//! (kind → JSON path → field numbers and scalar type), and one pass over the message that
//! borrows those few scalars.
//!
//! The values are rendered by `FieldRules::field_value`, the same code the JSON cache uses
//! (through [`FieldSource`]), so a protobuf cache and a JSON cache hold the same field set for
//! the same object. The field numbers are those of k8s.io/api's `generated.proto`; a unit test
//! checks every entry against the codec's generated schema (`codec::proto_path`), which this
//! module does not use at run time.

use super::codec::{Fields, Value};
use super::error::Error;
use crate::meta::ObjectMetaRef;
use crate::selector::fields_by_kind::{FieldRules, FieldSource};

/// The Go type of a scalar a field set reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// A non-pointer `string` (or named string type): gogo writes it even when empty.
    Str,
    /// A non-pointer `bool`: a varint, written even when false.
    Bool,
}

/// Where one v1 field a field set reads sits in the object's message.
#[derive(Debug)]
pub struct Source {
    /// The path `FieldRules::field_value` asks for: object members by JSON name, and `"0"` for
    /// the first element of the repeated field named before it (`status.podIPs.0.ip`).
    pub json: &'static [&'static str],
    /// The protobuf field numbers from the object's message down to the scalar, one per member
    /// segment of `json` (an index segment has none).
    pub numbers: &'static [u32],
    pub scalar: Scalar,
}

/// Where a protobuf cache of one built-in kind reads the selectable fields beyond ObjectMeta's.
/// Which fields those are is the kind's rules' (`FieldRules::supported_fields`), the one list.
#[derive(Debug)]
pub struct KindFields {
    /// API group ("" for core) and plural resource, as `FieldRules::for_resource` takes them.
    pub group: &'static str,
    pub resource: &'static str,
    /// The kind's apiVersion and kind (which Go type `numbers` are numbers of).
    pub api_version: &'static str,
    pub kind: &'static str,
    /// Every v1 field `FieldRules::field_value` reads for `fields`, fallbacks included.
    pub sources: &'static [Source],
}

const fn str_at(json: &'static [&'static str], numbers: &'static [u32]) -> Source {
    Source { json, numbers, scalar: Scalar::Str }
}

const fn bool_at(json: &'static [&'static str], numbers: &'static [u32]) -> Source {
    Source { json, numbers, scalar: Scalar::Bool }
}

/// Every built-in kind with selectable fields outside ObjectMeta that this build can read from
/// protobuf (`pkg/registry/*/strategy.go` `GetAttrs` / `ToSelectableFields`). Not here, so still
/// passed through when selected on: replicationcontrollers' `status.replicas` (the fake
/// apiserver's schema, which checks these numbers, does not have the kind).
pub static KINDS: &[KindFields] = &[
    KindFields {
        group: "",
        resource: "pods",
        api_version: "v1",
        kind: "Pod",
        sources: &[
            str_at(&["spec", "restartPolicy"], &[2, 3]),
            str_at(&["spec", "serviceAccountName"], &[2, 8]),
            // The deprecated v1 alias, read when serviceAccountName is empty.
            str_at(&["spec", "serviceAccount"], &[2, 9]),
            str_at(&["spec", "nodeName"], &[2, 10]),
            bool_at(&["spec", "hostNetwork"], &[2, 11]),
            str_at(&["spec", "schedulerName"], &[2, 19]),
            str_at(&["status", "phase"], &[3, 1]),
            str_at(&["status", "podIP"], &[3, 6]),
            str_at(&["status", "nominatedNodeName"], &[3, 11]),
            // `status.podIP` falls back to the first of `podIPs` (the v1 → internal conversion).
            str_at(&["status", "podIPs", "0", "ip"], &[3, 12, 1]),
        ],
    },
    KindFields {
        group: "",
        resource: "nodes",
        api_version: "v1",
        kind: "Node",
        sources: &[bool_at(&["spec", "unschedulable"], &[2, 4])],
    },
    KindFields {
        group: "",
        resource: "namespaces",
        api_version: "v1",
        kind: "Namespace",
        sources: &[str_at(&["status", "phase"], &[3, 1])],
    },
    KindFields {
        group: "",
        resource: "secrets",
        api_version: "v1",
        kind: "Secret",
        sources: &[str_at(&["type"], &[3])],
    },
    KindFields {
        group: "",
        resource: "events",
        api_version: "v1",
        kind: "Event",
        sources: &[
            str_at(&["involvedObject", "kind"], &[2, 1]),
            str_at(&["involvedObject", "namespace"], &[2, 2]),
            str_at(&["involvedObject", "name"], &[2, 3]),
            str_at(&["involvedObject", "uid"], &[2, 4]),
            str_at(&["involvedObject", "apiVersion"], &[2, 5]),
            str_at(&["involvedObject", "resourceVersion"], &[2, 6]),
            str_at(&["involvedObject", "fieldPath"], &[2, 7]),
            str_at(&["reason"], &[3]),
            // `source` is source.component, else reportingComponent.
            str_at(&["source", "component"], &[5, 1]),
            str_at(&["type"], &[9]),
            str_at(&["reportingComponent"], &[14]),
        ],
    },
    KindFields {
        group: "",
        resource: "services",
        api_version: "v1",
        kind: "Service",
        sources: &[str_at(&["spec", "clusterIP"], &[2, 3]), str_at(&["spec", "type"], &[2, 4])],
    },
];

/// The fields every kind's protobuf message gives through ObjectMeta.
pub const META_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// The table entry of a resource, if it has selectable fields outside ObjectMeta.
pub fn kind_fields(group: &str, resource: &str) -> Option<&'static KindFields> {
    KINDS.iter().find(|k| k.group == group && k.resource == resource)
}

/// Whether a protobuf cache of this resource can evaluate `field` (a canonical field name the
/// resource's rules accept): ObjectMeta's, those of its [`KINDS`] entry, and those the rules
/// accept but the registry's field set lacks (pods' `status.podIPs`), which read as "" for
/// every object (`fields.Set.Get`).
pub fn holds_field(group: &str, resource: &str, field: &str) -> bool {
    let rules = FieldRules::for_resource(group, resource);
    META_FIELDS.contains(&field)
        || (kind_fields(group, resource).is_some() && rules.supported_fields().contains(&field))
        || rules.field_value(&serde_json::Value::Null, field).is_none()
}

/// The scalars of one object's message that its kind's field set reads, borrowed from the
/// message; a [`FieldSource`] for `FieldRules::field_value`.
#[derive(Debug)]
pub struct SelectableFields<'a> {
    name: &'a str,
    namespace: &'a str,
    fields: &'static [&'static str],
    sources: &'static [Source],
    values: Vec<Option<Value<'a>>>,
}

/// Reads the selectable fields of `raw_message` (a bare object message) in one pass; `meta` is
/// its ObjectMeta ([`super::object_meta`]). A resource without a [`KINDS`] entry gives only
/// ObjectMeta's fields. A field of the wrong wire type or a string that is not UTF-8 is an error,
/// as it is to the apiserver's decoder.
pub fn selectable_fields<'a>(
    group: &str,
    resource: &str,
    raw_message: &'a [u8],
    meta: &'a ObjectMetaRef<'a>,
) -> Result<SelectableFields<'a>, Error> {
    let kind = kind_fields(group, resource);
    let sources = kind.map_or(&[][..], |k| k.sources);
    let mut fields = SelectableFields {
        name: &meta.name,
        namespace: &meta.namespace,
        fields: match kind {
            Some(_) => FieldRules::for_resource(group, resource).supported_fields(),
            None => &[],
        },
        sources,
        values: vec![None; sources.len()],
    };
    if !sources.is_empty() {
        let mut first_taken = 0u64;
        walk(raw_message, Prefix::default(), sources, &mut fields.values, &mut first_taken)?;
        for (source, value) in sources.iter().zip(&fields.values) {
            match (source.scalar, value) {
                (_, None)
                | (Scalar::Str, Some(Value::Len(_)))
                | (Scalar::Bool, Some(Value::Varint(_))) => {}
                _ => return Err(Error::WrongWireType(source_name(source))),
            }
            if let (Scalar::Str, Some(Value::Len(bytes))) = (source.scalar, value) {
                std::str::from_utf8(bytes).map_err(|_| Error::InvalidUtf8(source_name(source)))?;
            }
        }
    }
    Ok(fields)
}

/// The field numbers of the message being walked, from the object's message down.
#[derive(Debug, Default, Clone, Copy)]
struct Prefix {
    numbers: [u32; 4],
    len: usize,
}

impl Prefix {
    fn as_slice(&self) -> &[u32] {
        self.numbers.get(..self.len).unwrap_or_default()
    }
}

/// One pass over a message: a scalar a source ends at is recorded (the last occurrence wins,
/// as in gogo's Unmarshal), an embedded message on a source's path is walked (every occurrence:
/// protobuf merges repeated embedded messages), except that of a repeated field only the first
/// element is (the source's `"0"`). `first_taken` has a bit per source whose first element was
/// walked.
fn walk<'a>(
    message: &'a [u8],
    prefix: Prefix,
    sources: &'static [Source],
    values: &mut [Option<Value<'a>>],
    first_taken: &mut u64,
) -> Result<(), Error> {
    let depth = prefix.len;
    for field in Fields::new(message) {
        let (number, value) = field?;
        let mut descend = false;
        for (i, source) in sources.iter().enumerate() {
            // The number first: it rules out almost every source at once.
            let on_path = source.numbers.get(depth) == Some(&number)
                && source.numbers.get(..depth) == Some(prefix.as_slice());
            if !on_path {
                continue;
            }
            if source.numbers.len() == depth + 1 {
                if let Some(slot) = values.get_mut(i) {
                    *slot = Some(value);
                }
            } else if repeated_at(source, depth) {
                let bit = 1u64 << (i % 64);
                if *first_taken & bit == 0 {
                    *first_taken |= bit;
                    descend = true;
                }
            } else {
                descend = true;
            }
        }
        if descend && depth + 1 < prefix.numbers.len() {
            let Value::Len(inner) = value else {
                return Err(Error::WrongWireType("embedded message"));
            };
            let mut inner_prefix = prefix;
            if let Some(slot) = inner_prefix.numbers.get_mut(depth) {
                *slot = number;
            }
            inner_prefix.len = depth + 1;
            walk(inner, inner_prefix, sources, values, first_taken)?;
        }
    }
    Ok(())
}

/// Whether the source's number at `depth` is a repeated field of which it reads the first
/// element: the member segment for that number is followed by an index segment.
fn repeated_at(source: &Source, depth: usize) -> bool {
    let mut members = source.json.iter().enumerate().filter(|(_, s)| !is_index(s));
    members.nth(depth).and_then(|(j, _)| source.json.get(j + 1)).is_some_and(|next| is_index(next))
}

fn is_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// The last member segment of a source, to name it in an error.
fn source_name(source: &Source) -> &'static str {
    source.json.iter().rev().find(|s| !is_index(s)).copied().unwrap_or("field")
}

impl SelectableFields<'_> {
    /// Whether `field` is one of those read ([`META_FIELDS`] and the kind's): the fields of the
    /// object's field set that [`holds_field`] admits.
    pub fn reads(&self, field: &str) -> bool {
        META_FIELDS.contains(&field) || self.fields.contains(&field)
    }

    fn value(&self, path: &[&str]) -> Option<Value<'_>> {
        let i = self.sources.iter().position(|s| s.json == path)?;
        *self.values.get(i)?
    }
}

impl FieldSource for SelectableFields<'_> {
    fn str_at(&self, path: &[&str]) -> Option<&str> {
        match path {
            ["metadata", "name"] => Some(self.name),
            ["metadata", "namespace"] => Some(self.namespace),
            // Checked to be UTF-8 when read.
            _ => match self.value(path)? {
                Value::Len(bytes) => std::str::from_utf8(bytes).ok(),
                _ => None,
            },
        }
    }

    fn bool_at(&self, path: &[&str]) -> Option<bool> {
        match self.value(path)? {
            // gogo's Unmarshal of a bool: any non-zero varint is true.
            Value::Varint(v) => Some(v != 0),
            _ => None,
        }
    }

    fn i64_at(&self, _path: &[&str]) -> Option<i64> {
        // No integer field is in the table (replicationcontrollers' status.replicas is not).
        None
    }
}

// The table is checked against the codec's generated schema, and the decode against the JSON
// cache's fields, by the codec's tests (`crates/kubeplex-wire/src/codec/tests/wire_fields.rs`),
// beside the schema they check it against.
#[cfg(test)]
mod tests;
