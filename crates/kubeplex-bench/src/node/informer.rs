//! A node agent's informer: client-go's reflector as the agents run it (a WatchList, or a LIST
//! then a WATCH; resumed from the last RV; started over after 410 Expired), keeping what its
//! store would hold — each object's key and resourceVersion — so that its view can be compared
//! with the apiserver's at the end, and handing a handler the objects that come and go.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio::time::Instant;

use kubeplex_wire::proto;

use crate::informer::{Informer, Start, Stream, Tally, ACCEPT_JSON, ACCEPT_PROTOBUF, PAGE};
use crate::target::Target;

/// Bounds: requests per informer in one run, pages per list.
const MAX_REQUESTS: u64 = 10_000;
const MAX_PAGES: usize = 1_000;
/// client-go's reflector backs off after a failed list or watch (`reflector.go`:
/// `defaultBackoffInit` 800 ms, factor 2, jitter 1.0 — each wait drawn from [d, 2d) — capped at
/// 30 s, back to the start after 2 minutes without a failure).
const BACKOFF_INIT: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const BACKOFF_RESET: Duration = Duration::from_secs(120);

/// The reflector's back-off: the next wait, and the state it keeps.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    last_failure: Option<Instant>,
}

impl Backoff {
    fn new() -> Self {
        Backoff { next: BACKOFF_INIT, last_failure: None }
    }

    /// How long to wait after a failure now.
    fn wait(&mut self) -> Duration {
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

/// One informer and the state it keeps.
pub struct Watched {
    pub spec: Informer,
    /// What the informer's store holds: `namespace/name` → resourceVersion.
    pub objects: Mutex<BTreeMap<String, String>>,
    pub synced: AtomicBool,
    /// Requests refused with 403 (a Node authorizer that has not caught up yet, an RBAC gap).
    pub refused: AtomicU64,
}

impl Watched {
    pub fn new(spec: Informer) -> Arc<Watched> {
        Arc::new(Watched {
            spec,
            objects: Mutex::new(BTreeMap::new()),
            synced: AtomicBool::new(false),
            refused: AtomicU64::new(0),
        })
    }

    fn accept(&self) -> &'static str {
        if self.spec.protobuf {
            ACCEPT_PROTOBUF
        } else {
            ACCEPT_JSON
        }
    }

    /// Replaces the store with `state` (a relist), telling the handler what came and went.
    fn replace(&self, state: BTreeMap<String, (String, Bytes)>, changes: &Handler) {
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
}

type Handler = Option<mpsc::UnboundedSender<Change>>;

/// How one watch request ended.
#[derive(Default)]
struct Ended {
    last_rv: Option<String>,
    /// A WatchList's initial events were all read (or the watch was a resumed one).
    initial_end: bool,
    expired: bool,
}

/// Runs the informer until the caller drops it.
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
            Ok(_) => rv = None,
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
    let headers = [("Accept", w.accept()), ("User-Agent", w.spec.user_agent)];
    let resp = target.send(Method::GET, path, &headers, None).await?;
    if !resp.status().is_success() {
        if resp.status() == StatusCode::FORBIDDEN {
            w.refused.fetch_add(1, Ordering::Relaxed);
        }
        bail!("{path}: {}", resp.status());
    }
    let mut stream = Stream::new(resp.into_body(), w.spec.protobuf);
    let mut ended = Ended::default();
    let mut initial: Option<BTreeMap<String, (String, Bytes)>> = fresh.then(BTreeMap::new);
    while let Some(event) = stream.next().await? {
        if let Some(rv) = event.rv.clone().filter(|rv| !rv.is_empty()) {
            ended.last_rv = Some(rv);
        }
        match event.kind.as_str() {
            "BOOKMARK" => {
                if event.initial_end {
                    ended.initial_end = true;
                    if let Some(state) = initial.take() {
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
                match initial.as_mut() {
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

/// LIST at `resourceVersion=0&limit=500`, following continue tokens; replaces the store; the
/// list's RV.
async fn list(
    target: &Target,
    w: &Watched,
    tally: &Tally,
    since: Instant,
    changes: &Handler,
) -> anyhow::Result<String> {
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
    struct List {
        #[serde(default)]
        metadata: Meta,
        #[serde(default)]
        items: Vec<Box<RawValue>>,
    }
    let headers = [("Accept", w.accept()), ("User-Agent", w.spec.user_agent)];
    let mut path = w.spec.path(&[("limit", PAGE), ("resourceVersion", "0")]);
    let mut state = BTreeMap::new();
    for _ in 0..MAX_PAGES {
        tally.lists.fetch_add(1, Ordering::Relaxed);
        let (status, body) = target.fetch(Method::GET, &path, &headers, None).await?;
        if !status.is_success() {
            if status == StatusCode::FORBIDDEN {
                w.refused.fetch_add(1, Ordering::Relaxed);
            }
            bail!("{path}: {status}");
        }
        let (rv, token) = if w.spec.protobuf {
            let before = state.len();
            let page = read_protobuf_page(&body, &mut state)
                .with_context(|| format!("{path}: not a list"))?;
            tally.events.fetch_add(state.len().saturating_sub(before) as u64, Ordering::Relaxed);
            page
        } else {
            let list: List =
                serde_json::from_slice(&body).with_context(|| format!("{path}: not a list"))?;
            tally.events.fetch_add(list.items.len() as u64, Ordering::Relaxed);
            for item in list.items {
                let meta = serde_json::from_str::<Item>(item.get())?.metadata;
                let key = format!("{}/{}", meta.namespace, meta.name);
                state.insert(
                    key,
                    (meta.resource_version, Bytes::copy_from_slice(item.get().as_bytes())),
                );
            }
            (list.metadata.resource_version, list.metadata.continue_token)
        };
        if token.is_empty() {
            w.replace(state, changes);
            w.reached_sync(tally, since);
            return Ok(rv);
        }
        path = w.spec.path(&[("continue", &token), ("limit", PAGE)]);
    }
    bail!("more than {MAX_PAGES} pages")
}

/// A protobuf list page's items into `state`, each kept as a watch event's object is (its
/// `runtime.Unknown` envelope, the item's kind being the list's without `List`); the page's RV
/// and continue token.
fn read_protobuf_page(
    body: &[u8],
    state: &mut BTreeMap<String, (String, Bytes)>,
) -> anyhow::Result<(String, String)> {
    let list = proto::decode_list(body)?;
    let kind = list.kind.strip_suffix("List").unwrap_or(list.kind);
    for item in &list.items {
        let meta = proto::object_meta(item)?;
        let key = format!("{}/{}", meta.namespace, meta.name);
        let object = proto::encode_unknown(list.api_version, kind, item);
        state.insert(key, (meta.resource_version.into_owned(), Bytes::from(object)));
    }
    Ok((list.meta.resource_version.to_string(), list.meta.continue_token.to_string()))
}

#[cfg(test)]
mod tests;
