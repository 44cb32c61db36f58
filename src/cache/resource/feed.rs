//! Applying what the upstream said to a cache (called by the live layer's `live::feed`):
//! complete states (loads, with the relist's differences sent to watchers), single events,
//! bookmarks, freshness marks, and objects that could not be indexed. Every change bumps the
//! load epoch when the state may stop following from the one before it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{EventKind, LoadMarks, ResourceCache};
use crate::cache::fanout::Closed;
use crate::cache::history::{Event, EventType};
use crate::cache::object::CachedObject;
use crate::cache::relist::relist_events;
use crate::cache::store::{Applied, Change};

impl ResourceCache {
    /// A freshness probe's conclusion: the upstream had no event of this resource in
    /// `(events_through, rv]`. Once the cache holds every event up to `events_through` (the
    /// probe saw them too), it is at `rv`, as a BOOKMARK at `rv` on its own watch would have
    /// told it. Refused (false) when the cache is not there yet, or its state changed epoch
    /// since the probe began (a relist: the probe's view no longer follows from it).
    pub fn mark_progress(&self, epoch: u64, events_through: u64, rv: u64) -> bool {
        let mut store = self.write();
        let loading = self.loading.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        if loading
            || !self.is_synced()
            || self.epoch.load(Ordering::Acquire) != epoch
            || store.resource_version() < events_through
        {
            return false;
        }
        store.bookmark(rv, std::time::Instant::now());
        self.publish(&store);
        let fan = self.fanout();
        drop(store);
        self.dispatched.fetch_max(rv, Ordering::AcqRel);
        drop(fan);
        true
    }

    /// Loads a complete state (a relist). The cache answers from now on, unless the load
    /// skipped something (the caller then calls `mark_incomplete`). Watchers receive the
    /// differences to the previous state as events (see [`relist_events`]).
    pub fn replace(&self, objects: Vec<CachedObject>, rv: u64) {
        self.from_disk.lock().unwrap_or_else(|p| p.into_inner()).take();
        let was_whole = self.is_synced() && self.is_complete();
        let mut store = self.write();
        let old_rv = store.resource_version();
        let changes = store.replace(objects, rv, std::time::Instant::now());
        self.publish(&store);
        let mut fan = self.fanout();
        drop(store);
        match relist_events(&self.encoder, changes, old_rv, rv).filter(|_| was_whole) {
            Some(events) => {
                // The events suit a watcher that held the previous state: one that started
                // ahead of the cache, inside the gap, may hold what no event mentions (an
                // object created and deleted in the gap). Ended, and told 410 if it resumes in
                // there (it lists again).
                let (lo, hi) = (old_rv.saturating_add(1), rv);
                let ahead = fan.close_starting_within(lo, hi, Closed::Reset);
                self.gauges.ended_reset.inc_by(ahead);
                fan.history.refuse_within(lo, hi);
                self.gauges.events_received.inc_by(events.len() as u64);
                for event in events {
                    self.dispatch(&mut fan, event);
                }
            }
            None => {
                // A first load, or one after the cache lost track: nothing to resume from
                // before it, and nobody watching from the cache.
                let open = fan.len() as u64;
                fan.close_all(Closed::Reset);
                self.gauges.ended_reset.inc_by(open);
                fan.history.reset(rv);
            }
        }
        self.dispatched.store(rv, Ordering::Release);
        self.publish_history(&fan);
        drop(fan);
        self.complete.store(true, Ordering::Release);
        let requested = self.loading.lock().unwrap_or_else(|p| p.into_inner()).take();
        *self.loaded_from.lock().unwrap_or_else(|p| p.into_inner()) = requested;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.set_synced(true);
        self.loads.send_modify(|n| *n += 1);
    }

    /// What a cache fed by this one in another encoding (`live::mirror`) takes over with its
    /// state: when that state was loaded and whether a load is under way — so that the twin's
    /// consistent reads and freshness proofs count exactly what this cache's would. `None` while
    /// the state is not one to copy (not synced, not whole, or read from disk): the twin then
    /// waits for this cache's next load, which it receives too.
    pub fn load_marks(&self) -> Option<LoadMarks> {
        let loaded_from = *self.loaded_from.lock().unwrap_or_else(|p| p.into_inner());
        let from_disk = self.from_disk.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        if !self.is_synced() || !self.is_complete() || from_disk || loaded_from.is_none() {
            return None;
        }
        let loading = *self.loading.lock().unwrap_or_else(|p| p.into_inner());
        let watching_since = *self.watching_since.lock().unwrap_or_else(|p| p.into_inner());
        let via_tier = self.via_tier.load(Ordering::Acquire);
        Some(LoadMarks { loaded_from, loading, watching_since, via_tier })
    }

    /// A first state taken over from the cache it is fed by (`live::mirror`): `objects` at `rv`,
    /// loaded, and loading, as [`ResourceCache::load_marks`] said that cache's state was.
    pub fn replace_like(&self, objects: Vec<CachedObject>, rv: u64, marks: LoadMarks) {
        *self.loading.lock().unwrap_or_else(|p| p.into_inner()) = marks.loaded_from;
        self.replace(objects, rv);
        *self.loading.lock().unwrap_or_else(|p| p.into_inner()) = marks.loading;
        *self.watching_since.lock().unwrap_or_else(|p| p.into_inner()) = marks.watching_since;
        self.via_tier.store(marks.via_tier, Ordering::Release);
    }

    /// A state read back from disk (`cache::persist`), written at `written_at` (Unix seconds),
    /// for a cache whose first load failed: the upstream cannot be reached, and this is the
    /// last state known. Reads that accept any state are answered from it; it never counts as
    /// fresh (no load was requested for it: `loaded_since` stays false), so consistent reads
    /// still need a proof from the upstream. The first load replaces it as a relist does,
    /// its differences going to watchers as events. Ignored once the cache has synced.
    pub fn restore(&self, objects: Vec<CachedObject>, rv: u64, written_at: u64) -> bool {
        if self.is_synced() || self.has_loaded() {
            return false;
        }
        // The failed load that brings the disk state into service is over, and claims nothing.
        self.loading.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.replace(objects, rv);
        *self.from_disk.lock().unwrap_or_else(|p| p.into_inner()) = Some(written_at);
        *self.loaded_from.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.gauges.heard_at(written_at);
        true
    }

    fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Release);
        self.synced_tx.send_replace(synced);
    }

    /// A load (paged list or streaming list) is being requested at `requested`: objects skipped
    /// from now on count against it, proofs begun before it do not apply after it, and, when
    /// `consistent` (resourceVersion unset), its state will be consistent for reads that
    /// arrived before `requested`.
    pub fn load_started(&self, requested: std::time::Instant, consistent: bool) {
        // A load replaces what the cache knew: its view is not live until the watch after it.
        self.watch_lost();
        self.complete.store(true, Ordering::Release);
        *self.loading.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(super::Load { requested, consistent });
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The upstream answered a watch from the cache's state (or a streaming list's state is in
    /// and its stream goes on as a watch): the view is live from now, unless it has been since
    /// before (a watch resumed after its routine end is no gap).
    ///
    /// `via_tier`: the watch runs on a tier above kubeplex (a pool), not on the apiserver.
    pub fn watching(&self, via_tier: bool) {
        *self.heard.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
        self.via_tier.store(via_tier, Ordering::Release);
        let mut since = self.watching_since.lock().unwrap_or_else(|p| p.into_inner());
        since.get_or_insert_with(std::time::Instant::now);
    }

    /// The upstream's watch failed or was refused (it broke, 410, 429, an error): until a watch
    /// is answered again the cache may miss changes, however current it looks.
    pub fn watch_lost(&self) {
        self.watching_since.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// A load failed before it replaced the state. A cold cache's readers are told (they pass
    /// through rather than wait).
    pub fn load_failed(&self) {
        self.loading.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if !self.is_synced() && !self.has_loaded() {
            self.cold_failures.send_modify(|n| *n += 1);
        }
        self.loads.send_modify(|n| *n += 1);
    }

    pub fn apply(&self, kind: EventKind, obj: CachedObject) {
        let mut store = self.write();
        let change = match kind {
            EventKind::Added => Change::Added(Arc::new(obj)),
            EventKind::Modified => Change::Modified(Arc::new(obj)),
            EventKind::Deleted => Change::Deleted(Arc::new(obj)),
        };
        // An event not newer than the cache (a replay after a reconnect) changes nothing.
        let applied = store.apply(change, std::time::Instant::now()).ok();
        self.publish(&store);
        let Some(Applied { change, previous }) = applied else { return };
        let mut fan = self.fanout();
        drop(store);
        let rv = change.object().resource_version;
        let (kind, object) = match change {
            Change::Added(o) => (EventType::Added, o),
            Change::Modified(o) => (EventType::Modified, o),
            Change::Deleted(o) => (EventType::Deleted, o),
        };
        self.gauges.events_received.inc();
        // A deletion of an object the cache never held is seen by nobody (the watch cache's
        // `PrevObject` is nil), but the RV still moves.
        if kind != EventType::Deleted || previous.is_some() {
            let event = Event::new(rv, kind, object, previous, std::time::Instant::now());
            self.dispatch(&mut fan, event);
        }
        self.dispatched.store(rv, Ordering::Release);
        self.publish_history(&fan);
    }

    pub fn bookmark(&self, rv: u64) {
        let mut store = self.write();
        store.bookmark(rv, std::time::Instant::now());
        self.publish(&store);
        let fan = self.fanout();
        drop(store);
        self.dispatched.fetch_max(rv, Ordering::AcqRel);
        drop(fan);
    }

    /// An object could not be indexed: the cache is not whole and must not answer until a
    /// relist loads everything.
    pub fn mark_incomplete(&self) {
        self.complete.store(false, Ordering::Release);
        self.set_synced(false);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        // Watchers would miss that object's events: end them (their clients resume through
        // the upstream while the cache is not whole), and resume nothing from before.
        let mut fan = self.fanout();
        let open = fan.len() as u64;
        fan.close_all(Closed::Reset);
        self.gauges.ended_reset.inc_by(open);
        fan.history.invalidate();
        self.metrics
            .skipped_objects
            .with_label_values(&[&self.label, self.encoding.as_str()])
            .inc();
    }

    /// Whether no object has been skipped since the last complete load began.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }
}
