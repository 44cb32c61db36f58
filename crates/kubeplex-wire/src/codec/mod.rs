//! The object codec: writes API objects byte for byte as kube-apiserver does, in JSON and in
//! protobuf from one object.
//!
//! The fake apiserver (`kubeplex-sim`) writes every object it serves with it. It lives in the
//! wire crate so that the proxy can use the same code to render one encoding from the other
//! (issue 31: one upstream list+watch per resource, whatever encodings its readers want)
//! rather than keep a second copy.
//!
//! kube-apiserver decodes every object into its Go struct and encodes it again, so what a
//! client sees is decided by the Go types, not by what was sent. This module replays that for
//! the kinds the fake apiserver serves, from tables generated out of the Go sources
//! (`tools/gen-schema.py` → `schema_gen.rs`):
//!
//! - JSON as encoding/json writes the structs: fields in Go declaration order, inline embedded
//!   structs flattened (TypeMeta gives `kind`, `apiVersion` first), `omitempty` dropping false,
//!   0, "", nil and empty slices and maps but never a struct, `omitzero` (creationTimestamp)
//!   dropping the zero time, a nil slice, map or pointer without `omitempty` written as `null`,
//!   a zero metav1.Time as `null`, map keys sorted.
//! - protobuf as gogo's generated Marshal writes it: ascending field numbers, non-pointer
//!   scalars and embedded messages always (even "" and 0), pointers only when set, repeated
//!   fields and maps only when not empty (unpacked, map entries sorted by key).
//! - Decoding follows Go too: JSON `null` leaves a field at its zero value, unknown fields are
//!   dropped and named as sigs.k8s.io/json's strict mode names them (`spec.containers[0].foo`)
//!   so the caller can apply `fieldValidation`.
//!
//! Simplifications, where this differs from the apiserver:
//! - resource.Quantity follows `ParseQuantity` + `String()` (including reuse of an input that
//!   already looks canonical, e.g. "+1k") with an i128 mantissa: a quantity of more than about
//!   38 significant digits is refused. A JSON *number* quantity with a fraction or exponent
//!   is read through f64 (serde_json keeps no literal), so `1e3` becomes "1k", not "1e3".
//! - metav1.MicroTime accepts any RFC 3339 fraction, not only exactly six digits.
//! - Duplicate JSON keys cannot be reported (serde_json keeps the last one).
//! - Type errors carry Go's wording, but a named Go type is reported by its underlying type
//!   (`string`, not `v1.Protocol`).
//! - FieldsV1 and RawExtension contents are kept as parsed JSON values: re-serialised compactly
//!   with their key order, which matches what the apiserver stores (compact JSON).
//! - Strings from protobuf that are not UTF-8 are converted lossily (Go's JSON encoder also
//!   writes U+FFFD, though per byte).
//! - Use [`crate::gojson::to_vec`] for bytes: it escapes `<`, `>`, `&`, U+2028 and U+2029
//!   as Go does, which `serde_json::to_vec` does not.

mod error;
mod json;
mod proto;
mod proto_decode;
mod quantity;
mod scalar;
mod schema;
#[rustfmt::skip]
mod schema_gen;

use serde_json::Value;

pub use error::CodecError;
pub use json::Canonical;

/// One kind the codec knows: its apiVersion, kind and Go type.
#[derive(Debug, Clone, Copy)]
pub struct TypeRef(&'static schema::KindDef);

impl TypeRef {
    pub fn api_version(self) -> &'static str {
        self.0.api_version
    }

    pub fn kind(self) -> &'static str {
        self.0.kind
    }
}

/// The kinds the codec covers: ConfigMap, Pod, Secret, Service, Namespace, Node, Event,
/// Endpoints (v1), EndpointSlice (discovery.k8s.io/v1), Deployment, ReplicaSet (apps/v1),
/// Lease (coordination.k8s.io/v1), RuntimeClass (node.k8s.io/v1), CSIDriver (storage.k8s.io/v1)
/// and ServiceCIDR (networking.k8s.io/v1), each with its List; Status (v1 and meta.k8s.io/v1),
/// PartialObjectMetadata(List) and WatchEvent (meta.k8s.io/v1; JSON only: in a protobuf watch
/// its object holds a protobuf envelope, not JSON).
pub fn type_for(api_version: &str, kind: &str) -> Option<TypeRef> {
    schema_gen::KINDS.iter().find(|k| k.api_version == api_version && k.kind == kind).map(TypeRef)
}

/// Decodes `v` into the Go type of `t` and encodes it again, as the apiserver does with every
/// object it is sent: the result is what it would store and return.
pub fn canonicalize(t: TypeRef, v: &Value) -> Result<Canonical, CodecError> {
    json::canonicalize(t.0.def, v)
}

/// The protobuf message of `v` (no `k8s\0` + `Unknown` envelope; see [`crate::proto::encode_unknown`]).
pub fn to_protobuf(t: TypeRef, v: &Value) -> Result<Vec<u8>, CodecError> {
    let canonical = canonicalize(t, v)?;
    proto::encode(t.0.def, &canonical.value)
}

/// The protobuf message of `canonical`, a value already in the Go type's form (what
/// [`canonicalize`] or [`from_protobuf`] returned): [`to_protobuf`] without decoding it again.
pub fn canonical_to_protobuf(t: TypeRef, canonical: &Value) -> Result<Vec<u8>, CodecError> {
    proto::encode(t.0.def, canonical)
}

/// The canonical JSON object of a protobuf message of type `t`, with `kind` and `apiVersion`
/// filled in from `t` as the apiserver's encoder does for the object it returns. A list with
/// no items has `"items":[]`, as the apiserver writes it (its lists are built by
/// `meta.SetList`, whose slice is never nil; protobuf cannot tell an empty list from none).
pub fn from_protobuf(t: TypeRef, bytes: &[u8]) -> Result<Value, CodecError> {
    let mut object = serde_json::Map::new();
    object.insert("kind".to_owned(), Value::String(t.kind().to_owned()));
    object.insert("apiVersion".to_owned(), Value::String(t.api_version().to_owned()));
    proto_decode::decode_into(t.0.def, bytes, &mut object)?;
    if t.kind().ends_with("List") {
        object.entry("items").or_insert_with(|| Value::Array(Vec::new()));
    }
    Ok(json::canonicalize(t.0.def, &Value::Object(object))?.value)
}

/// The protobuf field numbers along a JSON path of `t`'s Go type, and the Go type of the scalar
/// it ends at (`string`, `*string`, `bool`, `int32`, `int64`; `None` for anything else). A
/// numeric segment names an element of the slice before it and has no number of its own
/// (`status.podIPs.0.ip` is 3, 12, 1). For checking the proxy's hand-written partial decoders
/// ([`crate::proto::fields`]) against these generated tables.
pub fn proto_path(t: TypeRef, json_path: &[&str]) -> Option<(Vec<u32>, &'static str)> {
    use schema::Ty;
    let mut numbers = Vec::with_capacity(json_path.len());
    let mut ty = Ty::Struct(t.0.def);
    for segment in json_path {
        ty = match ty {
            Ty::Slice(element) if segment.parse::<usize>().is_ok() => *element,
            Ty::Struct(def) => {
                let field = def.json_field(segment)?;
                if field.proto == 0 {
                    return None;
                }
                numbers.push(field.proto);
                field.ty
            }
            _ => return None,
        };
    }
    let scalar = match ty {
        Ty::Str => "string",
        Ty::Ptr(Ty::Str) => "*string",
        Ty::Bool => "bool",
        Ty::I32 => "int32",
        Ty::I64 => "int64",
        _ => return None,
    };
    Some((numbers, scalar))
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
