//! A client-go-like informer for the `mix` scenario: how it starts (a consistent WatchList, or
//! the classic LIST at `resourceVersion=0` then WATCH), how it reads a watch stream (JSON lines
//! or protobuf frames) and how it resumes from the last resourceVersion when the stream ends.
//!
//! Only what decides which requests a real client sends is modelled: the RVs it resumes from,
//! the initial-events-end bookmark, 410 Expired. Objects are not kept.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::Method;
use http_body_util::BodyExt;
use kubeplex::upstream::ResponseBody;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::hist::Histogram;
use super::target::Target;
use kubeplex_wire::proto;

/// What client-go sends for a protobuf client (kubelet, kube-proxy).
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf,application/json";
pub const ACCEPT_JSON: &str = "application/json";
/// What `kubectl get` sends: a Table, falling back to v1beta1 and then a plain list.
pub const ACCEPT_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// client-go's page size for an informer's list and kubectl's chunk size.
pub const PAGE: &str = "500";
/// Bounds, so that a misbehaving server cannot keep a client looping: requests per client in
/// one run, pages per list, and one line or frame of a watch stream.
const MAX_REQUESTS: u64 = 10_000;
const MAX_PAGES: usize = 10_000;
const MAX_EVENT_BYTES: usize = 16 << 20;
/// client-go's reflector backs off at least this long after a failed list or watch.
const BACKOFF: Duration = Duration::from_millis(800);

/// How an informer starts (and restarts after 410 Expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// client-go ≥ 1.35: `watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`
    /// with resourceVersion unset — a consistent read of the state as ADDED events, ended by a
    /// BOOKMARK annotated `k8s.io/initial-events-end`.
    WatchList,
    /// The reflector without WatchList: LIST `resourceVersion=0&limit=500` (served from the
    /// apiserver's watch cache), then WATCH from the list's RV.
    ListWatch,
}

/// Counts for one class of clients, shared by its clients (atomics, so a client cut off at the
/// end of the run has already counted what it did).
#[derive(Default)]
pub struct Tally {
    pub lists: AtomicU64,
    pub watches: AtomicU64,
    /// Requests answered with an error status, or that failed.
    pub errors: AtomicU64,
    /// ADDED / MODIFIED / DELETED events read, the initial ones included.
    pub events: AtomicU64,
    /// Watches that ended with 410 Expired (the informer then starts over).
    pub expired: AtomicU64,
    /// Clients that reached a synced state (list read, or initial-events-end seen).
    pub synced: AtomicU64,
    /// Time from the run's start to each client's first sync (kubectl: to its last page).
    pub sync_time: Mutex<Histogram>,
}

/// A client's first sync, recorded when it happens (a WatchList's watch stays open after).
struct FirstSync<'a> {
    done: &'a mut bool,
    since: Instant,
    tally: &'a Tally,
}

impl FirstSync<'_> {
    fn reached(self) {
        if !std::mem::replace(self.done, true) {
            self.tally.synced.fetch_add(1, Ordering::Relaxed);
            let mut hist = self.tally.sync_time.lock().unwrap_or_else(|p| p.into_inner());
            hist.record(self.since.elapsed());
        }
    }
}

/// One informer's request shape.
#[derive(Debug, Clone)]
pub struct Informer {
    /// `/api/v1/pods`, `/apis/discovery.k8s.io/v1/endpointslices`, ...
    pub collection: String,
    /// Selectors, as `(parameter, value)`: `fieldSelector`, `labelSelector`.
    pub selectors: Vec<(&'static str, String)>,
    pub protobuf: bool,
    pub start: Start,
    pub user_agent: &'static str,
}

impl Informer {
    fn accept(&self) -> &'static str {
        if self.protobuf {
            ACCEPT_PROTOBUF
        } else {
            ACCEPT_JSON
        }
    }

    /// The request path with its parameters sorted, as client-go's `url.Values.Encode` does.
    pub(crate) fn path(&self, params: &[(&str, &str)]) -> String {
        let mut all: BTreeMap<&str, &str> = params.iter().copied().collect();
        for (k, v) in &self.selectors {
            all.insert(k, v);
        }
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in all {
            query.append_pair(k, v);
        }
        format!("{}?{}", self.collection, query.finish())
    }
}

/// Runs an informer until the caller drops it (the end of the run): start, then keep watching,
/// resuming from the last RV the stream showed; start over after 410 Expired.
pub async fn run(target: Arc<Target>, informer: Informer, tally: Arc<Tally>, since: Instant) {
    // client-go draws each watch's timeout from [5, 10) minutes.
    let timeout = rand::random_range(300..600u64).to_string();
    let mut synced = false;
    let mut rv: Option<String> = None;
    for _ in 0..MAX_REQUESTS {
        let outcome = match rv.clone() {
            None => match informer.start {
                Start::WatchList => {
                    let path = informer.path(&[
                        ("allowWatchBookmarks", "true"),
                        ("resourceVersionMatch", "NotOlderThan"),
                        ("sendInitialEvents", "true"),
                        ("timeoutSeconds", &timeout),
                        ("watch", "true"),
                    ]);
                    tally.watches.fetch_add(1, Ordering::Relaxed);
                    let sync = FirstSync { done: &mut synced, since, tally: &tally };
                    watch(&target, &informer, &path, &tally, Some(sync)).await
                }
                Start::ListWatch => {
                    let listed = list_rv(&target, &informer, &tally).await;
                    if listed.is_ok() {
                        FirstSync { done: &mut synced, since, tally: &tally }.reached();
                    }
                    listed.map(|rv| Ended { last_rv: Some(rv), initial_end: true, expired: false })
                }
            },
            Some(from) => {
                let path = informer.path(&[
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersion", &from),
                    ("timeoutSeconds", &timeout),
                    ("watch", "true"),
                ]);
                tally.watches.fetch_add(1, Ordering::Relaxed);
                watch(&target, &informer, &path, &tally, None).await.map(|mut e| {
                    // A resumed watch carries no initial events: the informer stays synced.
                    e.initial_end = true;
                    e.last_rv = e.last_rv.or(Some(from));
                    e
                })
            }
        };
        match outcome {
            Ok(ended) if ended.expired => {
                tally.expired.fetch_add(1, Ordering::Relaxed);
                rv = None;
            }
            Ok(ended) if ended.initial_end => rv = ended.last_rv,
            // A WatchList cut before its initial-events-end is started again.
            Ok(_) => rv = None,
            // A failed list is retried; a failed watch is retried from the same RV.
            Err(e) => {
                tracing::debug!(error = %e, collection = %informer.collection, "request failed");
                tally.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

/// LIST at `resourceVersion=0&limit=500`, following continue tokens (then without an RV, as
/// client-go's pager does); the list's RV.
async fn list_rv(target: &Target, informer: &Informer, tally: &Tally) -> anyhow::Result<String> {
    let mut path = informer.path(&[("limit", PAGE), ("resourceVersion", "0")]);
    for _ in 0..MAX_PAGES {
        tally.lists.fetch_add(1, Ordering::Relaxed);
        let meta = get_list(target, &path, informer.accept(), informer.user_agent).await?;
        tally.events.fetch_add(meta.items, Ordering::Relaxed);
        match meta.continue_token {
            Some(token) => {
                path = informer.path(&[("continue", &token), ("limit", PAGE)]);
            }
            None => return Ok(meta.resource_version),
        }
    }
    bail!("more than {MAX_PAGES} pages")
}

/// A list's metadata and item count.
pub struct ListMeta {
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub items: u64,
}

/// GETs a JSON list (or Table) and reads its metadata.
pub async fn get_list(
    target: &Target,
    path: &str,
    accept: &str,
    user_agent: &str,
) -> anyhow::Result<ListMeta> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default, rename = "resourceVersion")]
        resource_version: String,
        #[serde(default, rename = "continue")]
        continue_token: String,
    }
    #[derive(Deserialize)]
    struct List {
        metadata: Meta,
        // A list's `items`, a Table's `rows`.
        #[serde(default)]
        items: Vec<serde::de::IgnoredAny>,
        #[serde(default)]
        rows: Vec<serde::de::IgnoredAny>,
    }
    let headers = [("Accept", accept), ("User-Agent", user_agent)];
    let (status, body) = target.fetch(Method::GET, path, &headers, None).await?;
    if !status.is_success() {
        bail!("{path}: {status}");
    }
    let list: List =
        serde_json::from_slice(&body).with_context(|| format!("{path}: not a list"))?;
    Ok(ListMeta {
        resource_version: list.metadata.resource_version,
        continue_token: Some(list.metadata.continue_token).filter(|t| !t.is_empty()),
        items: (list.items.len() + list.rows.len()) as u64,
    })
}

/// How a watch stream ended.
#[derive(Debug, Default)]
struct Ended {
    /// The RV of the last event or bookmark read.
    last_rv: Option<String>,
    /// Whether the initial-events-end bookmark was read.
    initial_end: bool,
    /// Whether it ended with an ERROR event (410 Expired, or another Status).
    expired: bool,
}

/// One watch request, read until the server ends it (or the run drops it); `sync` is recorded
/// at the initial-events-end bookmark of a WatchList.
async fn watch(
    target: &Target,
    informer: &Informer,
    path: &str,
    tally: &Tally,
    mut sync: Option<FirstSync<'_>>,
) -> anyhow::Result<Ended> {
    let headers = [("Accept", informer.accept()), ("User-Agent", informer.user_agent)];
    let resp = target.send(Method::GET, path, &headers, None).await?;
    if !resp.status().is_success() {
        bail!("{path}: {}", resp.status());
    }
    let mut stream = Stream::new(resp.into_body(), informer.protobuf);
    let mut ended = Ended::default();
    while let Some(event) = stream.next().await? {
        if let Some(rv) = event.rv.filter(|rv| !rv.is_empty()) {
            ended.last_rv = Some(rv);
        }
        match event.kind.as_str() {
            "BOOKMARK" if event.initial_end => {
                ended.initial_end = true;
                if let Some(sync) = sync.take() {
                    sync.reached();
                }
            }
            "BOOKMARK" => {}
            "ERROR" => {
                ended.expired = true;
                return Ok(ended);
            }
            _ => {
                tally.events.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(ended)
}

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
