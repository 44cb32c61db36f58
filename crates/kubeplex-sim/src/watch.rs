//! Watch, with the apiserver's rules: start points by resourceVersion, `sendInitialEvents`,
//! bookmarks, `timeoutSeconds`, and selector transitions on filtered watches.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use rand::Rng;
use tokio::sync::{broadcast, mpsc};
use tokio::time::{Instant, MissedTickBehavior};

use super::encode;
use super::filter::Filter;
use super::metrics::RequestLabels;
use super::object::with_resource_version;
use super::read::wait_not_older_than;
use super::repr::Repr;
use super::respond::{self, Body, JSON, PROTOBUF_WATCH};
use super::server::{SimState, Target};
use super::store::{Event, EventType, Live, Obj, WatchStart};
use crate::wire::request::ListOptions;
use crate::wire::status::Status;

/// How long before a watch's deadline its last bookmark is due (the cacher's
/// `nextBookmarkTime`: "right before the watcher timeout - for now we simply set it 2s before").
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);
/// The period of the cacher's bookmark dispatch ticker.
const BOOKMARK_TICK: Duration = Duration::from_secs(1);

pub async fn watch(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    labels: &RequestLabels,
    accepts_gzip: bool,
) -> Result<Response<Body>, Status> {
    let kind = t.kind.clone();
    if opts.send_initial_events.is_some() && !state.config.watch_list {
        return Err(Status::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::wire::status::FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            )],
        ));
    }
    let mut filter = Filter::new(&kind, opts, t.namespace.as_deref())?;
    if let Some(name) = &t.name {
        // A watch on a named object is a watch filtered by metadata.name.
        filter = filter.with_name(name);
    }
    let rv = opts.numeric_resource_version()?;
    // Where the stream starts (docs/design.md "watch"): unset / "0" → the current state as ADDED,
    // N → changes after N; sendInitialEvents=true → the state then an initial-events-end
    // bookmark; sendInitialEvents=false → changes from now (or after N).
    let initial_end_bookmark;
    let from = match (opts.send_initial_events, rv) {
        (Some(true), rv) => {
            if let Some(n) = rv.filter(|n| *n > 0) {
                wait_not_older_than(state, n).await?;
            }
            if rv.is_none() {
                // A consistent WatchList: the watch cache waits for etcd's progress first.
                state.store.publish_progress_of(&kind);
            }
            initial_end_bookmark = opts.allow_watch_bookmarks;
            None
        }
        (Some(false), None | Some(0)) => {
            initial_end_bookmark = false;
            Some(state.store.current_rv())
        }
        (_, Some(n)) if n > 0 => {
            initial_end_bookmark = false;
            Some(n)
        }
        _ => {
            initial_end_bookmark = false;
            None
        }
    };
    let content_type = if repr.is_protobuf() { PROTOBUF_WATCH } else { JSON };
    let compress = accepts_gzip
        && opts.send_initial_events == Some(true)
        && state.config.watch_list_compression;
    let (tx, mut resp) = respond::stream(content_type);
    if compress {
        let headers = resp.headers_mut();
        headers.insert(http::header::CONTENT_ENCODING, http::HeaderValue::from_static("gzip"));
        headers.append(http::header::VARY, http::HeaderValue::from_static("Accept-Encoding"));
    }
    let guard = state.metrics.longrunning(labels);
    let deadline = Instant::now() + watch_timeout(state, opts);
    let mut stream = WatchStream {
        kind: kind.clone(),
        filter,
        repr,
        opts: opts.clone(),
        tx,
        compress,
        first: true,
        bookmarks: opts.allow_watch_bookmarks,
        last_rv: from.unwrap_or(0),
        state: state.clone(),
        labels: labels.clone(),
        written: 0,
    };
    match state.store.watch(&kind, from) {
        Err(oldest) => {
            // The apiserver answers 200 and sends a single ERROR event (from the watch cache).
            let requested = from.unwrap_or(0);
            let status =
                Status::expired(format!("too old resource version: {requested} ({oldest})"));
            tokio::spawn(async move {
                let _guard = guard;
                stream.send(encode::error_event(&status, repr)).await;
            });
        }
        Ok((start, rx)) => {
            // Read after subscribing: earlier progress is in it, later progress in `rx`.
            let cache_rv = state.store.cache_rv(&kind);
            let schedule = BookmarkSchedule {
                interval: state.config.bookmark_interval,
                deadline,
                ticks_from: state.started,
            };
            tokio::spawn(async move {
                let _guard = guard;
                stream.run(start, rx, schedule, cache_rv, initial_end_bookmark).await;
            });
        }
    }
    Ok(resp)
}

/// The server-side timeout: the client's `timeoutSeconds`, else the apiserver's randomized
/// `[minRequestTimeout, 2*minRequestTimeout)` so watches do not all end at once.
fn watch_timeout(state: &SimState, opts: &ListOptions) -> Duration {
    match opts.timeout_seconds {
        Some(s) if s > 0 => Duration::from_secs(s as u64),
        _ => {
            let min = state.config.min_request_timeout;
            min + min.mul_f64(rand::rng().random_range(0.0..1.0))
        }
    }
}

/// When a watcher is due a bookmark, as the apiserver's cacher schedules them.
struct BookmarkSchedule {
    /// `bookmarkFrequency` (a minute in the apiserver).
    interval: Duration,
    /// The watch's deadline (`timeoutSeconds`).
    deadline: Instant,
    /// The origin of the 1 s dispatch ticker.
    ticks_from: Instant,
}

impl BookmarkSchedule {
    /// `cacheWatcher.nextBookmarkTime`: `now + interval`, or 2 s before the deadline if that is
    /// sooner; none if that is already past (so a watch of `timeoutSeconds=2` gets none).
    fn next_due(&self, now: Instant) -> Option<Instant> {
        let heartbeat = now + self.interval;
        let pre_timeout =
            self.deadline.checked_sub(PRE_TIMEOUT_BOOKMARK).unwrap_or(self.ticks_from);
        let due = heartbeat.min(pre_timeout);
        (due >= now).then_some(due)
    }

    /// The dispatch tick a bookmark due at `due` goes out on: watchers are bucketed by the
    /// second and popped by a 1 s ticker, so a bookmark comes up to a second after it is due
    /// (the real one measured: 1.4–1.6 s into a `timeoutSeconds=3` watch).
    fn dispatch_at(&self, due: Instant) -> Instant {
        let since = due.saturating_duration_since(self.ticks_from);
        let tick = BOOKMARK_TICK.as_nanos();
        let ticks = since.as_nanos().div_ceil(tick);
        let offset = Duration::from_nanos(u64::try_from(ticks * tick).unwrap_or(u64::MAX));
        self.ticks_from.checked_add(offset).unwrap_or(due)
    }
}

struct WatchStream {
    kind: Arc<super::kinds::Kind>,
    filter: Filter,
    repr: Repr,
    opts: ListOptions,
    tx: mpsc::Sender<Bytes>,
    /// Each event written as a gzip member of its own (`SimConfig::watch_list_compression`).
    compress: bool,
    first: bool,
    bookmarks: bool,
    /// The newest RV the client has been told about (events or bookmarks).
    last_rv: u64,
    /// For the watch's metrics: its events and, when it ends, the bytes it wrote.
    state: Arc<SimState>,
    labels: RequestLabels,
    written: u64,
}

/// A watch's response size is observed when it ends, as the apiserver observes a request's
/// when its handler returns.
impl Drop for WatchStream {
    fn drop(&mut self) {
        self.state.metrics.response_size(&self.labels, self.written);
    }
}

impl WatchStream {
    /// Writes one event (its line or frame) to the stream, counting it; false once the client
    /// is gone.
    async fn send(&mut self, event: Vec<u8>) -> bool {
        self.state.metrics.watch_event(&self.labels, event.len());
        // Each event is flushed as it is written: compressed, it is a gzip member of its own.
        let event = if self.compress { crate::wire::gzip::gzip(&event) } else { event };
        self.written += event.len() as u64;
        self.tx.send(Bytes::from(event)).await.is_ok()
    }

    async fn run(
        &mut self,
        start: WatchStart,
        mut rx: broadcast::Receiver<Live>,
        schedule: BookmarkSchedule,
        cache_rv: u64,
        initial_end_bookmark: bool,
    ) {
        match start {
            WatchStart::State { rv, items } => {
                let matching: Vec<Arc<Obj>> = items
                    .values()
                    .filter(|o| self.filter.matches(&self.kind, o))
                    .cloned()
                    .collect();
                for obj in &matching {
                    if !self.send_object("ADDED", obj).await {
                        return;
                    }
                }
                self.last_rv = rv;
                if initial_end_bookmark && !self.send_bookmark(rv, true).await {
                    return;
                }
            }
            WatchStart::Resume(events) => {
                for e in events {
                    if !self.send_event(&e).await {
                        return;
                    }
                }
            }
        }
        // The cacher's rules for bookmarks (`cacheWatcher.process`): only an RV newer than the
        // one the watch started from (after its initial events) is sent, so a watch started at
        // the current RV gets none until the resource's watch cache moves on. The RV is that of
        // the resource's watch cache, which moves with the resource's events and with etcd's
        // progress (periodic, or asked for by a consistent read) — never on demand.
        let started_at = self.last_rv;
        let mut cache_rv = cache_rv.max(started_at);
        let mut due = if self.bookmarks { schedule.next_due(Instant::now()) } else { None };
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let bookmark_at = due.map(|d| schedule.dispatch_at(d));
            tokio::select! {
                msg = rx.recv() => match msg {
                    Ok(Live::Event(e)) => {
                        cache_rv = cache_rv.max(e.rv);
                        if e.rv > self.last_rv && !self.send_event(&e).await {
                            return;
                        }
                    }
                    Ok(Live::Progress(rv)) => cache_rv = cache_rv.max(rv),
                    // Fell too far behind, or the watch was dropped (fault injection): end the
                    // stream; the client resumes from its last RV.
                    Err(_) => return,
                },
                _ = tokio::time::sleep_until(bookmark_at.unwrap_or(schedule.deadline)), if bookmark_at.is_some() => {
                    if cache_rv > started_at && !self.send_bookmark(cache_rv, false).await {
                        return;
                    }
                    due = schedule.next_due(Instant::now());
                }
                _ = tokio::time::sleep_until(schedule.deadline) => return,
                _ = tick.tick() => {
                    if self.tx.is_closed() {
                        return;
                    }
                }
            }
        }
    }

    /// Sends an event as this watcher sees it through its selectors: an object entering the
    /// selection is ADDED, one leaving it DELETED (its previous state with the event's RV, as
    /// the apiserver's watch cache sends it).
    async fn send_event(&mut self, e: &Event) -> bool {
        let now = self.filter.matches(&self.kind, &e.obj);
        let before = e.prev.as_ref().is_some_and(|p| self.filter.matches(&self.kind, p));
        let sent = match e.kind {
            EventType::Added if now => self.send_object("ADDED", &e.obj).await,
            EventType::Deleted if now => self.send_deleted(e).await,
            EventType::Modified => match (before, now) {
                (true, true) => self.send_object("MODIFIED", &e.obj).await,
                (false, true) => self.send_object("ADDED", &e.obj).await,
                (true, false) => match &e.prev {
                    Some(prev) => match with_resource_version(&self.kind, prev, e.rv) {
                        Ok(o) => self.send_object("DELETED", &o).await,
                        Err(_) => false,
                    },
                    None => true,
                },
                (false, false) => true,
            },
            _ => true,
        };
        self.last_rv = self.last_rv.max(e.rv);
        sent
    }

    /// DELETED carries the object's last state with the deletion's RV.
    async fn send_deleted(&mut self, e: &Event) -> bool {
        match with_resource_version(&self.kind, &e.obj, e.rv) {
            Ok(o) => self.send_object("DELETED", &o).await,
            Err(_) => false,
        }
    }

    async fn send_object(&mut self, event_type: &str, obj: &Obj) -> bool {
        let first = std::mem::replace(&mut self.first, false);
        match encode::watch_event(&self.kind, event_type, obj, self.repr, &self.opts, first) {
            Ok(bytes) => self.send(bytes).await,
            Err(status) => {
                self.send(encode::error_event(&status, self.repr)).await;
                false
            }
        }
    }

    async fn send_bookmark(&mut self, rv: u64, initial_events_end: bool) -> bool {
        self.last_rv = self.last_rv.max(rv);
        let bytes = encode::bookmark(&self.kind, rv, self.repr, initial_events_end);
        self.send(bytes).await
    }
}
