//! A watch stream read as a client reads it: JSON lines or length-prefixed protobuf frames,
//! each event taken as far as the client's next request depends on it (its type, RV, the
//! initial-events-end annotation) and which object it is about.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::BodyExt;
use kubeplex::upstream::ResponseBody;
use kubeplex_wire::proto;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One line or frame of a watch stream, at most.
const MAX_EVENT_BYTES: usize = 16 << 20;

/// One event as far as a client's next request depends on it, and which object it is about.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub kind: String,
    pub rv: Option<String>,
    pub initial_end: bool,
    /// The object's `namespace/name` (`/name` when cluster-scoped; empty for an ERROR).
    pub key: String,
    /// The event's object: its JSON, or its protobuf envelope (`k8s\0`, `runtime.Unknown`).
    pub object: Bytes,
}

/// A watch body split into events: JSON lines, or length-prefixed protobuf frames.
pub(crate) struct Stream {
    body: ResponseBody,
    protobuf: bool,
    lines: Vec<u8>,
    frames: proto::WatchFrameDecoder,
}

impl Stream {
    pub(crate) fn new(body: ResponseBody, protobuf: bool) -> Self {
        Stream {
            body,
            protobuf,
            lines: Vec::new(),
            frames: proto::WatchFrameDecoder::new(MAX_EVENT_BYTES),
        }
    }

    /// The next event; `None` when the server ended the stream.
    pub(crate) async fn next(&mut self) -> anyhow::Result<Option<Event>> {
        loop {
            if self.protobuf {
                if let Some(frame) = self.frames.next_frame()? {
                    return Ok(Some(protobuf_event(&frame)?));
                }
            } else if let Some(end) = self.lines.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.lines.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(json_event(&line)?));
            } else if self.lines.len() > MAX_EVENT_BYTES {
                bail!("a watch line over {MAX_EVENT_BYTES} bytes");
            }
            let Some(frame) = self.body.frame().await else { return Ok(None) };
            let Ok(data) = frame?.into_data() else { continue };
            if self.protobuf {
                self.frames.push(&data);
            } else {
                self.lines.extend_from_slice(&data);
            }
        }
    }
}

fn json_event(line: &[u8]) -> anyhow::Result<Event> {
    #[derive(Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        namespace: String,
        #[serde(default)]
        name: String,
        #[serde(default, rename = "resourceVersion")]
        resource_version: Option<String>,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    }
    #[derive(Deserialize, Default)]
    struct Object {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: String,
        #[serde(borrow)]
        object: Option<&'a RawValue>,
    }
    let line: Line = serde_json::from_slice(line).context("a watch line that is not an event")?;
    let object = line.object.map_or("", RawValue::get);
    let meta = serde_json::from_str::<Object>(object).unwrap_or_default().metadata;
    Ok(Event {
        kind: line.kind,
        rv: meta.resource_version,
        initial_end: meta.annotations.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true"),
        key: format!("{}/{}", meta.namespace, meta.name),
        object: Bytes::copy_from_slice(object.as_bytes()),
    })
}

const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

fn protobuf_event(frame: &[u8]) -> anyhow::Result<Event> {
    let event = proto::decode_watch_event(frame)?;
    let kind = event.event_type.to_string();
    // An ERROR's object is a Status, which has no ObjectMeta.
    if kind == "ERROR" {
        let object = Bytes::copy_from_slice(event.object);
        return Ok(Event { kind, rv: None, initial_end: false, key: String::new(), object });
    }
    let object = proto::decode_unknown(event.object)?.raw;
    let meta = proto::object_meta(object)?;
    let rv = meta.resource_version.into_owned();
    let key = format!("{}/{}", meta.namespace, meta.name);
    // ObjectMeta's annotations are its field 12, map entries of key = 1, value = 2.
    let mut initial_end = false;
    for field in proto::Fields::new(proto::object_meta_bytes(object)?) {
        if let (12, proto::Value::Len(entry)) = field? {
            let (mut key, mut value) = (&b""[..], &b""[..]);
            for f in proto::Fields::new(entry) {
                match f? {
                    (1, proto::Value::Len(k)) => key = k,
                    (2, proto::Value::Len(v)) => value = v,
                    _ => {}
                }
            }
            initial_end |= key == INITIAL_EVENTS_END.as_bytes() && value == b"true";
        }
    }
    Ok(Event { kind, rv: Some(rv), initial_end, key, object: Bytes::copy_from_slice(event.object) })
}

#[cfg(test)]
mod tests;
