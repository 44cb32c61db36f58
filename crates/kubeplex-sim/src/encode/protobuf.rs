//! Protobuf responses, assembled from each object's stored protobuf message.

use std::borrow::Cow;
use std::sync::Arc;

use super::ListMeta;
use crate::kinds::Kind;
use crate::store::Obj;
use crate::wire::meta::ListMeta as WireListMeta;
use crate::wire::proto;
use crate::wire::status::Status;

const META_API_VERSION: &str = "meta.k8s.io/v1";

fn message(o: &Obj) -> Result<&[u8], Status> {
    o.proto.as_deref().ok_or_else(|| Status::internal("object has no protobuf encoding"))
}

/// The message PartialObjectMetadata is written from: a built-in object's own, or — custom
/// resources being JSON only — a custom resource's metadata as the apiserver converts it to the
/// typed PartialObjectMetadata (the real apiserver's bytes for it: `tests/fixtures/realcluster/
/// custom/*.meta.pb`, checked in `src/cache/custom_resource_tests.rs`).
fn metadata_message<'o>(k: &Kind, o: &'o Obj) -> Result<Cow<'o, [u8]>, Status> {
    if !k.custom {
        return message(o).map(Cow::Borrowed);
    }
    crate::wire::meta::unstructured::partial_object_metadata_message(&o.json)
        .map(Cow::Owned)
        .map_err(Status::internal)
}

fn proto_error(e: proto::Error) -> Status {
    Status::internal(e)
}

pub fn object(k: &Kind, o: &Obj, metadata_only: bool) -> Result<Vec<u8>, Status> {
    if metadata_only {
        return proto::partial_object_metadata(&metadata_message(k, o)?, META_API_VERSION)
            .map_err(proto_error);
    }
    Ok(proto::encode_unknown(&k.api_version, &k.kind, message(o)?))
}

pub fn list(
    k: &Kind,
    items: &[Arc<Obj>],
    m: &ListMeta,
    metadata_only: bool,
) -> Result<Vec<u8>, Status> {
    let meta = WireListMeta {
        resource_version: &m.resource_version,
        continue_token: m.continue_token.as_deref().unwrap_or(""),
        remaining_item_count: m.remaining,
    };
    if metadata_only {
        let raws = items.iter().map(|o| metadata_message(k, o)).collect::<Result<Vec<_>, _>>()?;
        return proto::partial_object_metadata_list(META_API_VERSION, &meta, &raws)
            .map_err(proto_error);
    }
    let raws = items.iter().map(|o| message(o)).collect::<Result<Vec<_>, _>>()?;
    Ok(proto::encode_list(&k.api_version, &k.list_kind(), &meta, &raws))
}

pub fn watch_event(
    k: &Kind,
    event_type: &str,
    o: &Obj,
    metadata_only: bool,
) -> Result<Vec<u8>, Status> {
    Ok(proto::encode_watch_frame(event_type, &object(k, o, metadata_only)?))
}

pub fn bookmark(k: &Kind, rv: u64, initial_events_end: bool, metadata_only: bool) -> Vec<u8> {
    let rv = rv.to_string();
    let object = if metadata_only {
        proto::bookmark(META_API_VERSION, "PartialObjectMetadata", &rv, initial_events_end, b"")
    } else {
        let tail =
            proto::empty_object_tail(&k.api_version, &k.kind).map_or(&[][..], |t| t.protobuf);
        proto::bookmark(&k.api_version, &k.kind, &rv, initial_events_end, tail)
    };
    proto::encode_watch_frame("BOOKMARK", &object)
}

/// A Status in protobuf (`k8s\0` envelope), for errors to protobuf clients.
pub fn status(s: &Status) -> Vec<u8> {
    s.to_protobuf()
}

pub fn error_event(s: &Status) -> Vec<u8> {
    proto::encode_watch_frame("ERROR", &status(s))
}
