//! Encoding objects, lists and watch events in the negotiated representation, assembled from
//! each object's stored bytes with the shared `wire` builders (the proxy uses the same ones).

use std::sync::Arc;

use http::{HeaderMap, Response};

use super::kinds::Kind;
use super::object::{json_as, list_item_json};
use super::repr::Repr;
use super::respond::{self, Body, JSON, PROTOBUF};
use super::store::Obj;
use crate::wire::meta::{self, unstructured, ListMeta as WireListMeta};
use crate::wire::request::ListOptions;
use crate::wire::status::Status;

pub(crate) mod protobuf;
mod table;

const META_API_VERSION: &str = "meta.k8s.io/v1";

/// `metadata` of a list response.
#[derive(Debug, Clone, Default)]
pub struct ListMeta {
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

impl ListMeta {
    fn wire(&self) -> WireListMeta<'_> {
        WireListMeta {
            resource_version: &self.resource_version,
            continue_token: self.continue_token.as_deref().unwrap_or(""),
            remaining_item_count: self.remaining,
        }
    }
}

fn meta_error(e: meta::Error) -> Status {
    Status::internal(e)
}

/// `PartialObjectMetadata` JSON of one object.
fn partial_json(kind: &Kind, obj: &Obj) -> Result<Vec<u8>, Status> {
    if kind.custom {
        unstructured::partial_object_metadata_json(&obj.json, META_API_VERSION)
    } else {
        meta::partial_object_metadata_json(&obj.json, META_API_VERSION)
    }
    .map_err(meta_error)
}

pub fn object_response(
    kind: &Kind,
    obj: &Obj,
    repr: Repr,
    opts: &ListOptions,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let (ct, bytes) = match repr {
        Repr::Json => (JSON, json_as(kind, obj).to_vec()),
        Repr::Meta => (JSON, partial_json(kind, obj)?),
        Repr::Table => (JSON, table::object(kind, obj, opts)?),
        Repr::Protobuf => (PROTOBUF, protobuf::object(kind, obj, false)?),
        Repr::MetaProtobuf => (PROTOBUF, protobuf::object(kind, obj, true)?),
    };
    Ok(respond::body(200, ct, bytes, headers))
}

pub fn list_response(
    kind: &Kind,
    items: &[Arc<Obj>],
    m: &ListMeta,
    repr: Repr,
    opts: &ListOptions,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let wire = m.wire();
    let (ct, bytes) = match repr {
        Repr::Json => {
            let bodies: Vec<_> = items.iter().map(|o| list_item_json(kind, o)).collect();
            let list = if kind.custom { unstructured::list_json } else { meta::list_json };
            (JSON, list(&kind.api_version, &kind.list_kind(), &wire, &bodies))
        }
        Repr::Meta => {
            let bodies: Vec<&[u8]> = items.iter().map(|o| o.json.as_ref()).collect();
            let list = if kind.custom {
                unstructured::partial_object_metadata_list_json
            } else {
                meta::partial_object_metadata_list_json
            };
            (JSON, list(META_API_VERSION, &wire, &bodies).map_err(meta_error)?)
        }
        Repr::Table => (JSON, table::list(kind, items, m, opts)?),
        Repr::Protobuf => (PROTOBUF, protobuf::list(kind, items, m, false)?),
        Repr::MetaProtobuf => (PROTOBUF, protobuf::list(kind, items, m, true)?),
    };
    Ok(respond::body(200, ct, bytes, headers))
}

/// One watch event's bytes in the stream's representation. `first` marks the first event of a
/// Table watch (only it carries column definitions).
pub fn watch_event(
    kind: &Kind,
    event_type: &str,
    obj: &Obj,
    repr: Repr,
    opts: &ListOptions,
    first: bool,
) -> Result<Vec<u8>, Status> {
    match repr {
        Repr::Json => Ok(meta::watch_event_json(event_type, &json_as(kind, obj))),
        Repr::Meta => Ok(meta::watch_event_json(event_type, &partial_json(kind, obj)?)),
        Repr::Table => {
            Ok(meta::watch_event_json(event_type, &table::watch_event(kind, obj, opts, first)?))
        }
        Repr::Protobuf => protobuf::watch_event(kind, event_type, obj, false),
        Repr::MetaProtobuf => protobuf::watch_event(kind, event_type, obj, true),
    }
}

/// A BOOKMARK event: kind, apiVersion, resourceVersion and the kind's empty fields, plus the
/// initial-events-end annotation after `sendInitialEvents` (fixture `watchlist-json`).
pub fn bookmark(kind: &Kind, rv: u64, repr: Repr, initial_events_end: bool) -> Vec<u8> {
    let rv_s = rv.to_string();
    let object = match repr {
        Repr::Protobuf => return protobuf::bookmark(kind, rv, initial_events_end, false),
        Repr::MetaProtobuf => return protobuf::bookmark(kind, rv, initial_events_end, true),
        Repr::Meta => meta::bookmark_json(
            META_API_VERSION,
            "PartialObjectMetadata",
            &rv_s,
            initial_events_end,
            "",
        ),
        _ if kind.custom => {
            unstructured::bookmark_json(&kind.api_version, &kind.kind, &rv_s, initial_events_end)
        }
        _ => {
            let tail = crate::wire::proto::empty_object_tail(&kind.api_version, &kind.kind)
                .map_or("", |t| t.json);
            meta::bookmark_json(&kind.api_version, &kind.kind, &rv_s, initial_events_end, tail)
        }
    };
    meta::watch_event_json("BOOKMARK", &object)
}

/// An ERROR event carrying a Status.
pub fn error_event(status: &Status, repr: Repr) -> Vec<u8> {
    if repr.is_protobuf() {
        return protobuf::error_event(status);
    }
    meta::watch_event_json("ERROR", &status.to_json())
}
