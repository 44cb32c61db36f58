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

/// How long before a watch's deadline its last bookmark is sent.
const FINAL_BOOKMARK_LEAD: Duration = Duration::from_millis(500);

pub async fn watch(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    labels: &RequestLabels,
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
    // Where the stream starts (DESIGN.md "watch"): unset / "0" → the current state as ADDED,
    // N → changes after N; sendInitialEvents=true → the state then an initial-events-end
    // bookmark; sendInitialEvents=false → changes from now (or after N).
    let initial_end_bookmark;
    let from = match (opts.send_initial_events, rv) {
        (Some(true), rv) => {
            if let Some(n) = rv.filter(|n| *n > 0) {
                wait_not_older_than(state, n).await?;
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
    let (tx, resp) = respond::stream(content_type);
    let guard = state.metrics.longrunning(labels);
    let deadline = Instant::now() + watch_timeout(state, opts);
    let mut stream = WatchStream {
        kind: kind.clone(),
        filter,
        repr,
        opts: opts.clone(),
        tx,
        first: true,
        bookmarks: opts.allow_watch_bookmarks,
        last_rv: from.unwrap_or(0),
    };
    match state.store.watch(&kind, from) {
        Err(oldest) => {
            // The apiserver answers 200 and sends a single ERROR event (from the watch cache).
            let requested = from.unwrap_or(0);
            let status =
                Status::expired(format!("too old resource version: {requested} ({oldest})"));
            tokio::spawn(async move {
                let _guard = guard;
                let _ = stream.tx.send(Bytes::from(encode::error_event(&status, repr))).await;
            });
        }
        Ok((start, rx)) => {
            let interval = state.config.bookmark_interval;
            tokio::spawn(async move {
                let _guard = guard;
                stream.run(start, rx, deadline, interval, initial_end_bookmark).await;
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

struct WatchStream {
    kind: Arc<super::kinds::Kind>,
    filter: Filter,
    repr: Repr,
    opts: ListOptions,
    tx: mpsc::Sender<Bytes>,
    first: bool,
    bookmarks: bool,
    /// The newest RV the client has been told about (events or bookmarks).
    last_rv: u64,
}

impl WatchStream {
    async fn run(
        &mut self,
        start: WatchStart,
        mut rx: broadcast::Receiver<Live>,
        deadline: Instant,
        bookmark_interval: Duration,
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
        let mut next_bookmark = Instant::now() + bookmark_interval;
        let final_at = deadline.checked_sub(FINAL_BOOKMARK_LEAD).unwrap_or(deadline);
        let mut final_sent = false;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Ok(Live::Event(e)) => {
                        if e.rv > self.last_rv && !self.send_event(&e).await {
                            return;
                        }
                    }
                    Ok(Live::Progress(rv)) => {
                        if self.bookmarks && Instant::now() >= next_bookmark && rv >= self.last_rv {
                            next_bookmark = Instant::now() + bookmark_interval;
                            if !self.send_bookmark(rv, false).await {
                                return;
                            }
                        }
                    }
                    // Fell too far behind, or the watch was dropped (fault injection): end the
                    // stream; the client resumes from its last RV.
                    Err(_) => return,
                },
                _ = tokio::time::sleep_until(final_at), if !final_sent => {
                    final_sent = true;
                    if self.bookmarks && self.last_rv > 0 && !self.send_bookmark(self.last_rv, false).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
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
            Ok(bytes) => self.tx.send(Bytes::from(bytes)).await.is_ok(),
            Err(status) => {
                let _ = self.tx.send(Bytes::from(encode::error_event(&status, self.repr))).await;
                false
            }
        }
    }

    async fn send_bookmark(&mut self, rv: u64, initial_events_end: bool) -> bool {
        self.last_rv = self.last_rv.max(rv);
        let bytes = encode::bookmark(&self.kind, rv, self.repr, initial_events_end);
        self.tx.send(Bytes::from(bytes)).await.is_ok()
    }
}
