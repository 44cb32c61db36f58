//! One cached object in the other encoding, rendered with the 1.36 schema (`wire::codec`): a
//! cache of a built-in resource fed by another encoding's cache (`live::mirror`) rather than by
//! a list+watch of its own — one upstream watch per resource, whatever its readers ask for.
//!
//! Never a wrong byte: an object is rendered only once the schema is shown to read it exactly.
//! The source's own bytes are decoded with the schema and encoded again in *their* encoding; only
//! if that gives back the upstream's bytes, byte for byte, is the other encoding written from
//! the same object. A field the schema does not know (a newer apiserver: JSON names it, protobuf
//! carries its number), or anything else it would write differently, fails that check
//! ([`TranscodeError::NotExact`]) and the caller falls back to a watch in the encoding asked for.
//! That the schema writes each encoding as the apiserver does for what it reads is checked
//! against a real 1.36 apiserver's bytes (`wire/codec/tests/realcluster.rs`).
//!
//! The direction matters little: the apiserver decodes every built-in object it serves from its
//! protobuf in etcd, so its JSON is the JSON of that protobuf (a `nil` slice, never `[]`, where
//! protobuf cannot tell them apart) — which is what [`codec::from_protobuf`] writes too.

use bytes::Bytes;
use serde_json::Value;

use super::object::{CachedObject, Encoding, ObjectError};
use crate::wire::codec::{self, TypeRef};
use crate::wire::resource::ResourceInfo;
use crate::wire::{gojson, meta};

/// Why an object could not be rendered in the other encoding.
#[derive(Debug, thiserror::Error)]
pub enum TranscodeError {
    /// The schema cannot read the source's bytes.
    #[error("the schema cannot read it: {0}")]
    Decode(String),
    /// Encoded again, the source's bytes differ: the schema does not hold everything the
    /// upstream sent (a field it does not know), so the other encoding could miss it.
    #[error("the schema does not read it exactly (a field it does not know?)")]
    NotExact,
    /// The rendered bytes are not a cacheable object.
    #[error(transparent)]
    Object(#[from] ObjectError),
}

/// Renders a built-in resource's cached objects in one encoding from the other's.
#[derive(Debug, Clone)]
pub struct Transcoder {
    t: TypeRef,
    group: String,
    resource: String,
    to: Encoding,
}

impl Transcoder {
    /// For objects of `info` cached in the other encoding, rendered in `to`; `None` when the
    /// schema does not cover the kind (custom resources, kinds the codec lacks): those caches
    /// keep a watch of their own.
    pub fn new(info: &ResourceInfo, to: Encoding) -> Option<Transcoder> {
        if !info.is_builtin() {
            return None;
        }
        let t = codec::type_for(&info.api_version(), &info.kind)?;
        Some(Transcoder { t, group: info.group.clone(), resource: info.resource.clone(), to })
    }

    /// `object` (cached in the other encoding) as a cache in [`Transcoder::to`] holds it.
    pub fn object(&self, object: &CachedObject) -> Result<CachedObject, TranscodeError> {
        let body = match self.to {
            Encoding::Protobuf => self.json_to_protobuf(&object.body)?,
            Encoding::Json => self.protobuf_to_json(&object.body)?,
        };
        let rendered = match self.to {
            Encoding::Json => CachedObject::from_json_item(&self.group, &self.resource, body)?,
            Encoding::Protobuf => {
                CachedObject::from_protobuf_message(&self.group, &self.resource, body)?
            }
        };
        // The rendered object is the same object: what the cache routes on must agree.
        if (rendered.key.as_str(), rendered.resource_version, rendered.labels())
            != (object.key.as_str(), object.resource_version, object.labels())
        {
            return Err(TranscodeError::NotExact);
        }
        Ok(rendered)
    }

    /// A JSON list item (no `kind`, `apiVersion`) as the bare protobuf message.
    fn json_to_protobuf(&self, item: &[u8]) -> Result<Bytes, TranscodeError> {
        let value: Value =
            serde_json::from_slice(item).map_err(|e| TranscodeError::Decode(e.to_string()))?;
        let canonical = codec::canonicalize(self.t, &value)
            .map_err(|e| TranscodeError::Decode(e.to_string()))?;
        if !canonical.unknown_fields.is_empty() || gojson::to_vec(&canonical.value) != item {
            return Err(TranscodeError::NotExact);
        }
        let message = codec::canonical_to_protobuf(self.t, &canonical.value)
            .map_err(|e| TranscodeError::Decode(e.to_string()))?;
        Ok(kept(message))
    }

    /// A bare protobuf message as the JSON list item (no `kind`, `apiVersion`).
    fn protobuf_to_json(&self, message: &[u8]) -> Result<Bytes, TranscodeError> {
        let value = codec::from_protobuf(self.t, message)
            .map_err(|e| TranscodeError::Decode(e.to_string()))?;
        let again = codec::canonical_to_protobuf(self.t, &value)
            .map_err(|e| TranscodeError::Decode(e.to_string()))?;
        if again != message {
            return Err(TranscodeError::NotExact);
        }
        let object = gojson::to_vec(&value);
        let item = meta::strip_type_meta(&object).map_err(ObjectError::from)?;
        Ok(kept(item))
    }
}

/// `bytes` as a cache keeps them: in an allocation of their own size. A buffer written by
/// pushing has up to twice the room it needs (measured: a rendered cache of 100,000 ConfigMaps
/// held ~80 MiB more than the same objects loaded from the upstream).
fn kept(mut bytes: Vec<u8>) -> Bytes {
    bytes.shrink_to_fit();
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests;
