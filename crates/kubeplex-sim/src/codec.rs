//! Adapter between the sim's handlers and the wire crate's schema codec
//! (`kubeplex_wire::codec`: Go field order, protobuf).

use serde_json::Value;

use crate::kinds::Kind;
use crate::object::order_type_and_meta;
use crate::wire::codec::{self, TypeRef};
use crate::wire::status::Status;

fn type_ref(kind: &Kind) -> Option<TypeRef> {
    codec::type_for(&kind.api_version, &kind.kind)
}

fn codec_error(e: codec::CodecError) -> Status {
    Status::bad_request(e.to_string())
}

/// Canonical JSON for a built-in object: Go struct order and omitempty rules (unknown fields
/// are dropped, as the apiserver's decoder does with fieldValidation=Ignore).
pub fn canonicalize(kind: &Kind, value: Value) -> Result<Value, Status> {
    match type_ref(kind) {
        Some(t) => codec::canonicalize(t, &value).map(|c| c.value).map_err(codec_error),
        None => Ok(order_type_and_meta(value)),
    }
}

/// The bare protobuf message of a built-in object, when the codec knows its type.
pub fn to_protobuf(kind: &Kind, value: &Value) -> Result<Option<Vec<u8>>, Status> {
    match type_ref(kind) {
        Some(t) => codec::to_protobuf(t, value).map(Some).map_err(codec_error),
        None => Ok(None),
    }
}

/// Fields of `value` the type does not have, named as the apiserver's strict decoder names
/// them (`spec.foo`).
pub fn unknown_fields(kind: &Kind, value: &Value) -> Vec<String> {
    match type_ref(kind) {
        Some(t) => codec::canonicalize(t, value).map(|c| c.unknown_fields).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// Decodes a `k8s\0`-enveloped protobuf request body into the object's canonical JSON.
pub fn decode_protobuf_object(body: &[u8]) -> Result<Value, Status> {
    let env = crate::wire::proto::decode_unknown(body)
        .map_err(|e| Status::bad_request(format!("the object provided is unrecognized ({e})")))?;
    let t = codec::type_for(env.api_version, env.kind).ok_or_else(|| {
        Status::bad_request(format!(
            "no kind \"{}\" is registered for version \"{}\"",
            env.kind, env.api_version
        ))
    })?;
    codec::from_protobuf(t, env.raw).map_err(codec_error)
}
