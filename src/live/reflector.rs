//! The one list+watch per (resource, encoding) toward the upstream that fills a cache. It yields
//! what it learns as [`Feed`] events (loads, their states, changes, bookmarks) to the sink it is
//! given; the live layer applies them to the cache (`live::feed`). It never reads the cache:
//! where it is (the newest RV seen, whether an object was skipped) is its own state. The formats
//! it reads are `wire::list_watch`'s.
//!
//! An explicit state machine (docs/style.md rule 3):
//!
//! - [`State::StreamList`] (the first state) → [`State::Watch`] once the upstream's streaming
//!   list (`sendInitialEvents`) has delivered the state and its initial-events-end bookmark —
//!   the state is yielded ([`Feed::Loaded`]), and the same stream goes on as a watch;
//!   → [`State::List`] for good if the upstream refuses streaming lists (older apiservers);
//!   → [`State::Wait`] on other errors.
//! - [`State::List`] → [`State::Watch`] after a complete paged list (its state yielded);
//!   → [`State::Wait`] on an error.
//! - [`State::Watch`] → `Watch` again from the newest RV seen (event or bookmark) when the
//!   stream ends — upstream timeouts and dropped connections are routine; → `List` when the
//!   upstream no longer has history from that RV (410 Gone, or an ERROR event with 410) — a
//!   load of a state not older than that RV, which an upstream serves from its cache;
//!   → `Wait` on other errors, to resume the same RV afterwards. (Relists use the streaming
//!   list again where the upstream has it.)
//! - [`State::Wait`] → its `then` state when the backoff, or the upstream's `Retry-After`,
//!   has elapsed.
//!
//! The loop never ends by itself; its owner (the live cache, `live::caches`) aborts it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rand::Rng;
use tokio::time::Instant;

use super::feed::Feed;
use super::metrics::CallCounters;
use crate::cache::resource::EventKind;
use crate::cache::CachedObject;
use crate::upstream::compressed;
use crate::upstream::Upstream;
use crate::wire::list_watch::{self, ListPage};
use crate::wire::proto::WatchFrameDecoder;
use crate::wire::resource::{Encoding, ResourceInfo};
pub use error::ReflectError;
use fed::FedBy;
pub use first_load::FirstLoad;
use move_back::{has_history, served_by, MOVE_GIVE_UP, MOVE_RETRY};

/// Items per page of the reflector's list (client-go's reflector uses 500 too).
pub const LIST_PAGE_SIZE: usize = 500;
/// Largest single watch frame accepted from the upstream (a protobuf frame is length-prefixed).
const MAX_WATCH_FRAME: usize = 64 * 1024 * 1024;
/// Largest list page accepted (an apiserver page of 500 large objects stays far below this),
/// and the largest answer kept to feed a cold cache's first load (`serve::feed_load`).
pub const MAX_LIST_PAGE_BYTES: usize = 1024 * 1024 * 1024;
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

/// How long a reload waits for more reads to ask for it (see `live::freshness::clock`).
const RELOAD_GATHER: Duration = Duration::from_millis(20);

/// How a watch stream ended, when it did not fail.
#[derive(Debug)]
enum Ended {
    /// The upstream closed it (its timeout); the newest RV seen.
    Closed(u64),
    /// A reload was asked for (`Reflector::reloaded_by`).
    Reload,
    /// It ran on a fallback upstream and an earlier one can be reached again: resumed there
    /// from the newest RV seen (`upstream::failover`).
    Moved(u64),
    /// The connection broke (a reset, an upstream gone) after the newest RV seen, once any
    /// streaming list's state was in: resumed from that RV after a backoff — a watch, not a
    /// relist.
    Broken(u64, ReflectError),
}

/// Reload requests, if the reflector takes them.
type Reloads = Option<tokio::sync::watch::Receiver<u64>>;

/// Resolves when a reload is asked for; never when none can be (no channel, or it closed).
async fn reload_requested(reloads: &mut Reloads) -> bool {
    if let Some(r) = reloads.as_mut() {
        if r.changed().await.is_ok() {
            return true;
        }
    }
    std::future::pending().await
}

/// The list+watch loop of one (resource, encoding); `F` receives what it learns.
pub struct Reflector<F> {
    upstream: Arc<Upstream>,
    info: Arc<ResourceInfo>,
    /// Where it lists and watches (the cluster-wide collection unless [`Reflector::within`]).
    collection: String,
    /// The scope's selectors, appended to every list's and watch's query (`&labelSelector=…`).
    selectors: String,
    encoding: Encoding,
    /// `resource/version (encoding)`, for logs.
    describe: String,
    calls: CallCounters,
    feed: F,
    /// Cleared when the upstream refuses `sendInitialEvents`.
    streaming: bool,
    /// How the first load is requested ([`Reflector::first_load`]).
    first: FirstLoad,
    /// Reload requests ([`Reflector::reloaded_by`]).
    reloads: Option<tokio::sync::watch::Receiver<u64>>,
    /// The answer to the read that started the cache, for its first load ([`fed`]).
    fed_by: Option<FedBy>,
    /// Its state, until the watch from it is answered ([`Reflector::apply_fed_state`]).
    fed_state: std::sync::Mutex<Option<(ListPage, fed::Fed)>>,
    /// A paged list was requested (the first load at any state is the first one only).
    listed: AtomicBool,
    /// The RV the next load must not be older than (0: none, a consistent load): set when the
    /// upstream no longer has the watch's history from there ([`Reflector::relist_after_gone`]).
    relist_from: AtomicU64,
    /// No object has been skipped since the last load began. A watch that ends after a skip
    /// relists, to become whole again.
    whole: AtomicBool,
}

impl<F: Fn(Feed) + Send + Sync> Reflector<F> {
    pub fn new(
        upstream: Arc<Upstream>,
        info: Arc<ResourceInfo>,
        encoding: Encoding,
        calls: CallCounters,
        feed: F,
    ) -> Self {
        let describe = format!("{}/{} ({})", info.label(), info.version, encoding.as_str());
        Reflector {
            upstream,
            collection: info.collection_path(),
            selectors: String::new(),
            info,
            encoding,
            describe,
            calls,
            feed,
            streaming: true,
            first: FirstLoad::Stream,
            reloads: None,
            fed_by: None,
            fed_state: std::sync::Mutex::new(None),
            whole: AtomicBool::new(true),
            listed: AtomicBool::new(false),
            relist_from: AtomicU64::new(0),
        }
    }

    /// Reloads (relists) whenever `requests` changes while it watches: a freshness proof for a
    /// small cache (`live::freshness`). A request made during a load is honoured after it.
    pub fn reloaded_by(mut self, requests: tokio::sync::watch::Receiver<u64>) -> Self {
        self.reloads = Some(requests);
        self
    }

    /// How the first load is requested: as the read that started the cache would ask
    /// ([`FirstLoad`]). Relists stream where the upstream can.
    pub fn first_load(mut self, first: FirstLoad) -> Self {
        self.first = first;
        self
    }

    /// Takes the first load from the answer to the read that started the cache, when it comes
    /// whole ([`fed`]); else loads as [`Reflector::first_load`] says.
    pub fn fed_by(mut self, fed_by: FedBy) -> Self {
        self.fed_by = Some(fed_by);
        self
    }

    /// Lists and watches `collection` (a cache's path, which may be one namespace's) instead,
    /// with `selectors` (a cache's scope: `&labelSelector=…&fieldSelector=…`, or empty).
    pub fn within(mut self, collection: String, selectors: String) -> Self {
        self.collection = collection;
        self.selectors = selectors;
        self
    }

    /// The state from the answer to the read that started the cache, applied now that the
    /// watch from it is answered ([`fed`]).
    fn apply_fed_state(&self) {
        let Some((page, fed)) = self.fed_state.lock().unwrap_or_else(|p| p.into_inner()).take()
        else {
            return;
        };
        self.load_started_at(fed.requested, fed.consistent);
        let mut objects = Vec::with_capacity(page.items.len());
        for item in page.items {
            match CachedObject::from_list_item(&self.info, self.encoding, item) {
                Ok(o) => objects.push(o),
                Err(e) => self.skipped(&e),
            }
        }
        let whole = self.whole.load(Ordering::Acquire);
        (self.feed)(Feed::Loaded { objects, rv: page.resource_version, whole });
    }

    /// Drops a first reader's state whose watch failed; whether there was one.
    fn fed_state_dropped(&self) -> bool {
        self.fed_state.lock().unwrap_or_else(|p| p.into_inner()).take().is_some()
    }

    /// A load is being requested now: its skips count against it.
    fn load_started(&self, consistent: bool) {
        self.load_started_at(std::time::Instant::now(), consistent);
    }

    /// [`Reflector::load_started`] for a load requested at `requested`.
    fn load_started_at(&self, requested: std::time::Instant, consistent: bool) {
        self.whole.store(true, Ordering::Release);
        (self.feed)(Feed::LoadStarted { requested, consistent });
    }

    /// An object could not be indexed: it is left out, and the cache is not whole until a
    /// load is (one object kubeplex cannot route must not wedge the reflector — re-watching
    /// would meet it again, forever — nor be silently missing from lists).
    fn skipped(&self, error: &dyn std::fmt::Display) {
        tracing::error!(resource = %self.describe, error = %error, "skipping an object the cache cannot index; serving by passthrough until a clean relist");
        self.whole.store(false, Ordering::Release);
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
        let mut state = match self.first {
            FirstLoad::Stream => State::StreamList,
            FirstLoad::Paged | FirstLoad::PagedAnyState | FirstLoad::Fed { .. } => State::List,
        };
        if let Some(fed_by) = self.fed_by.take() {
            if let Some((page, fed)) =
                fed::receive(fed_by, self.encoding, MAX_LIST_PAGE_BYTES).await
            {
                let rv = page.resource_version;
                self.calls.reader_list.inc();
                // The first load is done: the next is consistent.
                self.listed.store(true, Ordering::Release);
                *self.fed_state.lock().unwrap_or_else(|p| p.into_inner()) = Some((page, fed));
                state = State::Watch { rv };
            }
        }
        let mut failures: u32 = 0;
        let mut reloads = self.reloads.take();
        loop {
            if matches!(state, State::StreamList | State::List) {
                // A load about to be requested answers every reload asked for until now.
                if let Some(r) = reloads.as_mut() {
                    r.borrow_and_update();
                }
            }
            state = match state {
                State::StreamList => match self.stream_list(&mut reloads).await {
                    Ok(Ended::Closed(rv) | Ended::Moved(rv)) => {
                        failures = 0;
                        State::Watch { rv }
                    }
                    Ok(Ended::Broken(rv, e)) => {
                        failures += 1;
                        self.resume_after(&e, failures, rv)
                    }
                    Ok(Ended::Reload) => {
                        failures = 0;
                        self.reload()
                    }
                    // 4xx other than 410/429 and a refusal: the upstream does not do streaming
                    // lists.
                    Err(e @ ReflectError::Status { status, .. })
                        if (400..500).contains(&status) && !e.forbidden() =>
                    {
                        tracing::info!(resource = %self.describe, status, "no streaming lists upstream; using paged lists");
                        self.streaming = false;
                        State::List
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(resource = %self.describe, error = %e, "streaming list failed");
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
                        tracing::warn!(resource = %self.describe, error = %e, "list failed");
                        self.wait_after(&e, failures, State::List)
                    }
                },
                State::Watch { rv } => match self.watch(rv, &mut reloads).await {
                    Ok(Ended::Reload) => {
                        failures = 0;
                        self.reload()
                    }
                    // A cache that had to skip an object relists to become whole again.
                    Ok(_) if !self.whole.load(Ordering::Acquire) => self.relist(),
                    Ok(Ended::Closed(last) | Ended::Moved(last)) => {
                        failures = 0;
                        State::Watch { rv: last }
                    }
                    Ok(Ended::Broken(last, e)) => {
                        failures += 1;
                        self.resume_after(&e, failures, last)
                    }
                    // The first reader's state, its watch refused: the cache loads by itself.
                    Err(e) if self.fed_state_dropped() => {
                        tracing::info!(resource = %self.describe, error = %e, "no watch from the first reader's state; listing");
                        State::List
                    }
                    Err(ReflectError::Gone) => self.relist_after_gone(rv),
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(resource = %self.describe, error = %e, "watch failed");
                        self.wait_after(&e, failures, State::Watch { rv })
                    }
                },
                State::Wait { until, then } => {
                    tokio::time::sleep_until(until).await;
                    *then
                }
            };
        }
    }

    /// The upstream no longer has the watch's history after `rv` (410): a relist of a state not
    /// older than `rv` — all the cache needs to go on from, and what an upstream answers from
    /// its watch cache (a tier above kubeplex from its cache, with no freshness proof), as it
    /// does when a pool replica that restarted, or the one a node tier failed over to, has no
    /// history from there. If that load fails, the next is consistent.
    fn relist_after_gone(&self, rv: u64) -> State {
        self.calls.relists.inc();
        tracing::info!(resource = %self.describe, rv, "watch history expired; relisting");
        self.relist_from.store(rv, Ordering::Release);
        self.relist()
    }

    /// The RV a load must not be older than, as a relist after a 410 asks (taken: one load
    /// only); `None` for a consistent load.
    fn not_older_than(&self) -> Option<u64> {
        Some(self.relist_from.swap(0, Ordering::AcqRel)).filter(|rv| *rv > 0)
    }

    /// A reload was asked for (a freshness proof): a relist, after [`RELOAD_GATHER`], so that
    /// the reads that come together share it.
    fn reload(&self) -> State {
        tracing::debug!(resource = %self.describe, "reloading for a freshness proof");
        let now = Instant::now();
        State::Wait { until: now + RELOAD_GATHER, then: Box::new(self.relist()) }
    }

    /// A watch that broke after `rv` ([`Ended::Broken`]): watched again from there after the
    /// backoff — a watch, never a relist.
    fn resume_after(&self, e: &ReflectError, failures: u32, rv: u64) -> State {
        tracing::warn!(resource = %self.describe, error = %e, rv, "watch broke; resuming");
        self.wait_after(e, failures, State::Watch { rv })
    }

    /// Exponential backoff with full jitter, or the upstream's `Retry-After` when it gave one.
    fn wait_after(&self, e: &ReflectError, failures: u32, then: State) -> State {
        let errors = &self.calls.errors;
        match e {
            ReflectError::Transport(_) => errors.unreachable.inc(),
            ReflectError::Throttled { .. } => errors.throttled.inc(),
            ReflectError::Status { .. } => errors.status.inc(),
            ReflectError::Decode(_) => errors.decode.inc(),
            // Handled before a wait: a relist, counted in kubeplex_relists_total.
            ReflectError::Gone => {}
        }
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

    /// Reads one watch stream. While `initial` is `Some`, ADDED events are collected into it
    /// until the initial-events-end bookmark, which yields them as the state.
    ///
    /// A stream on a fallback upstream moves back to an earlier one once it returns
    /// ([`Reflector::try_move`]): a watch from the newest RV seen is opened there, and the
    /// stream goes on from it only if that upstream has history from that RV — a returned pool
    /// whose caches started after it would answer 410, and a relist would follow. The old
    /// stream is read on meanwhile, and the move tried again, for up to [`MOVE_GIVE_UP`]; then
    /// the watch resumes there whatever it answers.
    async fn stream(
        &self,
        path: &str,
        rv: u64,
        initial: &mut Initial,
        reloads: &mut Reloads,
    ) -> Result<Ended, ReflectError> {
        let mut started = Instant::now();
        let resp = self.get(path).await?;
        self.apply_fed_state();
        let mut served_by = served_by(&resp);
        let mut active = self.upstream.active();
        let mut body = compressed::Chunks::new(resp);
        // The moved-to stream's first bytes, read to see whether it has history.
        let mut pending: Option<Bytes> = None;
        let mut next_move = started;
        let mut moving_since: Option<Instant> = None;
        let mut last = rv;
        let mut events = 0usize;
        let mut lines = BytesMut::new();
        // Where the search for the next newline resumes: earlier bytes hold none.
        let mut scanned = 0;
        let mut frames = WatchFrameDecoder::new(MAX_WATCH_FRAME);
        // The upstream ends the watch at timeoutSeconds; a connection that silently stopped
        // carrying data (a dropped NAT flow) is given up a little after that.
        let silent_after =
            Duration::from_secs(WATCH_TIMEOUT_SECONDS + WATCH_DEADLINE_MARGIN_SECONDS);
        let mut deadline = started + silent_after;
        loop {
            let next = match pending.take() {
                Some(data) => Ok(Some(Ok(data))),
                // A reload or a move is taken only between frames and once a streaming list's
                // state is in: a load is never cut short.
                None if initial.is_none() => {
                    let back = async {
                        let _ = active.wait_for(|a| *a < served_by).await;
                        tokio::time::sleep_until(next_move).await;
                    };
                    tokio::select! {
                        next = tokio::time::timeout_at(deadline, body.next()) => next,
                        true = reload_requested(reloads) => return Ok(Ended::Reload),
                        () = back, if served_by > 0 => {
                            let since = *moving_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= MOVE_GIVE_UP {
                                tracing::info!(resource = %self.describe, rv = last, "resuming the watch on the returned upstream");
                                return Ok(Ended::Moved(last));
                            }
                            match self.try_move(last, served_by).await {
                                Some(moved) => {
                                    tracing::info!(resource = %self.describe, rv = last, "watch moved back to the returned upstream");
                                    (body, served_by, pending) = moved;
                                    moving_since = None;
                                    started = Instant::now();
                                    deadline = started + silent_after;
                                    events = 0;
                                    // A partial frame of the old stream is read again, whole,
                                    // from the new one (it resumes after `last`).
                                    lines.clear();
                                    scanned = 0;
                                    frames = WatchFrameDecoder::new(MAX_WATCH_FRAME);
                                }
                                None => next_move = Instant::now() + MOVE_RETRY,
                            }
                            continue;
                        }
                    }
                }
                None => tokio::time::timeout_at(deadline, body.next()).await,
            };
            let data = match next {
                Ok(Some(data)) => data,
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(resource = %self.describe, "watch silent past its deadline; reconnecting");
                    break;
                }
            };
            let data = match data {
                Ok(data) => data,
                Err(e) => {
                    let e = ReflectError::Transport(e.to_string());
                    return if initial.is_none() { Ok(Ended::Broken(last, e)) } else { Err(e) };
                }
            };
            match self.encoding {
                Encoding::Json => {
                    lines.extend_from_slice(&data);
                    while let Some(pos) = lines[scanned..].iter().position(|b| *b == b'\n') {
                        let line = lines.split_to(scanned + pos + 1);
                        scanned = 0;
                        if line.len() > 1 {
                            events += 1;
                            last = last.max(self.event(&line, initial)?);
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
                        last = last.max(self.event(&f, initial)?);
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
        Ok(Ended::Closed(last))
    }

    /// A watch from `rv` on the upstream now active, if it is earlier than `from` and has
    /// history from `rv` ([`has_history`]). Returns the stream, where it runs, and the bytes
    /// read of it.
    async fn try_move(
        &self,
        rv: u64,
        from: usize,
    ) -> Option<(compressed::Chunks, usize, Option<Bytes>)> {
        self.calls.watch.inc();
        let resp = self.get(&self.watch_path(rv)).await.ok()?;
        let at = served_by(&resp);
        if at >= from {
            return None;
        }
        let mut body = compressed::Chunks::new(resp);
        let read = has_history(&mut body, self.encoding, MAX_WATCH_FRAME).await?;
        Some((body, at, read))
    }

    /// Yields one event (a JSON line or a protobuf frame); returns the RV it moves to (0 for
    /// an initial event or a skipped object).
    fn event(&self, frame: &[u8], initial: &mut Initial) -> Result<u64, ReflectError> {
        let list_watch::WatchEvent { event_type, object } =
            list_watch::parse_watch_event(self.encoding, frame).map_err(ReflectError::Decode)?;
        let kind = match event_type.as_str() {
            "ADDED" => EventKind::Added,
            "MODIFIED" => EventKind::Modified,
            "DELETED" => EventKind::Deleted,
            "BOOKMARK" => {
                let rv = list_watch::object_resource_version(self.encoding, &object)
                    .map_err(ReflectError::Decode)?;
                match initial.take() {
                    Some(objects) if list_watch::is_initial_events_end(self.encoding, &object) => {
                        // Not whole if an initial event was skipped.
                        let whole = self.whole.load(Ordering::Acquire);
                        (self.feed)(Feed::Loaded { objects, rv, whole });
                    }
                    // Bookmarks before the end of the initial events only move the RV.
                    Some(objects) => *initial = Some(objects),
                    None => (self.feed)(Feed::Bookmark(rv)),
                }
                return Ok(rv);
            }
            "ERROR" => return Err(error_event_status(self.encoding, &object)),
            other => {
                return Err(ReflectError::Decode(format!("unknown watch event type {other:?}")))
            }
        };
        // A skipped object stops the cache from answering (everything passes through) at
        // once, until a relist loads it completely.
        let obj = match CachedObject::from_watch_object(&self.info, self.encoding, object) {
            Ok(o) => o,
            Err(e) => {
                self.skipped(&e);
                (self.feed)(Feed::Skipped);
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
            None => (self.feed)(Feed::Event(kind, obj)),
        }
        Ok(rv)
    }
}

/// The objects of a streaming list collected so far; `None` once its state is complete.
type Initial = Option<Vec<CachedObject>>;

/// The error an upstream ERROR event stands for: 410 means relist, anything else a retry.
fn error_event_status(encoding: Encoding, object: &[u8]) -> ReflectError {
    match list_watch::error_code(encoding, object) {
        Some(410) => ReflectError::Gone,
        Some(c) => ReflectError::Status {
            status: u16::try_from(c).unwrap_or(500),
            message: "ERROR watch event".into(),
        },
        None => ReflectError::Decode("ERROR watch event without a Status code".into()),
    }
}

mod error;
pub mod fed;
mod first_load;
mod move_back;
mod requests;
#[cfg(all(test, feature = "sim"))]
mod tests;
