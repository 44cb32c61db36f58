//! A client-go informer as the load tool's clients run it: client-go's reflector — how it
//! starts (a consistent WatchList, or the classic LIST at `resourceVersion=0` then WATCH), how
//! it reads a watch stream (JSON lines or protobuf frames: [`stream`]), how it resumes from the
//! last resourceVersion when the stream ends, starts over after 410 Expired, falls back from a
//! failed WatchList to a list, and backs off after a failure.
//!
//! A node agent's informer keeps what its store would hold — each object's key and
//! resourceVersion — so that its view can be compared with the apiserver's at the end, and
//! hands a handler the objects that come and go ([`Watched::new`]); the `mix` scenario's keep
//! nothing, only what decides which requests a real client sends ([`Watched::counting`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{Method, StatusCode};
use kubeplex_wire::proto;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::hist::Histogram;
use super::target::Target;

mod stream;

pub(crate) use stream::Stream;

/// What client-go sends for a protobuf client (kubelet, kube-proxy).
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf,application/json";
pub const ACCEPT_JSON: &str = "application/json";
/// What `kubectl get` sends: a Table, falling back to v1beta1 and then a plain list.
pub const ACCEPT_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// client-go's page size for an informer's list and kubectl's chunk size.
pub const PAGE: &str = "500";
/// Bounds, so that a misbehaving server cannot keep a client looping: requests per informer in
/// one run, pages per list.
const MAX_REQUESTS: u64 = 10_000;
const MAX_PAGES: usize = 10_000;
/// client-go's reflector backs off after a failed list or watch (`reflector.go`:
/// `defaultBackoffInit` 800 ms, factor 2, jitter 1.0 — each wait drawn from [d, 2d) — capped at
/// 30 s, back to the start after 2 minutes without a failure).
const BACKOFF_INIT: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const BACKOFF_RESET: Duration = Duration::from_secs(120);

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
    /// ADDED / MODIFIED / DELETED events read, the initial ones and listed items included.
    pub events: AtomicU64,
    /// Watches that ended with 410 Expired (the informer then starts over).
    pub expired: AtomicU64,
    /// Clients that reached a synced state (list read, or initial-events-end seen).
    pub synced: AtomicU64,
    /// Time from the run's start to each client's first sync (kubectl: to its last page).
    pub sync_time: Mutex<Histogram>,
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

/// An object that came or went, for the informer's handler.
#[derive(Debug)]
pub enum Change {
    /// A key the store did not hold: the object's JSON, or its protobuf envelope.
    Added {
        key: String,
        object: Bytes,
    },
    Deleted {
        key: String,
    },
}

/// Where an informer's changes go, if anywhere.
pub type Handler = Option<mpsc::UnboundedSender<Change>>;

/// One informer and the state it keeps.
pub struct Watched {
    pub spec: Informer,
    /// Whether it keeps a store (a node agent's) or only counts (the `mix` scenario's).
    keeps: bool,
    /// What the informer's store holds: `namespace/name` → resourceVersion.
    pub objects: Mutex<BTreeMap<String, String>>,
    pub synced: AtomicBool,
    /// Requests refused with 403 (a Node authorizer that has not caught up yet, an RBAC gap).
    pub refused: AtomicU64,
}

/// A store's state as a list or a WatchList's initial events build it: key → (RV, object).
type State = BTreeMap<String, (String, Bytes)>;

impl Watched {
    /// An informer that keeps its store.
    pub fn new(spec: Informer) -> Arc<Watched> {
        Arc::new(Watched::keeping(spec, true))
    }

    /// An informer that keeps nothing but its counts: its requests are a real client's.
    pub fn counting(spec: Informer) -> Arc<Watched> {
        Arc::new(Watched::keeping(spec, false))
    }

    fn keeping(spec: Informer, keeps: bool) -> Watched {
        Watched {
            spec,
            keeps,
            objects: Mutex::new(BTreeMap::new()),
            synced: AtomicBool::new(false),
            refused: AtomicU64::new(0),
        }
    }

    /// Replaces the store with `state` (a relist), telling the handler what came and went.
    fn replace(&self, state: State, changes: &Handler) {
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = changes {
            for key in objects.keys().filter(|k| !state.contains_key(*k)) {
                let _ = tx.send(Change::Deleted { key: key.clone() });
            }
            for (key, (_, object)) in state.iter().filter(|(k, _)| !objects.contains_key(*k)) {
                let _ = tx.send(Change::Added { key: key.clone(), object: object.clone() });
            }
        }
        *objects = state.into_iter().map(|(k, (rv, _))| (k, rv)).collect();
    }

    fn apply(&self, kind: &str, key: String, rv: String, object: Bytes, changes: &Handler) {
        if !self.keeps {
            return;
        }
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        match kind {
            "DELETED" => {
                if objects.remove(&key).is_some() {
                    if let Some(tx) = changes {
                        let _ = tx.send(Change::Deleted { key });
                    }
                }
            }
            _ => {
                if objects.insert(key.clone(), rv).is_none() {
                    if let Some(tx) = changes {
                        let _ = tx.send(Change::Added { key, object });
                    }
                }
            }
        }
    }

    fn reached_sync(&self, tally: &Tally, since: Instant) {
        if !self.synced.swap(true, Ordering::Relaxed) {
            tally.synced.fetch_add(1, Ordering::Relaxed);
            let mut hist = tally.sync_time.lock().unwrap_or_else(|p| p.into_inner());
            hist.record(since.elapsed());
        }
    }

    fn refused(&self, status: StatusCode) {
        if status == StatusCode::FORBIDDEN {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The reflector's back-off: the next wait, and the state it keeps (the scale scenario's
/// watchers back off with it too).
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    last_failure: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff { next: BACKOFF_INIT, last_failure: None }
    }

    /// How long to wait after a failure now.
    pub(crate) fn wait(&mut self) -> Duration {
        let now = Instant::now();
        if self.last_failure.is_some_and(|t| now - t >= BACKOFF_RESET) {
            self.next = BACKOFF_INIT;
        }
        self.last_failure = Some(now);
        let base = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        base.mul_f64(1.0 + rand::random::<f64>())
    }
}

/// How one watch request ended.
#[derive(Debug, Default)]
struct Ended {
    /// The RV of the last event or bookmark read.
    last_rv: Option<String>,
    /// A WatchList's initial events were all read (or the watch was a resumed one).
    initial_end: bool,
    /// It ended with an ERROR event (410 Expired, or another Status).
    expired: bool,
}

/// Runs the informer until the caller drops it (the end of the run): start, then keep
/// watching, resuming from the last RV the stream showed; start over after 410 Expired.
pub async fn run(
    target: Arc<Target>,
    w: Arc<Watched>,
    tally: Arc<Tally>,
    since: Instant,
    changes: Handler,
) {
    // client-go draws each watch's timeout from [5, 10) minutes.
    let timeout = rand::random_range(300..600u64).to_string();
    let mut rv: Option<String> = None;
    let mut backoff = Backoff::new();
    for _ in 0..MAX_REQUESTS {
        let outcome = match (&rv, w.spec.start) {
            (None, Start::WatchList) => {
                let path = w.spec.path(&[
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersionMatch", "NotOlderThan"),
                    ("sendInitialEvents", "true"),
                    ("timeoutSeconds", &timeout),
                    ("watch", "true"),
                ]);
                tally.watches.fetch_add(1, Ordering::Relaxed);
                match watch(&target, &w, &path, &tally, true, since, &changes).await {
                    // client-go's reflector answers a failed WatchList (a refusal, an error,
                    // a stream that ended before its initial events did) by listing at once
                    // (`reflector.go`, `ListAndWatchWithContext`: "Falling back to regular
                    // list"), then watching from the list's RV; only a failed list backs off.
                    Err(e) => {
                        tracing::debug!(error = %e, collection = %w.spec.collection, "watchlist failed: listing");
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        list(&target, &w, &tally, since, &changes).await.map(|rv| Ended {
                            last_rv: Some(rv),
                            initial_end: true,
                            expired: false,
                        })
                    }
                    ended => ended,
                }
            }
            (None, Start::ListWatch) => list(&target, &w, &tally, since, &changes)
                .await
                .map(|rv| Ended { last_rv: Some(rv), initial_end: true, expired: false }),
            (Some(from), _) => {
                let path = w.spec.path(&[
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersion", from),
                    ("timeoutSeconds", &timeout),
                    ("watch", "true"),
                ]);
                tally.watches.fetch_add(1, Ordering::Relaxed);
                let from = from.clone();
                watch(&target, &w, &path, &tally, false, since, &changes).await.map(|mut e| {
                    // A resumed watch carries no initial events: the informer stays synced.
                    e.initial_end = true;
                    e.last_rv = e.last_rv.or(Some(from));
                    e
                })
            }
        };
        match outcome {
            Ok(e) if e.expired => {
                tally.expired.fetch_add(1, Ordering::Relaxed);
                rv = None;
            }
            Ok(e) if e.initial_end => rv = e.last_rv,
            // A WatchList cut before its initial-events-end is started again.
            Ok(_) => rv = None,
            // A failed list is retried; a failed watch is retried from the same RV.
            Err(e) => {
                tracing::debug!(error = %e, collection = %w.spec.collection, "request failed");
                tally.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(backoff.wait()).await;
            }
        }
    }
}

/// One watch request read to its end. A fresh WatchList's initial events replace the store at
/// the initial-events-end bookmark, as the reflector's temporary store does.
async fn watch(
    target: &Target,
    w: &Watched,
    path: &str,
    tally: &Tally,
    fresh: bool,
    since: Instant,
    changes: &Handler,
) -> anyhow::Result<Ended> {
    let headers = [("Accept", w.spec.accept()), ("User-Agent", w.spec.user_agent)];
    let resp = target.send(Method::GET, path, &headers, None).await?;
    if !resp.status().is_success() {
        w.refused(resp.status());
        bail!("{path}: {}", resp.status());
    }
    let mut stream = Stream::new(resp.into_body(), w.spec.protobuf);
    let mut ended = Ended::default();
    let mut initial: Option<State> = fresh.then(BTreeMap::new);
    while let Some(event) = stream.next().await? {
        if let Some(rv) = event.rv.clone().filter(|rv| !rv.is_empty()) {
            ended.last_rv = Some(rv);
        }
        match event.kind.as_str() {
            "BOOKMARK" => {
                if event.initial_end {
                    ended.initial_end = true;
                    if let Some(state) = initial.take().filter(|_| w.keeps) {
                        w.replace(state, changes);
                    }
                    w.reached_sync(tally, since);
                }
            }
            "ERROR" => {
                ended.expired = true;
                return Ok(ended);
            }
            kind => {
                tally.events.fetch_add(1, Ordering::Relaxed);
                let rv = event.rv.unwrap_or_default();
                match initial.as_mut().filter(|_| w.keeps) {
                    Some(state) if kind == "DELETED" => {
                        state.remove(&event.key);
                    }
                    Some(state) => {
                        state.insert(event.key, (rv, event.object));
                    }
                    None => w.apply(kind, event.key, rv, event.object, changes),
                }
            }
        }
    }
    Ok(ended)
}

/// LIST at `resourceVersion=0&limit=500`, following continue tokens (then without an RV, as
/// client-go's pager does); replaces the store; the list's RV.
async fn list(
    target: &Target,
    w: &Watched,
    tally: &Tally,
    since: Instant,
    changes: &Handler,
) -> anyhow::Result<String> {
    let headers = [("Accept", w.spec.accept()), ("User-Agent", w.spec.user_agent)];
    let mut path = w.spec.path(&[("limit", PAGE), ("resourceVersion", "0")]);
    let mut state = State::new();
    for _ in 0..MAX_PAGES {
        tally.lists.fetch_add(1, Ordering::Relaxed);
        let (status, body) = target.fetch(Method::GET, &path, &headers, None).await?;
        if !status.is_success() {
            w.refused(status);
            bail!("{path}: {status}");
        }
        let page = match w.spec.protobuf {
            true => read_protobuf_page(&body, w.keeps.then_some(&mut state)),
            false => read_json_page(&body, w.keeps.then_some(&mut state)),
        };
        let page = page.with_context(|| format!("{path}: not a list"))?;
        tally.events.fetch_add(page.items, Ordering::Relaxed);
        match page.continue_token {
            Some(token) => path = w.spec.path(&[("continue", &token), ("limit", PAGE)]),
            None => {
                if w.keeps {
                    w.replace(state, changes);
                }
                w.reached_sync(tally, since);
                return Ok(page.resource_version);
            }
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

/// A JSON list page (or Table): its metadata, and its items into `state` when given.
fn read_json_page(body: &[u8], state: Option<&mut State>) -> anyhow::Result<ListMeta> {
    #[derive(Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        namespace: String,
        #[serde(default)]
        name: String,
        #[serde(default, rename = "resourceVersion")]
        resource_version: String,
        #[serde(default, rename = "continue")]
        continue_token: String,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(Deserialize)]
    struct List<'a> {
        #[serde(default)]
        metadata: Meta,
        // A list's `items`, a Table's `rows`.
        #[serde(default, borrow)]
        items: Vec<&'a RawValue>,
        #[serde(default)]
        rows: Vec<serde::de::IgnoredAny>,
    }
    let list: List = serde_json::from_slice(body)?;
    let items = (list.items.len() + list.rows.len()) as u64;
    if let Some(state) = state {
        for item in list.items {
            let meta = serde_json::from_str::<Item>(item.get())?.metadata;
            let key = format!("{}/{}", meta.namespace, meta.name);
            let object = Bytes::copy_from_slice(item.get().as_bytes());
            state.insert(key, (meta.resource_version, object));
        }
    }
    let continue_token = Some(list.metadata.continue_token).filter(|t| !t.is_empty());
    Ok(ListMeta { resource_version: list.metadata.resource_version, continue_token, items })
}

/// A protobuf list page: its metadata, and its items into `state` when given, each kept as a
/// watch event's object is (its `runtime.Unknown` envelope, the item's kind being the list's
/// without `List`).
fn read_protobuf_page(body: &[u8], state: Option<&mut State>) -> anyhow::Result<ListMeta> {
    let list = proto::decode_list(body)?;
    if let Some(state) = state {
        let kind = list.kind.strip_suffix("List").unwrap_or(list.kind);
        for item in &list.items {
            let meta = proto::object_meta(item)?;
            let key = format!("{}/{}", meta.namespace, meta.name);
            let object = proto::encode_unknown(list.api_version, kind, item);
            state.insert(key, (meta.resource_version.into_owned(), Bytes::from(object)));
        }
    }
    let token = list.meta.continue_token.to_string();
    Ok(ListMeta {
        resource_version: list.meta.resource_version.to_string(),
        continue_token: Some(token).filter(|t| !t.is_empty()),
        items: list.items.len() as u64,
    })
}

/// GETs a JSON list (or Table) and reads its metadata: kubectl's chunked `get`.
pub async fn get_list(
    target: &Target,
    path: &str,
    accept: &str,
    user_agent: &str,
) -> anyhow::Result<ListMeta> {
    let headers = [("Accept", accept), ("User-Agent", user_agent)];
    let (status, body) = target.fetch(Method::GET, path, &headers, None).await?;
    if !status.is_success() {
        bail!("{path}: {status}");
    }
    read_json_page(&body, None).with_context(|| format!("{path}: not a list"))
}

#[cfg(test)]
mod tests;
