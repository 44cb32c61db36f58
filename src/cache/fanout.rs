//! Fan-out: every downstream watch of one cache, fed from its one upstream watch.
//!
//! Each event is encoded once per way it can be seen (ADDED / MODIFIED / DELETED / left the
//! selection × whole object / metadata only) and the same bytes are queued to every watcher that
//! sees it that way. A watcher's queue is bounded: one that falls behind — more frames waiting
//! than its budget, or a frame waiting longer than allowed — is ended (the client resumes from
//! its last resourceVersion) and never slows the others.
//!
//! Watchers whose field selector pins `metadata.name`, `spec.nodeName` (pods), or whose request
//! names a namespace are indexed by that value, so an event is only offered to the watchers its
//! object (or its previous state) could match: a kubelet's `spec.nodeName=<node>` watch costs
//! nothing when other nodes' pods change.
//!
//! Pure data under the cache's fan-out lock; the queues have their own small locks so response
//! bodies can drain them concurrently.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::frames::Encoder;
use super::history::{Event, History, Seen};
use super::object::CachedObject;
use crate::wire::selector::{FieldSelector, LabelSelector};

/// Tunables of the watch fan-out (see `config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// Events kept for resuming watches, at most.
    pub history_events: usize,
    /// Bytes kept for resuming watches, at most (objects and their encoded frames).
    pub history_bytes: usize,
    /// How long events are kept for resuming watches (beyond the newest 100).
    pub history_window: Duration,
    /// Frames a watcher may have waiting before it is ended as too slow.
    pub queue_frames: usize,
    /// How long a frame may wait for a watcher before it is ended as too slow.
    pub slow_after: Duration,
    /// Period of BOOKMARK events to watchers that allow them (the apiserver: one minute).
    pub bookmark_interval: Duration,
    /// Server-side watch timeout when the client gives none: a random duration in
    /// `[max_timeout, 2 * max_timeout)`, as the apiserver spreads `--min-request-timeout`.
    pub max_timeout: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            history_events: super::history::DEFAULT_MAX_EVENTS,
            history_bytes: super::history::DEFAULT_MAX_BYTES,
            history_window: super::history::DEFAULT_WINDOW,
            queue_frames: 1000,
            slow_after: Duration::from_secs(30),
            bookmark_interval: Duration::from_secs(60),
            max_timeout: Duration::from_secs(1800),
        }
    }
}

/// Which objects a watch receives. The field selector is already converted by the resource's
/// rules and only names fields the cache holds (`select::cacheable_field_selector`).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub label: Option<LabelSelector>,
    pub field: Option<FieldSelector>,
}

/// Fields watchers are indexed by, most selective first.
const INDEXED: [&str; 3] = ["metadata.name", "spec.nodeName", "metadata.namespace"];

impl Filter {
    pub fn matches(&self, object: &CachedObject) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == object.namespace())
            && self.label.as_ref().is_none_or(|l| l.matches(object))
            && self
                .field
                .as_ref()
                .is_none_or(|f| f.requirements().iter().all(|r| r.matches(object.field(&r.field))))
    }

    /// The (field, value) this watch only ever sees objects with, if any.
    fn index_key(&self) -> Option<(&'static str, String)> {
        let pinned = |field: &str| self.field.as_ref()?.exact_value(field).map(str::to_owned);
        INDEXED.iter().find_map(|&f| {
            let value = match f {
                "metadata.namespace" => self.namespace.clone().or_else(|| pinned(f)),
                _ => pinned(f),
            };
            value.map(|v| (f, v))
        })
    }
}

fn indexed_value<'a>(object: &'a CachedObject, field: &str) -> Option<&'a str> {
    match field {
        "metadata.name" => Some(object.name()),
        "metadata.namespace" => Some(object.namespace()),
        // A pod without the field (not scheduled) reads as "", as a selector sees it.
        other => Some(object.field(other).unwrap_or("")),
    }
}

/// Why a watcher's stream was ended by kubeplex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// It fell behind its budget.
    Slow,
    /// The cache lost track of the upstream (an object it could not hold, or a relist it could
    /// not express as events): resuming clients are told 410 or passed through.
    Reset,
    /// The cache was stopped.
    Stopped,
}

impl Closed {
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::Slow => "slow",
            Closed::Reset => "reset",
            Closed::Stopped => "stopped",
        }
    }
}

/// A frame waiting for a watcher.
#[derive(Debug, Clone)]
pub struct Queued {
    pub frame: Bytes,
    pub rv: u64,
    /// When kubeplex received the event from the upstream.
    pub received: Instant,
    queued: Instant,
}

/// What a watcher's body finds in its queue.
#[derive(Debug)]
pub enum Next {
    Frames(Vec<Queued>),
    /// Nothing yet; the waker given is woken when something comes.
    Empty,
    Closed(Closed),
}

#[derive(Debug)]
struct QueueState {
    frames: VecDeque<Queued>,
    closed: Option<Closed>,
    /// Stopped ([`Queue::stop`]): every event up to this RV was queued.
    stopped_at: Option<u64>,
    waker: Option<Waker>,
    cap: usize,
}

/// One watcher's frames, between the dispatcher and its response body.
#[derive(Debug)]
pub struct Queue(Mutex<QueueState>);

impl Queue {
    fn new(cap: usize) -> Self {
        Queue(Mutex::new(QueueState {
            frames: VecDeque::new(),
            closed: None,
            stopped_at: None,
            waker: None,
            cap,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame; `false` when the queue is over its budget, which ends the watcher.
    fn push(&self, q: Queued) -> bool {
        let mut s = self.lock();
        if s.closed.is_some() {
            return true;
        }
        if s.frames.len() >= s.cap {
            drop(s);
            self.close(Closed::Slow);
            return false;
        }
        s.frames.push_back(q);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// Ends the stream: what is queued is dropped, the body ends when it next looks.
    pub fn close(&self, why: Closed) {
        let mut s = self.lock();
        if s.closed.is_none() {
            s.closed = Some(why);
        }
        s.frames = VecDeque::new();
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ends the stream because the cache stops (kubeplex shuts down): unlike [`Queue::close`],
    /// what is queued is still delivered, and the body may then tell its client that every
    /// event up to `rv` — the cache's last, all queued — was sent ([`Queue::stopped_at`]).
    pub fn stop(&self, rv: u64) {
        let mut s = self.lock();
        if s.closed.is_none() {
            s.closed = Some(Closed::Stopped);
            s.stopped_at = Some(rv);
        }
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The RV every event up to which was queued before the queue was stopped.
    pub fn stopped_at(&self) -> Option<u64> {
        self.lock().stopped_at
    }

    /// Takes queued frames, up to about `max_bytes` (at least one); once closed, what a stop
    /// left queued first.
    pub fn take(&self, max_bytes: usize, waker: &Waker) -> Next {
        let mut s = self.lock();
        if let Some(why) = s.closed.filter(|_| s.frames.is_empty()) {
            return Next::Closed(why);
        }
        if s.frames.is_empty() {
            if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                s.waker = Some(waker.clone());
            }
            return Next::Empty;
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        while let Some(q) = s.frames.front() {
            if !out.is_empty() && bytes + q.frame.len() > max_bytes {
                break;
            }
            bytes += q.frame.len();
            out.extend(s.frames.pop_front());
        }
        // An idle watcher should cost little: give back a queue grown by a burst.
        if s.frames.is_empty() && s.frames.capacity() > 64 {
            s.frames = VecDeque::new();
        }
        Next::Frames(out)
    }

    /// How long the oldest waiting frame has waited.
    fn waiting(&self, now: Instant) -> Duration {
        self.lock()
            .frames
            .front()
            .map_or(Duration::ZERO, |q| now.saturating_duration_since(q.queued))
    }
}

struct Entry {
    queue: Arc<Queue>,
    filter: Filter,
    metadata: bool,
    /// Events at or below this RV were already covered by the watch's start.
    after: u64,
    index: Option<(&'static str, String)>,
}

/// What one dispatch did, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dispatched {
    pub frames: u64,
    pub slow: u64,
}

/// The history and the watchers of one cache.
pub struct FanOut {
    pub history: History,
    encoder: Arc<Encoder>,
    watchers: HashMap<u64, Entry>,
    unindexed: Vec<u64>,
    /// Watcher ids by indexed field, then by the value their selection pins.
    indexed: HashMap<&'static str, HashMap<String, Vec<u64>>>,
    next_id: u64,
}

impl FanOut {
    pub fn new(encoder: Arc<Encoder>, config: &WatchConfig) -> Self {
        FanOut {
            history: History::new(config.history_events, config.history_bytes)
                .with_window(config.history_window),
            encoder,
            watchers: HashMap::new(),
            unindexed: Vec::new(),
            indexed: HashMap::new(),
            next_id: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.watchers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }

    /// Adds a watcher that sees events after `after`, with the history's events after
    /// `replay_from` (if given) queued first. Returns its id and queue.
    pub fn add(
        &mut self,
        filter: Filter,
        metadata: bool,
        after: u64,
        replay_from: Option<usize>,
        queue_frames: usize,
    ) -> (u64, Arc<Queue>) {
        let mut replay = Vec::new();
        if let Some(first) = replay_from {
            let mut grew = 0;
            let mut index = first;
            while let Some(event) = self.history.event_mut(index) {
                index += 1;
                let Some(seen) = event.seen_by(|o| filter.matches(o)) else { continue };
                let (frame, added) = event_frame(&self.encoder, event, seen, metadata);
                grew += added;
                if let Some(frame) = frame {
                    let now = Instant::now();
                    replay.push(Queued {
                        frame,
                        rv: event.rv,
                        received: event.received,
                        queued: now,
                    });
                }
            }
            self.history.grew(grew);
        }
        let queue = Arc::new(Queue::new(queue_frames + replay.len()));
        queue.lock().frames.extend(replay);
        let id = self.next_id;
        self.next_id += 1;
        let index = filter.index_key();
        match &index {
            Some((field, value)) => {
                self.indexed.entry(field).or_default().entry(value.clone()).or_default().push(id)
            }
            None => self.unindexed.push(id),
        }
        self.watchers.insert(id, Entry { queue: queue.clone(), filter, metadata, after, index });
        (id, queue)
    }

    pub fn remove(&mut self, id: u64) {
        let Some(entry) = self.watchers.remove(&id) else { return };
        let list = match &entry.index {
            Some((field, value)) => {
                match self.indexed.get_mut(field).and_then(|by_value| by_value.get_mut(value)) {
                    Some(list) => list,
                    None => return,
                }
            }
            None => &mut self.unindexed,
        };
        if let Some(pos) = list.iter().position(|&w| w == id) {
            list.swap_remove(pos);
        }
        if let Some((field, value)) = entry.index {
            if let Some(by_value) = self.indexed.get_mut(field) {
                if by_value.get(&value).is_some_and(Vec::is_empty) {
                    by_value.remove(&value);
                }
                if by_value.is_empty() {
                    self.indexed.remove(field);
                }
            }
        }
    }

    /// Appends an event to the history and queues it to every watcher that sees it.
    pub fn publish(&mut self, event: Event) -> Dispatched {
        self.history.push(event);
        let FanOut { history, encoder, watchers, unindexed, indexed, .. } = self;
        let Some(event) = history.last_mut() else { return Dispatched::default() };
        // Watchers indexed by a value the object has now or had before (a pod being scheduled
        // enters its node's watches).
        let mut pinned: Vec<u64> = Vec::new();
        for (field, by_value) in indexed.iter() {
            let now = indexed_value(&event.object, field);
            let before = event.previous.as_deref().and_then(|p| indexed_value(p, field));
            for value in [now, before.filter(|b| Some(*b) != now)].into_iter().flatten() {
                if let Some(ids) = by_value.get(value) {
                    pinned.extend_from_slice(ids);
                }
            }
        }
        let mut done = Dispatched::default();
        let mut grew = 0;
        let mut slow = Vec::new();
        let queued = Instant::now();
        for id in unindexed.iter().chain(pinned.iter()) {
            let Some(entry) = watchers.get(id) else { continue };
            if event.rv <= entry.after {
                continue;
            }
            let Some(seen) = event.seen_by(|o| entry.filter.matches(o)) else { continue };
            let (frame, added) = event_frame(encoder, event, seen, entry.metadata);
            grew += added;
            let Some(frame) = frame else { continue };
            let q = Queued { frame, rv: event.rv, received: event.received, queued };
            if entry.queue.push(q) {
                done.frames += 1;
            } else {
                done.slow += 1;
                slow.push(*id);
            }
        }
        history.grew(grew);
        // An ended watcher is dispatched nothing more; its body finds the queue closed.
        for id in slow {
            self.remove(id);
        }
        done
    }

    /// Ends the watchers whose oldest frame has waited longer than `slow_after`; returns how
    /// many.
    pub fn end_slow(&mut self, now: Instant, slow_after: Duration) -> u64 {
        self.close_where(Closed::Slow, |e| e.queue.waiting(now) > slow_after)
    }

    /// Ends the watchers `which` picks, telling them `why`; returns how many.
    fn close_where(&mut self, why: Closed, which: impl Fn(&Entry) -> bool) -> u64 {
        let ids: Vec<u64> =
            self.watchers.iter().filter(|(_, e)| which(e)).map(|(id, _)| *id).collect();
        for id in &ids {
            if let Some(e) = self.watchers.get(id) {
                e.queue.close(why);
            }
            self.remove(*id);
        }
        ids.len() as u64
    }

    /// Ends every watcher's stream.
    pub fn close_all(&mut self, why: Closed) {
        for entry in self.watchers.values() {
            entry.queue.close(why);
        }
        self.clear();
    }

    /// Ends the watchers whose start lies in `[lo, hi)` (inside a relist's gap:
    /// `ResourceCache::replace`); returns how many.
    pub fn close_starting_within(&mut self, lo: u64, hi: u64, why: Closed) -> u64 {
        self.close_where(why, |e| (lo..hi).contains(&e.after))
    }

    /// Ends every watcher because the cache stops, each after what is queued for it, with
    /// every event up to `rv` queued ([`Queue::stop`]).
    pub fn stop_all(&mut self, rv: u64) {
        for entry in self.watchers.values() {
            entry.queue.stop(rv);
        }
        self.clear();
    }

    fn clear(&mut self) {
        self.watchers.clear();
        self.unindexed.clear();
        self.indexed.clear();
    }
}

/// The frame for one way of seeing an event, encoded once and kept with the event.
fn event_frame(
    encoder: &Encoder,
    event: &mut Event,
    seen: Seen,
    metadata: bool,
) -> (Option<Bytes>, usize) {
    event.frame(seen, metadata, |e| {
        let result = match (seen, &e.previous) {
            // The previous state, at the event's resourceVersion (`updateResourceVersion`).
            (Seen::Left, Some(prev)) => encoder
                .with_resource_version(&prev.body, e.rv)
                .and_then(|body| encoder.event(seen.event_type(), &body, metadata)),
            _ => encoder.event(seen.event_type(), &e.object.body, metadata),
        };
        match result {
            Ok(frame) => Some(frame),
            Err(error) => {
                tracing::error!(%error, rv = e.rv, "cannot encode a watch event; not sent");
                None
            }
        }
    })
}

#[cfg(test)]
mod tests;
