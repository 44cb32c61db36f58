//! The ring of recent watch events of one cache, for watches that resume from a resourceVersion
//! (`watch=1&resourceVersion=N`: every change strictly after N), as the apiserver's watch cache
//! keeps its `cache` ring of `watchCacheEvent`s.
//!
//! Bounded by event count and by bytes (object bodies plus the frames encoded for them). Each
//! event keeps the frames encoded for it, so a burst of resuming watchers (every kubelet after a
//! network blip) replays shared bytes rather than encoding each event again per watcher.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::object::CachedObject;

/// Default bound on the events kept (at 100 events/s, over 16 minutes).
pub const DEFAULT_MAX_EVENTS: usize = 100_000;
/// Default bound on the bytes kept.
pub const DEFAULT_MAX_BYTES: usize = 256 * 1024 * 1024;
/// Default span of the events kept: twice the apiserver's (`storagebackend.
/// DefaultEventsHistoryWindow`, 75 s — the least its watch cache keeps: it doubles its ring
/// while every event in it is younger, and halves it once its newest quarter spans more).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(150);
/// Events kept older than the window, as the apiserver's ring never holds fewer
/// (`defaultLowerBoundCapacity`) — for at most [`FLOOR_WINDOWS`] windows.
pub const MIN_EVENTS: usize = 100;
/// The newest [`MIN_EVENTS`] go too once they are this many windows older than the newest
/// event (10 minutes at the default): the apiserver's ring keeps them until newer events push
/// them out, so a quiet cache's history filled for hours — a node tier's view of a few nodes
/// and services takes that long to bring 100 events, each with its encoded frames: node tiers'
/// RSS grew +2.4 to +4.1 %/h through an hour's real-agent soak, +0.4 to +1.8 %/h with this
/// bound (issue 47, BENCHMARKS.md "Sixth real-agent soak").
/// Bounded in time, every history holds what its cache's churn brings in 10 minutes at most,
/// and reaches that within 10 minutes. A watch resuming from further back gets 410 Expired
/// and lists again, from the cache: its client was away longer than a client-go reflector's
/// longest watch (`timeoutSeconds` ≤ 2 × 5 min), whose bookmarks keep it within a minute of
/// the cache's RV while connected.
pub const FLOOR_WINDOWS: u32 = 4;

/// What happened to the object, as the upstream (or a relist's diff) reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// How one watcher sees an event, after its selectors (`cacheWatcher.convertToWatchEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seen {
    /// ADDED with the object.
    Added,
    /// MODIFIED with the object.
    Modified,
    /// DELETED with the event's object (a deletion: the last state, at the deletion's RV).
    Deleted,
    /// DELETED with the previous state at the event's RV: the object left the selection.
    Left,
}

impl Seen {
    pub fn event_type(self) -> &'static str {
        match self {
            Seen::Added => "ADDED",
            Seen::Modified => "MODIFIED",
            Seen::Deleted | Seen::Left => "DELETED",
        }
    }
}

/// One change, with the state it replaced (which filtered watches need to tell an object that
/// entered or left their selection from one that changed).
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    /// The new state; for a deletion, the last state at the deletion's RV.
    pub object: Arc<CachedObject>,
    pub previous: Option<Arc<CachedObject>>,
    /// When kubeplex received it (for the dispatch latency metric).
    pub received: Instant,
    /// Frames encoded so far, by (how seen, metadata only).
    frames: Vec<((Seen, bool), Bytes)>,
}

impl Event {
    pub fn new(
        rv: u64,
        kind: EventType,
        object: Arc<CachedObject>,
        previous: Option<Arc<CachedObject>>,
        received: Instant,
    ) -> Self {
        Event { rv, kind, object, previous, received, frames: Vec::new() }
    }

    /// How a watcher whose selection is `matches` sees this event, if at all: the apiserver's
    /// rules — passing now and not before is ADDED, before and not now is DELETED with the
    /// previous state, a deletion is seen by those the previous state passed, and a DELETED for
    /// an object the cache never held is seen by nobody.
    pub fn seen_by(&self, matches: impl Fn(&CachedObject) -> bool) -> Option<Seen> {
        let now = self.kind != EventType::Deleted && matches(&self.object);
        let before = self.previous.as_deref().is_some_and(&matches);
        match (now, before, self.kind) {
            (true, false, _) => Some(Seen::Added),
            (true, true, _) => Some(Seen::Modified),
            (false, true, EventType::Deleted) => Some(Seen::Deleted),
            (false, true, _) => Some(Seen::Left),
            (false, false, _) => None,
        }
    }

    /// The frame for (`seen`, `metadata`), encoded by `encode` the first time it is asked for.
    /// Returns it and the bytes newly kept (0 when it was already there).
    pub fn frame(
        &mut self,
        seen: Seen,
        metadata: bool,
        encode: impl FnOnce(&Event) -> Option<Bytes>,
    ) -> (Option<Bytes>, usize) {
        if let Some((_, f)) = self.frames.iter().find(|(k, _)| *k == (seen, metadata)) {
            return (Some(f.clone()), 0);
        }
        let Some(frame) = encode(self) else { return (None, 0) };
        let len = frame.len();
        self.frames.push(((seen, metadata), frame.clone()));
        (Some(frame), len)
    }

    fn bytes(&self) -> usize {
        self.object.body.len() + self.frames.iter().map(|(_, f)| f.len()).sum::<usize>()
    }
}

/// Why a watch cannot resume from a resourceVersion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest resourceVersion a watch can resume from.
    pub oldest: u64,
}

/// The events after `start`, oldest first.
#[derive(Debug)]
pub struct History {
    events: VecDeque<Event>,
    /// Every event after this RV is kept: a watch can resume from any RV at or above it.
    start: u64,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
    /// Events received longer than this before the newest are dropped, beyond the newest
    /// [`MIN_EVENTS`] (and those too past [`FLOOR_WINDOWS`] of it).
    window: Duration,
    /// Every event received after this instant is kept, and no load came after it: an object
    /// the cache holds that no kept event brought in has been held since before it (it came
    /// in a load at this instant, or an event dropped since). The history's creation, its last
    /// [`History::reset`], or the newest event dropped over the bounds.
    complete_after: Instant,
    /// RV ranges `[lo, hi)` no watch may resume from: the inside of a relist's gap, where the
    /// relist's events (`cache::relist`) are not right for a client that holds the state at
    /// such an RV. At most [`MAX_UNSURE`], oldest first.
    unsure: VecDeque<(u64, u64)>,
}

/// Unsure ranges kept; past that, the oldest one's end becomes the history's start. Each relist
/// adds one (a freshness reload of a small cache too), and a quiet cache keeps its history
/// whatever its age: 1,024 (16 KiB) is hours of reloads every few seconds, far older than any
/// RV a watcher resumes from (its bookmarks keep it near the cache's).
const MAX_UNSURE: usize = 1024;

impl History {
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        History {
            events: VecDeque::new(),
            start: u64::MAX,
            bytes: 0,
            max_events: max_events.max(1),
            max_bytes,
            window: DEFAULT_WINDOW,
            complete_after: Instant::now(),
            unsure: VecDeque::new(),
        }
    }

    /// Keeps events for `window` (and the newest [`MIN_EVENTS`] for [`FLOOR_WINDOWS`] of it).
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Forgets every event: from now on watches can resume from `rv` on (a first sync, or a
    /// relist that could not be expressed as events).
    pub fn reset(&mut self, rv: u64) {
        self.events.clear();
        self.bytes = 0;
        self.start = rv;
        self.complete_after = Instant::now();
        self.unsure.clear();
    }

    /// No watch may resume from an RV in `[lo, hi)` (empty: nothing); see `unsure`.
    pub fn refuse_within(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        self.unsure.push_back((lo, hi));
        while self.unsure.len() > MAX_UNSURE {
            if let Some((_, hi)) = self.unsure.pop_front() {
                self.start = self.start.max(hi);
            }
        }
    }

    /// Nothing can be resumed until the next [`History::reset`] (the cache lost track).
    pub fn invalidate(&mut self) {
        self.reset(u64::MAX);
    }

    /// Appends an event (events come in RV order) and drops the oldest over the bounds.
    pub fn push(&mut self, event: Event) {
        self.bytes += event.bytes();
        self.events.push_back(event);
        self.trim();
    }

    /// Records bytes of frames added to kept events, and drops the oldest over the bounds.
    pub fn grew(&mut self, bytes: usize) {
        self.bytes += bytes;
        self.trim();
    }

    /// Drops the oldest events over the bounds: the count, the bytes, and the window — an
    /// event received longer than the window before the newest goes once more than
    /// [`MIN_EVENTS`] are kept, and whatever the count once [`FLOOR_WINDOWS`] windows before
    /// it (the newest's arrival is the clock: a quiet cache keeps what it has until it changes,
    /// as the apiserver's ring does).
    fn trim(&mut self) {
        let newest = self.events.back().map(|e| e.received);
        let older =
            |e: &Event, span: Duration| newest.is_some_and(|n| n.duration_since(e.received) > span);
        let floor = self.window.saturating_mul(FLOOR_WINDOWS);
        while self.events.len() > self.max_events
            || (self.bytes > self.max_bytes && self.events.len() > 1)
            || (self.events.len() > MIN_EVENTS
                && self.events.front().is_some_and(|e| older(e, self.window)))
            || self.events.front().is_some_and(|e| older(e, floor))
        {
            let Some(e) = self.events.pop_front() else { break };
            self.bytes = self.bytes.saturating_sub(e.bytes());
            self.start = self.start.max(e.rv);
            self.complete_after = self.complete_after.max(e.received);
        }
        let start = self.start;
        self.unsure.retain(|(_, hi)| *hi > start);
    }

    /// The index of the first event after `rv`, or why the events after `rv` are not all kept.
    pub fn position_after(&self, rv: u64) -> Result<usize, TooOld> {
        if rv < self.start {
            return Err(TooOld { oldest: self.start });
        }
        if let Some((_, hi)) = self.unsure.iter().find(|(lo, hi)| (*lo..*hi).contains(&rv)) {
            return Err(TooOld { oldest: *hi });
        }
        Ok(self.events.partition_point(|e| e.rv <= rv))
    }

    pub fn event_mut(&mut self, index: usize) -> Option<&mut Event> {
        self.events.get_mut(index)
    }

    /// The newest event, to encode its frames as it is dispatched.
    pub fn last_mut(&mut self) -> Option<&mut Event> {
        self.events.back_mut()
    }

    /// The events received at or after `since`, newest first.
    pub fn received_since(&self, since: Instant) -> impl Iterator<Item = &Event> {
        self.events.iter().rev().take_while(move |e| e.received >= since)
    }

    /// Whether every event received at or after `since` is kept and no load came since: then
    /// an object held now that none of [`History::received_since`]`(since)` brought in was
    /// already held at `since`.
    pub fn complete_since(&self, since: Instant) -> bool {
        self.complete_after < since
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The oldest RV a watch can resume from (`u64::MAX` when none).
    pub fn start(&self) -> u64 {
        self.start
    }
}

#[cfg(test)]
mod tests;
