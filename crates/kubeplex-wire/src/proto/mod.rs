//! Kubernetes protobuf framing (`application/vnd.kubernetes.protobuf`).
//!
//! The apiserver never sends a bare message: a body is the magic `k8s\0` followed by a
//! `runtime.Unknown` envelope {typeMeta{apiVersion, kind}, raw, contentEncoding, contentType}, and
//! `raw` holds the object's own message. A list's message is ListMeta (field 1) plus one field 2
//! per item, each item being exactly the bare message its object would have in `raw`, so a list is
//! built by concatenating cached item bytes. A watch stream is a sequence of 4-byte big-endian
//! lengths each followed by a bare `WatchEvent` whose object is a full `k8s\0` envelope. Errors
//! reach protobuf clients as a protobuf `Status` (`v1`, `Status`).
//!
//! Everything here works on borrowed bytes: objects are never decoded into Rust structs beyond
//! the few metadata fields used to route them and the scalars of their selectable fields
//! ([`fields`]). Encoders reproduce gogo-protobuf's output byte for
//! byte (non-pointer strings written even when empty, fields in number order), which is what
//! clients and the fixtures expect.

mod codec;
mod empty_objects;
mod envelope;
mod error;
pub mod fields;
mod object;
mod status;
mod watch;

pub use codec::{put_bytes_field, put_varint, read_varint, varint_len, Fields, Value};
pub use envelope::{
    decode_list, decode_unknown, encode_list, encode_list_parts, encode_unknown, ListRef, Unknown,
    CONTENT_TYPE, MAGIC,
};
pub use error::Error;
pub use object::{
    bookmark, bookmark_tail, empty_object_tail, has_annotation, object_meta, object_meta_bytes,
    partial_object_metadata, partial_object_metadata_list, with_resource_version, EmptyObjectTails,
};
pub use status::{encode_status, status_code, StatusCause, StatusDetails, StatusRef};
pub use watch::{
    decode_watch_event, encode_watch_frame, WatchEventRef, WatchFrameDecoder,
    DEFAULT_MAX_FRAME_LEN, STREAM_CONTENT_TYPE,
};

#[cfg(test)]
mod tests;
