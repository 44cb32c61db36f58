//! What a reflector reads from the upstream, in either encoding: list pages, watch events, and
//! the few fields of an event's object it acts on (resourceVersion, the initial-events-end
//! annotation, an ERROR's Status code). The reflector (`src/live/reflector.rs`) only moves
//! bytes and decides; the formats are read here.

use bytes::Bytes;

use crate::meta::{self, INITIAL_EVENTS_END_ANNOTATION};
use crate::proto;
use crate::resource::Encoding;

/// One page of a list, its items still as the upstream sent them (JSON item form, or bare
/// protobuf messages). Each item is copied out of the page: a cached object must not keep a
/// whole page's buffer alive after its neighbours are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    pub resource_version: u64,
    /// Empty or absent on the last page.
    pub continue_token: Option<String>,
    pub items: Vec<Bytes>,
}

/// Reads a list page (`<Kind>List` in JSON, or its `k8s\0` protobuf envelope).
pub fn parse_list_page(encoding: Encoding, body: &[u8]) -> Result<ListPage, String> {
    match encoding {
        Encoding::Json => {
            #[derive(serde::Deserialize)]
            struct Meta {
                #[serde(rename = "resourceVersion", default)]
                resource_version: String,
                #[serde(rename = "continue", default)]
                continue_token: Option<String>,
            }
            #[derive(serde::Deserialize)]
            struct List<'a> {
                metadata: Meta,
                #[serde(borrow, default)]
                items: Option<Vec<&'a serde_json::value::RawValue>>,
            }
            let l: List<'_> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            Ok(ListPage {
                resource_version: parse_rv(&l.metadata.resource_version)?,
                continue_token: l.metadata.continue_token,
                items: l
                    .items
                    .unwrap_or_default()
                    .into_iter()
                    .map(|raw| Bytes::copy_from_slice(raw.get().as_bytes()))
                    .collect(),
            })
        }
        Encoding::Protobuf => {
            let l = proto::decode_list(body).map_err(|e| e.to_string())?;
            Ok(ListPage {
                resource_version: parse_rv(l.meta.resource_version)?,
                continue_token: Some(l.meta.continue_token.to_string()),
                items: l.items.iter().map(|i| Bytes::copy_from_slice(i)).collect(),
            })
        }
    }
}

/// One watch event: its type and its object (a full JSON object, or the bare protobuf message
/// inside the event's `runtime.Unknown`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub event_type: String,
    pub object: Bytes,
}

/// Reads one watch event: a JSON line, or one protobuf frame's payload. The object is copied out
/// of the frame (it outlives the stream's read buffer in the cache).
pub fn parse_watch_event(encoding: Encoding, frame: &[u8]) -> Result<WatchEvent, String> {
    match encoding {
        Encoding::Json => {
            let e = meta::parse_watch_event_json(frame).map_err(|e| e.to_string())?;
            Ok(WatchEvent {
                event_type: e.event_type.into_owned(),
                object: Bytes::copy_from_slice(e.object),
            })
        }
        Encoding::Protobuf => {
            let e = proto::decode_watch_event(frame).map_err(|e| e.to_string())?;
            let envelope = proto::decode_unknown(e.object).map_err(|e| e.to_string())?;
            Ok(WatchEvent {
                event_type: e.event_type.to_string(),
                object: Bytes::copy_from_slice(envelope.raw),
            })
        }
    }
}

/// The resourceVersion of an event's object (a BOOKMARK's, an object's own).
pub fn object_resource_version(encoding: Encoding, object: &[u8]) -> Result<u64, String> {
    let meta = match encoding {
        Encoding::Json => meta::object_meta_json(object).map_err(|e| e.to_string())?,
        Encoding::Protobuf => proto::object_meta(object).map_err(|e| e.to_string())?,
    };
    parse_rv(&meta.resource_version)
}

/// Whether a BOOKMARK's object carries `k8s.io/initial-events-end: "true"`: the end of a
/// streaming list's state (KEP-3157).
pub fn is_initial_events_end(encoding: Encoding, object: &[u8]) -> bool {
    match encoding {
        Encoding::Json => {
            serde_json::from_slice::<serde_json::Value>(object).ok().is_some_and(|v| {
                v.get("metadata")
                    .and_then(|m| m.get("annotations"))
                    .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
                    .and_then(serde_json::Value::as_str)
                    == Some("true")
            })
        }
        Encoding::Protobuf => proto::has_annotation(object, INITIAL_EVENTS_END_ANNOTATION, "true"),
    }
}

/// The `code` of an ERROR event's Status object, if it has one.
pub fn error_code(encoding: Encoding, object: &[u8]) -> Option<i64> {
    match encoding {
        Encoding::Json => serde_json::from_slice::<serde_json::Value>(object)
            .ok()
            .and_then(|v| v.get("code").and_then(serde_json::Value::as_i64)),
        Encoding::Protobuf => proto::status_code(object),
    }
}

fn parse_rv(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| format!("resourceVersion {s:?} is not a number"))
}

#[cfg(test)]
mod tests;
