//! Encoding objects, lists and watch events in the negotiated representation.

use std::sync::Arc;

use http::{HeaderMap, Response};
use serde_json::Value;

use super::kinds::Kind;
use super::object::{list_item_json, partial_metadata_json};
use super::repr::Repr;
use super::respond::{self, Body, JSON, PROTOBUF};
use super::store::Obj;
use crate::wire::request::ListOptions;
use crate::wire::status::Status;

/// `metadata` of a list response.
#[derive(Debug, Clone, Default)]
pub struct ListMeta {
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

impl ListMeta {
    fn json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("resourceVersion".into(), Value::String(self.resource_version.clone()));
        if let Some(c) = &self.continue_token {
            m.insert("continue".into(), Value::String(c.clone()));
        }
        if let Some(r) = self.remaining {
            m.insert("remainingItemCount".into(), Value::from(r));
        }
        Value::Object(m)
    }
}

pub fn object_response(
    kind: &Kind,
    obj: &Obj,
    repr: Repr,
    opts: &ListOptions,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let (ct, bytes) = match repr {
        Repr::Json => (JSON, obj.json.to_vec()),
        Repr::Meta => (JSON, partial_metadata_json(&obj.value)),
        Repr::Table => (JSON, super::table_glue::object(kind, obj, opts)?),
        Repr::Protobuf => (PROTOBUF, super::proto_glue::object(kind, obj)?),
    };
    Ok(respond::body(200, ct, bytes, headers))
}

pub fn list_response(
    kind: &Kind,
    items: &[Arc<Obj>],
    meta: &ListMeta,
    repr: Repr,
    opts: &ListOptions,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let (ct, bytes) = match repr {
        Repr::Json => (
            JSON,
            json_list(&kind.list_kind(), &kind.api_version, meta, items, |o| {
                list_item_json(kind, o).to_vec()
            }),
        ),
        Repr::Meta => (
            JSON,
            json_list("PartialObjectMetadataList", "meta.k8s.io/v1", meta, items, |o| {
                partial_metadata_json(&o.value)
            }),
        ),
        Repr::Table => (JSON, super::table_glue::list(kind, items, meta, opts)?),
        Repr::Protobuf => (PROTOBUF, super::proto_glue::list(kind, items, meta)?),
    };
    Ok(respond::body(200, ct, bytes, headers))
}

/// A JSON list assembled from each item's stored bytes (never re-serialized).
fn json_list(
    list_kind: &str,
    api_version: &str,
    meta: &ListMeta,
    items: &[Arc<Obj>],
    item: impl Fn(&Obj) -> Vec<u8>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|o| o.json.len() + 1).sum::<usize>() + 256);
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(Value::String(list_kind.into()).to_string().as_bytes());
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(Value::String(api_version.into()).to_string().as_bytes());
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(meta.json().to_string().as_bytes());
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&item(o));
    }
    out.extend_from_slice(b"]}");
    out
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
        Repr::Json => Ok(json_event(event_type, &obj.json)),
        Repr::Meta => Ok(json_event(event_type, &partial_metadata_json(&obj.value))),
        Repr::Table => {
            Ok(json_event(event_type, &super::table_glue::watch_event(kind, obj, opts, first)?))
        }
        Repr::Protobuf => super::proto_glue::watch_event(kind, event_type, obj),
    }
}

/// A BOOKMARK event: only kind, apiVersion and resourceVersion, plus the initial-events-end
/// annotation after `sendInitialEvents` (fixture `watchlist-json`).
pub fn bookmark(kind: &Kind, rv: u64, repr: Repr, initial_events_end: bool) -> Vec<u8> {
    if repr == Repr::Protobuf {
        return super::proto_glue::bookmark(kind, rv, initial_events_end);
    }
    let (k, av) = match repr {
        Repr::Meta => ("PartialObjectMetadata", "meta.k8s.io/v1"),
        _ => (kind.kind.as_str(), kind.api_version.as_str()),
    };
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if initial_events_end {
        meta.insert("annotations".into(), serde_json::json!({"k8s.io/initial-events-end": "true"}));
    }
    let mut o = serde_json::Map::new();
    o.insert("kind".into(), Value::String(k.into()));
    o.insert("apiVersion".into(), Value::String(av.into()));
    o.insert("metadata".into(), Value::Object(meta));
    json_event("BOOKMARK", &serde_json::to_vec(&Value::Object(o)).unwrap_or_default())
}

/// An ERROR event carrying a Status.
pub fn error_event(status: &Status, repr: Repr) -> Vec<u8> {
    if repr == Repr::Protobuf {
        return super::proto_glue::error_event(status);
    }
    json_event("ERROR", &status.to_json())
}

fn json_event(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event_type.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    out
}
