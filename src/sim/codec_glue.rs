//! Adapter between the sim's handlers and the schema codec (Go field order, protobuf).

use serde_json::Value;

use super::kinds::Kind;
use super::object::order_type_and_meta;
use crate::wire::status::Status;

/// Canonical JSON for a built-in object.
pub fn canonicalize(_kind: &Kind, value: Value) -> Result<Value, Status> {
    Ok(order_type_and_meta(value))
}

/// The bare protobuf message of a built-in object, when the codec knows its type.
pub fn to_protobuf(_kind: &Kind, _value: &Value) -> Result<Option<Vec<u8>>, Status> {
    Ok(None)
}
