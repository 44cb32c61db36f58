//! Watches answered from the cache, with kube-apiserver's rules (docs/design.md §2 "watch") — or
//! declined, and then passed through.
//!
//! Where a watch starts:
//! - `resourceVersion` unset or `"0"`: the cache's state as synthetic ADDED events, then its
//!   changes (the apiserver's watch cache serves both from its own state);
//! - `N`: the changes strictly after N, replayed from the event history; an `ERROR` event with
//!   410 Expired when N is older than the history;
//! - `sendInitialEvents=true`: the state (not older than N; for an unset RV *consistent*, so
//!   only once the cache is shown to have caught up with the upstream's current RV, else passed
//!   through), then — with `allowWatchBookmarks` — the BOOKMARK annotated
//!   `k8s.io/initial-events-end`, then changes; `sendInitialEvents=false`: changes from now, or
//!   after N.
//!
//! The stream ends at `timeoutSeconds`, or at a random time in `[min, 2*min)` of the server's
//! minimum request timeout; it carries a BOOKMARK every interval and one shortly before its end
//! to clients that allow them; kubeplex ends it early when the client falls behind (see
//! `cache::fanout`) or the cache loses track of the upstream. Either way the client resumes
//! from the last resourceVersion it saw.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use rand::Rng;
use tokio::time::{Instant, Sleep};

use super::fresh::{self, Unproven};
use super::prepare::{self, Read};
use super::read::CachedRead;
use crate::cache::fanout::{Closed, Filter, Next, Queue};
use crate::cache::frames::Encoder;
use crate::cache::resource::{Encoding, ResourceCache, WatchFrom};
use crate::cache::select::{self, Query};
use crate::cache::CachedObject;
use crate::live::caches::Live;
use crate::live::freshness::{ConsistentRead, Listing, Proven};
use crate::serve::body::{self, Body, BoxError};
use crate::serve::state::ProxyState;
use crate::wire::negotiate::{self, Endpoint};
use crate::wire::status::Status;

/// Bytes of frames handed to the connection at a time.
const CHUNK: usize = 64 * 1024;

/// A watch with bookmarks this short (`timeoutSeconds`) may be a freshness probe — another
/// tier's (kubeplex's own are 3 s), asking what the apiserver answers: its events, then before
/// the deadline a BOOKMARK at an RV at least the upstream's current one. So the cache proves
/// itself current meanwhile (`fresh::for_bookmark`: the shared current-RV list, then its own
/// watch, or a probe of its own upstream), and the final bookmark, due when the apiserver sends
/// its own, waits for that proof — until just before the deadline, when it goes out at the RV
/// the cache knows. Informers' watches (5 to 10 minutes) cost no proof.
const PROBE_LIKE: Duration = Duration::from_secs(10);
/// How long before a probe-like watch's deadline its final bookmark goes out when the cache
/// could not prove itself.
const PROBE_FINAL_MARGIN: Duration = Duration::from_millis(100);

/// What the cache would answer a watch with, worked out before anything is asked of the
/// upstream or of a cache: `None` where only the apiserver answers — then no review is asked.
pub struct Plan {
    arrived: std::time::Instant,
    encoding: Encoding,
    metadata: bool,
    table: Option<super::table::TableWatch>,
    filter: Filter,
}

impl Plan {
    /// The cache (by encoding) that would answer.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

/// The [`Plan`] of a watch, or `None` to have it passed through.
pub fn plan(read: &CachedRead<'_>, headers: &HeaderMap, query: Option<&str>) -> Option<Plan> {
    let (info, rp, opts) = (read.info, read.rp, read.opts);
    let arrived = std::time::Instant::now();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let endpoint = if info.is_builtin() { Endpoint::BuiltIn } else { Endpoint::CustomResource };
    let neg = negotiate::negotiate_watch(accept, endpoint).ok()?;
    let pretty = form_urlencoded::parse(query.unwrap_or("").as_bytes()).any(|(k, _)| k == "pretty");
    if pretty {
        return None;
    }
    // --- Tables (kubectl get -w): whole-object JSON frames, printed per watcher (table.rs).
    let table = super::table::watch(info, &neg, opts);
    let (encoding, metadata) = match table {
        Some(_) => (Encoding::Json, false),
        None => {
            let form = prepare::cache_form(info, &neg, Read::Watch)?;
            (form.cache, form.metadata)
        }
    };
    // --- end Tables
    let filter = prepare::watch_filter(info, encoding, rp, opts)?;
    Some(Plan { arrived, encoding, metadata, table, filter })
}

/// Answers a watch from the cache as `plan` says, once the client may read it (node mode's
/// gate, asked by `route`), or returns `None` to have it passed through: where it starts
/// ([`start`]), registered with the fan-out atomically with that start, its initial events
/// ([`initial_events`]), and the stream with its bookmarks and deadline ([`Timing`]).
pub async fn answer(
    state: &Arc<ProxyState>,
    read: &CachedRead<'_>,
    cache: &Arc<Live>,
    plan: Plan,
) -> Option<Response<Body>> {
    let Plan { arrived, encoding: _, metadata, table, filter } = plan;
    let start = match start(state, read, cache, &filter, arrived).await {
        Ok(start) => start,
        Err(instead) => return instead,
    };
    let encoder = cache.encoder();
    let reg = match cache.register_watch(start.from, filter.clone(), metadata) {
        Ok(reg) => reg,
        Err(too_old) => {
            // Like the apiserver: 200, then one ERROR event with the 410.
            let requested = start.rv.unwrap_or(0);
            let status = Status::expired(format!(
                "too old resource version: {requested} ({})",
                too_old.oldest
            ));
            return Some(stream_response(&encoder, body::full(encoder.error(&status))));
        }
    };
    let initial = match &reg.initial {
        Some(snap) => initial_events(snap, read, &filter),
        None => VecDeque::new(),
    };
    let config = cache.watch_config();
    let bookmarks = read.opts.allow_watch_bookmarks;
    let timing = Timing::of(read.opts.timeout_seconds, config.max_timeout, bookmarks);
    let proven = timing.probe_like.then(|| {
        // A WatchList started ahead of the cache by a metadata list: its bookmark is at that
        // list's RV once the same list (reused) shows it again; a probe would not move it.
        let listed = start
            .listing
            .filter(|_| matches!(start.from, WatchFrom::StateAhead { .. }))
            .map(|l| (l, filter.namespace.clone()));
        prove_for_bookmark(state, cache, arrived, timing.proof_cutoff, listed)
    });
    let body = WatchBody {
        queue: reg.queue.clone(),
        id: reg.id,
        encoder: encoder.clone(),
        metadata,
        initial,
        end_bookmark: start.end_bookmark.then_some(reg.position),
        bookmarks,
        bookmark_every: config.bookmark_interval,
        next_bookmark: Box::pin(tokio::time::sleep_until(timing.now + config.bookmark_interval)),
        final_bookmark: timing
            .final_bookmark
            .filter(|_| bookmarks)
            .map(|t| Box::pin(tokio::time::sleep_until(t))),
        proven,
        proof_cutoff: timing
            .probe_like
            .then(|| Box::pin(tokio::time::sleep_until(timing.proof_cutoff))),
        deadline: Box::pin(tokio::time::sleep_until(timing.deadline)),
        last_rv: reg.position,
        done: false,
        cache: cache.cache.clone(),
        table,
    };
    Some(stream_response(&encoder, body.boxed()))
}

/// Where a watch starts, by the resourceVersion rules (the module's doc).
struct Start {
    /// The resourceVersion asked for.
    rv: Option<u64>,
    from: WatchFrom,
    /// Whether its initial events end with the initial-events-end BOOKMARK (a WatchList).
    end_bookmark: bool,
    /// The metadata list a consistent or not-older-than start was proven by, if it was: its
    /// final bookmark is proven the same way.
    listing: Option<Listing>,
}

/// The watch's [`Start`] — proven fresh where its rule asks for the upstream's current state —
/// or what to answer instead: a status (`Some`: 429 when the upstream is overloaded, 504 past
/// a not-older-than RV it did not reach) or `None`, to pass it through.
async fn start(
    state: &ProxyState,
    read: &CachedRead<'_>,
    cache: &Live,
    filter: &Filter,
    arrived: std::time::Instant,
) -> Result<Start, Option<Response<Body>>> {
    let (info, opts) = (read.info, read.opts);
    let rv = match opts.resource_version.as_deref() {
        None | Some("") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| None)?),
    };
    let bookmarks = opts.allow_watch_bookmarks;
    let start = |from, end_bookmark, listing| Start { rv, from, end_bookmark, listing };
    Ok(match (opts.send_initial_events, rv) {
        // Consistent — a WatchList with resourceVersion unset, or a watch with it unset ("get
        // state and start at most recent"): the state once the cache is shown to be current,
        // else passed through. Only a WatchList ends its initial events with a bookmark.
        (Some(true) | None, None) => {
            let namespaced = info.namespaced;
            let read = ConsistentRead { namespaced, filter, limit: None, watch: true, arrived };
            let (proven, by) = fresh::consistent(state, cache, &read).await.map_err(unproven)?;
            start(state_at(proven), bookmarks && opts.send_initial_events == Some(true), by)
        }
        // Not older than `n`: past the cache's RV, proven by a metadata list where that costs
        // no more than the WatchList directly (at once), else by the cache's watch or a probe.
        (Some(true), Some(n)) => {
            match fresh::not_older_than_listed(state, cache, info.namespaced, filter, None, n).await
            {
                Some((proven, by)) => start(state_at(proven), bookmarks, Some(by)),
                None => {
                    if n > 0 {
                        if let Err(current) = fresh::not_older_than(state, cache, n).await {
                            let status = Status::too_large_resource_version(n, current);
                            return Err(Some(body::status(&status)));
                        }
                    }
                    start(WatchFrom::State, bookmarks, None)
                }
            }
        }
        (Some(false), None | Some(0)) => start(WatchFrom::Now, false, None),
        (Some(false), Some(n)) => start(WatchFrom::After(n), false, None),
        (None, Some(n)) if n > 0 => start(WatchFrom::After(n), false, None),
        (None, Some(_)) => start(WatchFrom::State, false, None),
    })
}

/// The objects of the state a watch starts with that it selects, in key order: sent as ADDED
/// events before any change.
fn initial_events(
    snap: &crate::cache::store::Snapshot,
    read: &CachedRead<'_>,
    filter: &Filter,
) -> VecDeque<Arc<CachedObject>> {
    let namespace = read.rp.namespace.as_deref();
    let query = Query {
        namespace: select::list_namespace(namespace, filter.field.as_ref(), false),
        namespaced: read.info.namespaced,
        label: filter.label.as_ref(),
        field: filter.field.as_ref(),
        ..Query::default()
    };
    select::select(snap, &query).items.into()
}

/// When a watch's stream ends, and when its last bookmark goes out.
struct Timing {
    now: Instant,
    /// `timeoutSeconds`, or a random time in `[max, 2*max)` of the server's minimum request
    /// timeout, as the apiserver draws it.
    deadline: Instant,
    /// The last bookmark comes a little before the end, so the client resumes from a fresh RV.
    final_bookmark: Option<Instant>,
    /// A watch short enough to be another tier's freshness probe ([`PROBE_LIKE`]): its final
    /// bookmark waits for a proof until `proof_cutoff`.
    probe_like: bool,
    proof_cutoff: Instant,
}

impl Timing {
    fn of(timeout_seconds: Option<i64>, max_timeout: Duration, bookmarks: bool) -> Timing {
        let timeout = match timeout_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()),
            _ => max_timeout.mul_f64(1.0 + rand::rng().random_range(0.0..1.0)),
        };
        let now = Instant::now();
        let deadline = now + timeout;
        let probe_like =
            bookmarks && timeout_seconds.is_some_and(|s| s > 0) && timeout <= PROBE_LIKE;
        Timing {
            now,
            deadline,
            final_bookmark: deadline.checked_sub(timeout.min(Duration::from_secs(8)) / 4),
            probe_like,
            proof_cutoff: deadline.checked_sub(PROBE_FINAL_MARGIN).unwrap_or(deadline),
        }
    }
}

/// A probe-like watch's proof that the cache is current (`fresh::for_bookmark`), made beside
/// its stream: whether it came by `cutoff`.
fn prove_for_bookmark(
    state: &Arc<ProxyState>,
    cache: &Arc<Live>,
    arrived: std::time::Instant,
    cutoff: Instant,
    listed: Option<(Listing, Option<String>)>,
) -> tokio::sync::oneshot::Receiver<bool> {
    let (done, proven) = tokio::sync::oneshot::channel();
    let (state, cache) = (state.clone(), cache.clone());
    tokio::spawn(async move {
        let listed = listed.as_ref().map(|(l, ns)| (*l, ns.as_deref()));
        let _ = done.send(fresh::for_bookmark(&state, &cache, arrived, cutoff, listed).await);
    });
    proven
}

/// Where a consistent watch starts: the state at the upstream's RV its proof showed (the
/// apiserver's state when the read arrived: later events are events, as they are there), or
/// the cache's state when it was loaded for the read.
fn state_at(proven: Proven) -> WatchFrom {
    match (proven.at, proven.cache_at) {
        (Some(rv), Some(cache_at)) => WatchFrom::StateAhead { rv, cache_at },
        (Some(rv), None) => WatchFrom::StateAt(rv),
        (None, _) => WatchFrom::State,
    }
}

fn stream_response(encoder: &Encoder, body: Body) -> Response<Body> {
    let mut resp = body::respond(200, encoder.content_type(), Vec::new());
    *resp.body_mut() = body;
    resp
}

/// A watch stream from the cache: the initial state (if any), then the queued events, with
/// bookmarks and the deadline in between. Dropping it (the client went away, or the stream
/// ended) unregisters the watcher.
struct WatchBody {
    cache: Arc<ResourceCache>,
    id: u64,
    queue: Arc<Queue>,
    encoder: Arc<Encoder>,
    metadata: bool,
    /// Objects of the initial state not sent yet, in key order.
    initial: VecDeque<Arc<CachedObject>>,
    /// The initial-events-end BOOKMARK still to send, at this RV.
    end_bookmark: Option<u64>,
    bookmarks: bool,
    bookmark_every: Duration,
    next_bookmark: Pin<Box<Sleep>>,
    final_bookmark: Option<Pin<Box<Sleep>>>,
    /// A probe-like watch's proof under way (see [`PROBE_LIKE`]): the final bookmark waits for
    /// it, until `proof_cutoff`.
    proven: Option<tokio::sync::oneshot::Receiver<bool>>,
    proof_cutoff: Option<Pin<Box<Sleep>>>,
    deadline: Pin<Box<Sleep>>,
    /// The newest RV the client has been sent (events or bookmarks), or started from.
    last_rv: u64,
    done: bool,
    /// A Table watch's printer (table.rs).
    table: Option<super::table::TableWatch>,
}

impl Drop for WatchBody {
    fn drop(&mut self) {
        self.cache.unregister_watch(self.id);
    }
}

impl WatchBody {
    fn data(
        &self,
        bytes: Bytes,
        received: Option<std::time::Instant>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.cache.observe_sent(bytes.len(), received);
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }

    /// The next chunk of the initial state's ADDED events.
    fn initial_chunk(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        while out.len() < CHUNK {
            let Some(object) = self.initial.pop_front() else { break };
            let frame = match self.table.as_mut() {
                Some(table) => table.initial(&object.body),
                None => self.encoder.event("ADDED", &object.body, self.metadata),
            };
            match frame {
                Ok(frame) => out.extend_from_slice(&frame),
                Err(error) => {
                    tracing::error!(%error, key = %object.key, "cannot encode a cached object; left out of a watch")
                }
            }
        }
        if self.initial.is_empty() {
            // The queue's buffer goes with its last object rather than live as long as the
            // watch: a pool's watch of every Node kept 16 KiB at 2,000 nodes (a heap profile
            // of a pool replica: 18 MiB for its 28,000 node watches).
            self.initial = VecDeque::new();
        }
        out.freeze()
    }
}

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.done = true;
            return Poll::Ready(None);
        }
        if !this.initial.is_empty() {
            let chunk = this.initial_chunk();
            return this.data(chunk, None);
        }
        if let Some(rv) = this.end_bookmark.take() {
            let frame = this.encoder.bookmark(rv, true, this.metadata);
            return this.data(frame, None);
        }
        // Read before looking at the queue: every event up to it is in the queue or sent.
        let dispatched = this.cache.dispatched_rv();
        match this.queue.take(CHUNK, cx.waker()) {
            Next::Closed(why) => {
                // The cache stopped (kubeplex shuts down) with every event up to `rv` sent: a
                // last BOOKMARK there lets the client resume from it — from the state this
                // kubeplex leaves on disk, which the next one resumes from (`live::disk`),
                // rather than from an older RV neither has history for (a relist).
                let stopped_at = match why {
                    Closed::Stopped if this.bookmarks && this.table.is_none() => {
                        this.queue.stopped_at().filter(|rv| *rv > this.last_rv)
                    }
                    _ => None,
                };
                if let Some(rv) = stopped_at {
                    this.last_rv = rv;
                    let frame = this.encoder.bookmark(rv, false, this.metadata);
                    return this.data(frame, None);
                }
                this.done = true;
                Poll::Ready(None)
            }
            Next::Frames(frames) => {
                let received = frames.first().map(|q| q.received);
                this.last_rv = frames.iter().map(|q| q.rv).fold(this.last_rv, u64::max);
                if let Some(table) = this.table.as_mut() {
                    let printed = table.frames(frames.iter().map(|q| q.frame.as_ref()));
                    return this.data(printed, received);
                }
                let bytes = match frames.as_slice() {
                    [one] => one.frame.clone(),
                    many => {
                        let mut out =
                            BytesMut::with_capacity(many.iter().map(|q| q.frame.len()).sum());
                        for q in many {
                            out.extend_from_slice(&q.frame);
                        }
                        out.freeze()
                    }
                };
                this.data(bytes, received)
            }
            Next::Empty => {
                if !this.bookmarks {
                    return Poll::Pending;
                }
                // A probe-like watch's proof: done (proven or not), or given up on at the cutoff.
                let proof_over = this
                    .proven
                    .as_mut()
                    .is_some_and(|p| Pin::new(p).poll(cx).is_ready())
                    || this.proof_cutoff.as_mut().is_some_and(|s| s.as_mut().poll(cx).is_ready());
                if proof_over {
                    this.proven = None;
                    this.proof_cutoff = None;
                }
                let final_due = this.proven.is_none()
                    && this.final_bookmark.as_mut().is_some_and(|s| s.as_mut().poll(cx).is_ready());
                if final_due {
                    this.final_bookmark = None;
                }
                let periodic_due = this.next_bookmark.as_mut().poll(cx).is_ready();
                if periodic_due {
                    let next = Instant::now() + this.bookmark_every;
                    this.next_bookmark.as_mut().reset(next);
                    // Registers the waker for the next one.
                    let _ = this.next_bookmark.as_mut().poll(cx);
                }
                let rv = this.last_rv.max(dispatched);
                if (final_due || periodic_due) && rv > 0 {
                    this.last_rv = rv;
                    let frame = this.encoder.bookmark(rv, false, this.metadata);
                    return this.data(frame, None);
                }
                Poll::Pending
            }
        }
    }
}

/// A consistent watch whose freshness proof did not come: passed through (`None`) — but when
/// the upstream is overloaded (it answered the proof 429, 503 or 504, or not within the whole
/// budget, `consistentReadWait`), the watch is answered 429 with `Retry-After`, as the
/// apiserver's priority and fairness answers a request beyond its share, rather than passed on
/// to hold the overloaded apiserver for minutes (1,000 node tiers starting at once behind a
/// pool: ~6,000 of their kubelets' named watches whose proofs failed so went to it).
fn unproven(why: Unproven) -> Option<Response<Body>> {
    match why {
        Unproven::Overloaded => Some(body::too_many_requests()),
        Unproven::Other => None,
    }
}
