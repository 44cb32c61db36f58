//! The one list+watch per (resource, encoding) toward the upstream that fills a cache.
//!
//! An explicit state machine (docs/style.md rule 3):
//!
//! - [`State::StreamList`] (the first state) → [`State::Watch`] once the upstream's streaming
//!   list (`sendInitialEvents`) has delivered the state and its initial-events-end bookmark —
//!   the cache is replaced, diffed, and marked synced, and the same stream goes on as a watch;
//!   → [`State::List`] for good if the upstream refuses streaming lists (older apiservers);
//!   → [`State::Wait`] on other errors.
//! - [`State::List`] → [`State::Watch`] after a complete paged list (the cache is replaced,
//!   diffed against what it held, and marked synced); → [`State::Wait`] on an error.
//! - [`State::Watch`] → `Watch` again from the newest RV seen (event or bookmark) when the
//!   stream ends — upstream timeouts and dropped connections are routine; → `List` when the
//!   upstream no longer has history from that RV (410 Gone, or an ERROR event with 410);
//!   → `Wait` on other errors, to resume the same RV afterwards. (Relists use the streaming
//!   list again where the upstream has it.)
//! - [`State::Wait`] → its `then` state when the backoff, or the upstream's `Retry-After`,
//!   has elapsed.
//!
//! The loop never ends by itself; its owner (the resource cache) aborts it.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use rand::Rng;
use tokio::time::Instant;

use super::{Upstream, UpstreamBody};
use crate::cache::resource::{Encoding, EventKind, ResourceCache};
use crate::wire::meta;
use crate::wire::proto::{self, WatchFrameDecoder};

/// Items per page of the reflector's list (client-go's reflector uses 500 too).
pub const LIST_PAGE_SIZE: usize = 500;
/// Largest single watch frame accepted from the upstream (a protobuf frame is length-prefixed).
const MAX_WATCH_FRAME: usize = 64 * 1024 * 1024;
/// Largest list page accepted (an apiserver page of 500 large objects stays far below this).
const MAX_LIST_PAGE_BYTES: usize = 1024 * 1024 * 1024;
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Server-side timeout asked for each watch; the reflector re-watches when it ends, so
/// intermediaries never see an idle connection for long.
const WATCH_TIMEOUT_SECONDS: u64 = 300;
/// How long past its timeout a watch may stay silent before it is abandoned.
const WATCH_DEADLINE_MARGIN_SECONDS: u64 = 60;

/// Where the reflector is; see the module docs for the transitions.
#[derive(Debug)]
enum State {
    /// Get the state as a watch stream (`sendInitialEvents=true`), then keep watching it.
    StreamList,
    /// List everything with paged lists (first sync, or history lost).
    List,
    /// Watch changes after `rv`.
    Watch { rv: u64 },
    /// Wait until `until`, then continue with `then`.
    Wait { until: Instant, then: Box<State> },
}

/// Why one list or watch attempt ended.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    #[error("upstream history no longer covers the resourceVersion (410 Gone)")]
    Gone,
    #[error("upstream is throttling (429)")]
    Throttled { retry_after: Option<Duration> },
    #[error("upstream answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("upstream request failed: {0}")]
    Transport(String),
    #[error("malformed upstream data: {0}")]
    Decode(String),
}

pub struct Reflector {
    upstream: Arc<Upstream>,
    cache: Arc<ResourceCache>,
    /// Cleared when the upstream refuses `sendInitialEvents`.
    streaming: bool,
}

impl Reflector {
    pub fn new(upstream: Arc<Upstream>, cache: Arc<ResourceCache>) -> Self {
        Reflector { upstream, cache, streaming: true }
    }

    /// How a relist is done: streaming where the upstream has it.
    fn relist(&self) -> State {
        if self.streaming {
            State::StreamList
        } else {
            State::List
        }
    }

    /// Runs until aborted.
    pub async fn run(mut self) {
        let mut state = State::StreamList;
        let mut failures: u32 = 0;
        loop {
            state = match state {
                State::StreamList => match self.stream_list().await {
                    Ok(rv) => {
                        failures = 0;
                        State::Watch { rv }
                    }
                    // 4xx other than 410/429: the upstream does not do streaming lists.
                    Err(ReflectError::Status { status, .. }) if (400..500).contains(&status) => {
                        tracing::info!(resource = %self.cache.describe(), status, "no streaming lists upstream; using paged lists");
                        self.streaming = false;
                        State::List
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(resource = %self.cache.describe(), error = %e, "streaming list failed");
                        self.wait_after(&e, failures, State::StreamList)
                    }
                },
                State::List => match self.list().await {
                    Ok(rv) => {
                        failures = 0;
                        State::Watch { rv }
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(resource = %self.cache.describe(), error = %e, "list failed");
                        self.wait_after(&e, failures, State::List)
                    }
                },
                State::Watch { rv } => match self.watch(rv).await {
                    // A cache that had to skip an object relists to become whole again.
                    Ok(_) if !self.cache.is_complete() => self.relist(),
                    Ok(last) => {
                        failures = 0;
                        State::Watch { rv: last }
                    }
                    Err(ReflectError::Gone) => {
                        self.cache.metrics_relist();
                        tracing::info!(resource = %self.cache.describe(), rv, "watch history expired; relisting");
                        self.relist()
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(resource = %self.cache.describe(), error = %e, "watch failed");
                        let resume = self.cache.resource_version().max(rv);
                        self.wait_after(&e, failures, State::Watch { rv: resume })
                    }
                },
                State::Wait { until, then } => {
                    tokio::time::sleep_until(until).await;
                    *then
                }
            };
        }
    }

    /// Exponential backoff with full jitter, or the upstream's `Retry-After` when it gave one.
    fn wait_after(&self, e: &ReflectError, failures: u32, then: State) -> State {
        let delay = match e {
            // The upstream's word, kept within our own bounds: 0 must not spin, a huge value
            // must not park the cache for a day (or overflow the clock).
            ReflectError::Throttled { retry_after: Some(d) } => {
                (*d).clamp(BACKOFF_MIN, BACKOFF_MAX)
            }
            _ => {
                let exp = BACKOFF_MIN.saturating_mul(1u32 << failures.min(10)).min(BACKOFF_MAX);
                let jitter = rand::rng().random_range(0.5..1.0);
                exp.mul_f64(jitter)
            }
        };
        let now = Instant::now();
        State::Wait { until: now.checked_add(delay).unwrap_or(now), then: Box::new(then) }
    }

    async fn get(&self, path_and_query: &str) -> Result<http::Response<Incoming>, ReflectError> {
        let accept = match self.cache.encoding() {
            Encoding::Json => "application/json",
            Encoding::Protobuf => "application/vnd.kubernetes.protobuf",
        };
        let body: UpstreamBody = Empty::new().map_err(|never| match never {}).boxed();
        let req = Request::builder()
            .method(Method::GET)
            .uri(path_and_query)
            .header(header::ACCEPT, accept)
            .header(header::USER_AGENT, concat!("kubeplex/", env!("CARGO_PKG_VERSION")))
            .body(body)
            .map_err(|e| ReflectError::Transport(e.to_string()))?;
        let resp =
            self.upstream.send(req).await.map_err(|e| ReflectError::Transport(e.to_string()))?;
        match resp.status() {
            StatusCode::OK => Ok(resp),
            StatusCode::GONE => Err(ReflectError::Gone),
            StatusCode::TOO_MANY_REQUESTS => {
                let retry_after = resp
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                Err(ReflectError::Throttled { retry_after })
            }
            s => {
                let body = collect(resp.into_body(), 64 * 1024).await.unwrap_or_default();
                Err(ReflectError::Status {
                    status: s.as_u16(),
                    message: String::from_utf8_lossy(&body).into_owned(),
                })
            }
        }
    }

    /// A complete paged list; replaces the cache's contents. Returns the list's RV.
    async fn list(&self) -> Result<u64, ReflectError> {
        self.cache.metrics_upstream_call("list");
        self.cache.load_started();
        let result = self.list_pages().await;
        if result.is_err() {
            self.cache.load_failed();
        }
        result
    }

    async fn list_pages(&self) -> Result<u64, ReflectError> {
        let base = self.cache.collection_path();
        let mut objects = Vec::new();
        let mut complete = true;
        let mut list_rv: Option<u64> = None;
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("{base}?limit={LIST_PAGE_SIZE}");
            if let Some(t) = &token {
                path.push_str("&continue=");
                path.extend(form_urlencoded::byte_serialize(t.as_bytes()));
            }
            let resp = self.get(&path).await?;
            let body = collect(resp.into_body(), MAX_LIST_PAGE_BYTES).await?;
            let page = self.parse_list(&body)?;
            for item in page.items {
                match self.cache.object_from_item(item) {
                    Ok(o) => objects.push(o),
                    Err(e) => {
                        tracing::error!(resource = %self.cache.describe(), error = %e, "skipping an object the cache cannot index; serving by passthrough until a clean relist");
                        complete = false;
                    }
                }
            }
            list_rv.get_or_insert(page.resource_version);
            match page.continue_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        let rv = list_rv.unwrap_or(0);
        self.cache.replace(objects, rv);
        if !complete {
            self.cache.mark_incomplete();
        }
        Ok(rv)
    }

    fn parse_list(&self, body: &Bytes) -> Result<ListPage, ReflectError> {
        let decode = |e: String| ReflectError::Decode(e);
        match self.cache.encoding() {
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
                let l: List<'_> =
                    serde_json::from_slice(body).map_err(|e| decode(e.to_string()))?;
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
                let l = proto::decode_list(body).map_err(|e| decode(e.to_string()))?;
                Ok(ListPage {
                    resource_version: parse_rv(l.meta.resource_version)?,
                    continue_token: Some(l.meta.continue_token.to_string()),
                    items: l.items.iter().map(|i| Bytes::copy_from_slice(i)).collect(),
                })
            }
        }
    }

    /// One watch stream from `rv`, applied to the cache as it arrives. Returns the newest RV
    /// seen when the stream ends.
    async fn watch(&self, rv: u64) -> Result<u64, ReflectError> {
        self.cache.metrics_upstream_call("watch");
        let path = format!(
            "{}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}",
            self.cache.collection_path()
        );
        self.stream(&path, rv, &mut None).await
    }

    /// A streaming list: the state as ADDED events up to the initial-events-end bookmark (the
    /// cache is replaced then), then changes, on one stream. Returns the newest RV seen.
    async fn stream_list(&self) -> Result<u64, ReflectError> {
        self.cache.metrics_upstream_call("watchlist");
        let path = format!(
            "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}",
            self.cache.collection_path()
        );
        let mut initial = Some(Vec::new());
        self.cache.load_started();
        let result = self.stream(&path, 0, &mut initial).await;
        if result.is_err() || initial.is_some() {
            // Nothing was replaced (or, after the state, the stream failed: the load itself
            // completed and `replace` already ended it; this only clears a load left open).
            self.cache.load_failed();
        }
        let last = result?;
        if initial.is_some() {
            // The stream ended before the state was complete: nothing was applied.
            return Err(ReflectError::Transport(
                "streaming list ended before its initial events did".into(),
            ));
        }
        Ok(last)
    }

    /// Reads one watch stream. While `initial` is `Some`, ADDED events are collected into it
    /// until the initial-events-end bookmark, which replaces the cache's contents.
    async fn stream(
        &self,
        path: &str,
        rv: u64,
        initial: &mut Initial,
    ) -> Result<u64, ReflectError> {
        let started = Instant::now();
        let resp = self.get(path).await?;
        let mut body = resp.into_body();
        let mut last = rv;
        let mut events = 0usize;
        let mut lines = BytesMut::new();
        // Where the search for the next newline resumes: earlier bytes hold none.
        let mut scanned = 0;
        let mut frames = WatchFrameDecoder::new(MAX_WATCH_FRAME);
        // The upstream ends the watch at timeoutSeconds; a connection that silently stopped
        // carrying data (a dropped NAT flow) is given up a little after that.
        let deadline =
            started + Duration::from_secs(WATCH_TIMEOUT_SECONDS + WATCH_DEADLINE_MARGIN_SECONDS);
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(resource = %self.cache.describe(), "watch silent past its deadline; reconnecting");
                    break;
                }
            };
            let frame = frame.map_err(|e| ReflectError::Transport(e.to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            match self.cache.encoding() {
                Encoding::Json => {
                    lines.extend_from_slice(&data);
                    while let Some(pos) = lines[scanned..].iter().position(|b| *b == b'\n') {
                        let line = lines.split_to(scanned + pos + 1);
                        scanned = 0;
                        if line.len() > 1 {
                            events += 1;
                            last = last.max(self.json_event(&line, initial)?);
                        }
                    }
                    scanned = lines.len();
                    if lines.len() > MAX_WATCH_FRAME {
                        return Err(ReflectError::Decode("watch event over the size limit".into()));
                    }
                }
                Encoding::Protobuf => {
                    frames.push(&data);
                    while let Some(f) =
                        frames.next_frame().map_err(|e| ReflectError::Decode(e.to_string()))?
                    {
                        events += 1;
                        last = last.max(self.protobuf_event(&f, initial)?);
                    }
                }
            }
        }
        // A watch that ends at once with nothing in it is a failing upstream (or something in
        // front of it), not a routine timeout: back off rather than reconnect in a tight loop,
        // as client-go's reflector does.
        if events == 0 && started.elapsed() < Duration::from_secs(1) {
            return Err(ReflectError::Transport("watch ended immediately without events".into()));
        }
        Ok(last)
    }

    fn json_event(&self, line: &[u8], initial: &mut Initial) -> Result<u64, ReflectError> {
        let e =
            meta::parse_watch_event_json(line).map_err(|e| ReflectError::Decode(e.to_string()))?;
        let object = Bytes::copy_from_slice(e.object);
        self.event(&e.event_type, object, initial)
    }

    fn protobuf_event(&self, frame: &[u8], initial: &mut Initial) -> Result<u64, ReflectError> {
        let e =
            proto::decode_watch_event(frame).map_err(|e| ReflectError::Decode(e.to_string()))?;
        let envelope =
            proto::decode_unknown(e.object).map_err(|e| ReflectError::Decode(e.to_string()))?;
        if e.event_type == "ERROR" {
            return Err(error_event_status(self.cache.encoding(), e.object));
        }
        self.event(e.event_type, Bytes::copy_from_slice(envelope.raw), initial)
    }

    /// Applies one event; `object` is a full JSON object or a bare protobuf message.
    fn event(
        &self,
        event_type: &str,
        object: Bytes,
        initial: &mut Initial,
    ) -> Result<u64, ReflectError> {
        let kind = match event_type {
            "ADDED" => EventKind::Added,
            "MODIFIED" => EventKind::Modified,
            "DELETED" => EventKind::Deleted,
            "BOOKMARK" => {
                let rv =
                    self.cache.object_resource_version(&object).map_err(ReflectError::Decode)?;
                match initial.take() {
                    Some(objects) if is_initial_events_end(self.cache.encoding(), &object) => {
                        let complete = self.cache.is_complete();
                        self.cache.replace(objects, rv);
                        if !complete {
                            // An initial event was skipped: the state is not whole.
                            self.cache.mark_incomplete();
                        }
                    }
                    // Bookmarks before the end of the initial events only move the RV.
                    Some(objects) => *initial = Some(objects),
                    None => self.cache.bookmark(rv),
                }
                return Ok(rv);
            }
            "ERROR" => return Err(error_event_status(self.cache.encoding(), &object)),
            other => {
                return Err(ReflectError::Decode(format!("unknown watch event type {other:?}")))
            }
        };
        // One object kubeplex cannot route must not wedge the reflector (re-watching would
        // meet it again, forever), and must not be silently missing from lists either: it is
        // skipped and the cache stops answering (everything passes through) until a relist
        // loads it completely.
        let obj = match self.cache.object_from_event(object) {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(resource = %self.cache.describe(), error = %e, "skipping an object the cache cannot index; serving by passthrough until a clean relist");
                self.cache.mark_incomplete();
                return Ok(0);
            }
        };
        let rv = obj.resource_version;
        match initial {
            // Initial events carry each object's own RV, not the list's.
            Some(objects) if kind == EventKind::Added => {
                objects.push(obj);
                return Ok(0);
            }
            Some(_) => {
                return Err(ReflectError::Decode(format!(
                    "{event_type} before the initial events ended"
                )))
            }
            None => {
                self.cache.apply(kind, obj);
            }
        }
        Ok(rv)
    }
}

/// Whether a BOOKMARK's object carries `k8s.io/initial-events-end: "true"`.
fn is_initial_events_end(encoding: Encoding, object: &[u8]) -> bool {
    match encoding {
        Encoding::Json => {
            serde_json::from_slice::<serde_json::Value>(object).ok().is_some_and(|v| {
                v.pointer("/metadata/annotations/k8s.io~1initial-events-end")
                    .and_then(serde_json::Value::as_str)
                    == Some("true")
            })
        }
        // ObjectMeta is field 1 of the message; annotations are its field 12 (map entries of
        // key = 1, value = 2).
        Encoding::Protobuf => proto::object_meta_bytes(object).ok().is_some_and(|meta| {
            proto::Fields::new(meta).filter_map(Result::ok).any(|(f, v)| match (f, v) {
                (12, proto::Value::Len(entry)) => {
                    let mut key = None;
                    let mut value = None;
                    for (ef, ev) in proto::Fields::new(entry).filter_map(Result::ok) {
                        match (ef, ev) {
                            (1, proto::Value::Len(k)) => key = Some(k),
                            (2, proto::Value::Len(v)) => value = Some(v),
                            _ => {}
                        }
                    }
                    key == Some(&b"k8s.io/initial-events-end"[..]) && value == Some(&b"true"[..])
                }
                _ => false,
            })
        }),
    }
}

/// The objects of a streaming list collected so far; `None` once its state is complete.
type Initial = Option<Vec<crate::cache::CachedObject>>;

struct ListPage {
    resource_version: u64,
    continue_token: Option<String>,
    items: Vec<Bytes>,
}

fn parse_rv(s: &str) -> Result<u64, ReflectError> {
    s.parse::<u64>()
        .map_err(|_| ReflectError::Decode(format!("resourceVersion {s:?} is not a number")))
}

/// The error an upstream ERROR event stands for: 410 means relist, anything else a retry.
fn error_event_status(encoding: Encoding, object: &[u8]) -> ReflectError {
    let code = match encoding {
        Encoding::Json => serde_json::from_slice::<serde_json::Value>(object)
            .ok()
            .and_then(|v| v.get("code").and_then(serde_json::Value::as_u64)),
        // Status message: code is field 6 (varint) of the bare message inside the envelope.
        Encoding::Protobuf => proto::decode_unknown(object).ok().and_then(|u| {
            proto::Fields::new(u.raw).filter_map(Result::ok).find_map(|(f, v)| match (f, v) {
                (6, proto::Value::Varint(c)) => Some(c),
                _ => None,
            })
        }),
    };
    match code {
        Some(410) => ReflectError::Gone,
        Some(c) => ReflectError::Status { status: c as u16, message: "ERROR watch event".into() },
        None => ReflectError::Decode("ERROR watch event without a Status code".into()),
    }
}

/// Reads a whole body, refusing more than `limit` bytes.
async fn collect(body: Incoming, limit: usize) -> Result<Bytes, ReflectError> {
    http_body_util::Limited::new(body, limit)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ReflectError::Transport(e.to_string()))
}
