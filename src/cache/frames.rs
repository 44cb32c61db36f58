//! Watch stream frames for one cache's resource, byte-compatible with kube-apiserver: a JSON
//! event line (`{"type":..,"object":..}\n`, fixture `watch-json`) or a length-prefixed
//! protobuf `WatchEvent` whose object is the `k8s\0` envelope (fixture `watch-protobuf`), with
//! the object as a whole or as `PartialObjectMetadata` (metadata informers).

use bytes::Bytes;

use super::object::Encoding;
use crate::wire::meta::{self, unstructured};
use crate::wire::proto;
use crate::wire::status::Status;

const META_API_VERSION: &str = "meta.k8s.io/v1";
const META_KIND: &str = "PartialObjectMetadata";

/// Encodes the frames of one resource's watch streams in one wire encoding.
#[derive(Debug, Clone)]
pub struct Encoder {
    pub encoding: Encoding,
    api_version: String,
    kind: String,
    builtin: bool,
}

impl Encoder {
    pub fn new(encoding: Encoding, api_version: &str, kind: &str, builtin: bool) -> Self {
        Encoder { encoding, api_version: api_version.into(), kind: kind.into(), builtin }
    }

    /// The watch response's `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self.encoding {
            Encoding::Json => "application/json",
            Encoding::Protobuf => proto::STREAM_CONTENT_TYPE,
        }
    }

    /// One event frame for a cached object's bytes (`body` as the cache holds it: a JSON list
    /// item or a bare protobuf message).
    pub fn event(&self, event_type: &str, body: &[u8], metadata: bool) -> Result<Bytes, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let frame = match (self.encoding, metadata) {
            (Encoding::Json, false) if self.builtin => meta::watch_event_json(
                event_type,
                &meta::with_type_meta(body, &self.api_version, &self.kind).map_err(|e| err(&e))?,
            ),
            (Encoding::Json, false) => meta::watch_event_json(event_type, body),
            (Encoding::Json, true) => {
                let object = if self.builtin {
                    meta::partial_object_metadata_json(body, META_API_VERSION)
                } else {
                    unstructured::partial_object_metadata_json(body, META_API_VERSION)
                };
                meta::watch_event_json(event_type, &object.map_err(|e| err(&e))?)
            }
            (Encoding::Protobuf, false) => proto::encode_watch_frame(
                event_type,
                &proto::encode_unknown(&self.api_version, &self.kind, body),
            ),
            (Encoding::Protobuf, true) => proto::encode_watch_frame(
                event_type,
                &proto::partial_object_metadata(body, META_API_VERSION).map_err(|e| err(&e))?,
            ),
        };
        Ok(Bytes::from(frame))
    }

    /// The object's bytes with its `metadata.resourceVersion` replaced (for a DELETED that
    /// carries a previous state at the event's RV).
    pub fn with_resource_version(&self, body: &[u8], rv: u64) -> Result<Vec<u8>, String> {
        let rv = rv.to_string();
        match self.encoding {
            Encoding::Json => {
                meta::with_resource_version_json(body, &rv).map_err(|e| e.to_string())
            }
            Encoding::Protobuf => {
                proto::with_resource_version(body, &rv).map_err(|e| e.to_string())
            }
        }
    }

    /// A BOOKMARK frame: an empty object of the kind with only the resourceVersion (and the
    /// initial-events-end annotation when it closes a `sendInitialEvents` stream).
    pub fn bookmark(&self, rv: u64, initial_events_end: bool, metadata: bool) -> Bytes {
        let rv = rv.to_string();
        let tails = proto::empty_object_tail(&self.api_version, &self.kind);
        let frame = match (self.encoding, metadata) {
            (Encoding::Json, true) => meta::watch_event_json(
                "BOOKMARK",
                &meta::bookmark_json(META_API_VERSION, META_KIND, &rv, initial_events_end, ""),
            ),
            (Encoding::Json, false) if self.builtin => meta::watch_event_json(
                "BOOKMARK",
                &meta::bookmark_json(
                    &self.api_version,
                    &self.kind,
                    &rv,
                    initial_events_end,
                    tails.map_or("", |t| t.json),
                ),
            ),
            (Encoding::Json, false) => meta::watch_event_json(
                "BOOKMARK",
                &unstructured::bookmark_json(
                    &self.api_version,
                    &self.kind,
                    &rv,
                    initial_events_end,
                ),
            ),
            (Encoding::Protobuf, true) => proto::encode_watch_frame(
                "BOOKMARK",
                &proto::bookmark(META_API_VERSION, META_KIND, &rv, initial_events_end, b""),
            ),
            (Encoding::Protobuf, false) => proto::encode_watch_frame(
                "BOOKMARK",
                &proto::bookmark(
                    &self.api_version,
                    &self.kind,
                    &rv,
                    initial_events_end,
                    tails.map_or(&[][..], |t| t.protobuf),
                ),
            ),
        };
        Bytes::from(frame)
    }

    /// An ERROR event carrying a Status (e.g. 410 Expired for a resourceVersion too old).
    pub fn error(&self, status: &Status) -> Bytes {
        Bytes::from(match self.encoding {
            Encoding::Json => meta::watch_event_json("ERROR", &status.to_json()),
            Encoding::Protobuf => proto::encode_watch_frame("ERROR", &status.to_protobuf()),
        })
    }
}

#[cfg(test)]
mod tests;
