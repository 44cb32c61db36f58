//! The one list+watch toward the upstream that fills a cache (and, through `live::mirror`, its
//! twin in the other encoding). It yields what it learns as [`Feed`] events (loads, their
//! states, changes, bookmarks) to the sink it is given; the live layer applies them to the
//! cache (`live::feed`). It never reads the cache: where it is (the newest RV seen, whether an
//! object was skipped) is its own state. The formats it reads are `wire::list_watch`'s.
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
//!
//! - this file: the states, the loop ([`Reflector::run`]) with its backoff, and the reflector's
//!   own record of where it is (a load started, an object skipped, the first reader's state);
//! - [`requests`]: the requests it makes — a paged list, a streaming list, a watch — and the
//!   GET they all are, whose refusals are [`ReflectError`]s ([`error`]);
//! - [`stream`]: reading one watch stream, the reloads and the moves back to a returned
//!   upstream ([`move_back`]) taken between its frames; [`event`]: what one event yields;
//! - [`first_load`]: how a cache's first load is requested ([`FirstLoad`]); [`fed`]: a first
//!   load taken from the answer to the read that started the cache; [`resume`]: a first state
//!   taken from disk after a restart, watched on from its RV.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::feed::Feed;
use super::metrics::CallCounters;
use crate::cache::CachedObject;
use crate::upstream::Upstream;
use crate::wire::list_watch::ListPage;
use crate::wire::resource::{Encoding, ResourceInfo};
pub use error::ReflectError;
use fed::FedBy;
pub use first_load::FirstLoad;

/// Items per page of the reflector's list (client-go's reflector uses 500 too).
pub const LIST_PAGE_SIZE: usize = 500;
/// Largest list page accepted (an apiserver page of 500 large objects stays far below this),
/// and the largest answer kept to feed a cold cache's first load ([`fed`]).
pub const MAX_LIST_PAGE_BYTES: usize = 1024 * 1024 * 1024;
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Server-side timeout asked for each watch; the reflector re-watches when it ends, so
/// intermediaries never see an idle connection for long.
const WATCH_TIMEOUT_SECONDS: u64 = 300;

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
    /// A state on disk to resume from, and its RV ([`resume`]).
    resume: Option<(u64, crate::live::disk::StandBy)>,
    /// The watch from that state's RV has not been answered yet (set only with `resume`).
    resuming: AtomicBool,
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
            resume: None,
            resuming: AtomicBool::new(false),
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
        if let Some(resumed) = self.resume_state() {
            state = resumed;
        }
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
                    Err(e) if self.resuming.load(Ordering::Acquire) => {
                        failures += 1;
                        self.resume_failed(&e, rv, failures)
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
    /// Every failure comes here: the cache is told its watch is lost until one is answered.
    fn wait_after(&self, e: &ReflectError, failures: u32, then: State) -> State {
        (self.feed)(Feed::WatchLost);
        if e.not_served() {
            // The cache is stopped by its owner; this loop is aborted at its next await.
            (self.feed)(Feed::NotServed);
        }
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
}

mod error;
mod event;
pub mod fed;
mod first_load;
mod move_back;
mod requests;
mod resume;
mod stream;
#[cfg(all(test, feature = "sim"))]
mod tests;
