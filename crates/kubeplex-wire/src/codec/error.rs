//! The codec's one error type, shared by its JSON and protobuf halves.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// A JSON value of the wrong type, worded as Go's `UnmarshalTypeError`.
    #[error("json: cannot unmarshal {found} into Go struct field {field} of type {expected}")]
    JsonType { found: String, field: String, expected: String },
    /// The document is not a JSON object.
    #[error("json: cannot unmarshal {found} into Go value of type {expected}")]
    JsonTopLevel { found: String, expected: String },
    /// A string that the field's type cannot parse (time, quantity, base64, duration); the
    /// message is the type's own, as Go returns an `UnmarshalJSON` error unwrapped.
    #[error("{message}")]
    JsonValue { field: String, message: String },
    #[error("protobuf: unexpected end of message")]
    ProtoTruncated,
    #[error("protobuf: illegal tag {0}")]
    ProtoTag(u64),
    #[error("protobuf: wrong wireType = {wire} for field {field}")]
    ProtoWireType { field: String, wire: u8 },
    /// A field whose bytes do not decode as its Go type does.
    #[error("protobuf: field {field}: {message}")]
    ProtoValue { field: String, message: String },
}
