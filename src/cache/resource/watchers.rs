//! A cache's downstream watchers: registering a watch atomically with the state or history it
//! starts from, dispatching events to them, and ending the ones that fall behind.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Registration, ResourceCache, WatchFrom};
use crate::cache::fanout::{FanOut, Filter, WatchConfig};
use crate::cache::frames::Encoder;
use crate::cache::history::{Event, TooOld};

impl ResourceCache {
    pub(super) fn dispatch(&self, fan: &mut FanOut, event: Event) {
        let done = fan.publish(event);
        self.gauges.frames_dispatched.inc_by(done.frames);
        self.gauges.ended_slow.inc_by(done.slow);
    }

    pub(super) fn publish_history(&self, fan: &FanOut) {
        let g = &self.gauges;
        g.history_events.set(fan.history.len() as i64);
        g.history_bytes.set(fan.history.bytes() as i64);
        g.history_oldest.set(i64::try_from(fan.history.start()).unwrap_or(-1));
        g.watchers.set(fan.len() as i64);
    }

    /// Registers a watch, atomically with the state or history it starts from, so that it
    /// misses no event and sees none twice. `Err` when `from` is older than the history.
    pub fn register_watch(
        &self,
        from: WatchFrom,
        filter: Filter,
        metadata: bool,
    ) -> Result<Registration, TooOld> {
        self.touch();
        let store = self.read();
        let mut fan = self.fanout();
        let current = store.resource_version();
        let (initial, after, replay) = match from {
            WatchFrom::State => (Some(store.current()), current, None),
            WatchFrom::Now => (None, current, None),
            // An RV the cache has not reached yet: the events up to it are the client's
            // already; later ones are sent (the watch cache's `getAllEventsSinceLocked`).
            WatchFrom::After(rv) => (None, rv.max(current), Some(fan.history.position_after(rv)?)),
            WatchFrom::StateAt(rv) if rv < current => {
                match (store.at(rv, std::time::Instant::now()), fan.history.position_after(rv)) {
                    (Ok(state), Ok(replay)) => (Some(state), rv, Some(replay)),
                    _ => (Some(store.current()), current, None),
                }
            }
            WatchFrom::StateAt(_) => (Some(store.current()), current, None),
            WatchFrom::StateAhead { rv, cache_at } if cache_at == current && rv > current => {
                (Some(store.current()), rv, None)
            }
            WatchFrom::StateAhead { .. } => (Some(store.current()), current, None),
        };
        drop(store);
        let (id, queue) = fan.add(filter, metadata, after, replay, self.watch_config.queue_frames);
        self.publish_history(&fan);
        let position = match from {
            WatchFrom::After(rv) => rv,
            _ => after,
        };
        Ok(Registration { id, queue, initial, position })
    }

    /// Forgets a watch whose stream ended.
    pub fn unregister_watch(&self, id: u64) {
        let mut fan = self.fanout();
        fan.remove(id);
        self.publish_history(&fan);
    }

    /// The RV every event has been queued up to (see `dispatched`).
    pub fn dispatched_rv(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    pub fn watch_config(&self) -> &WatchConfig {
        &self.watch_config
    }

    /// Encodes this cache's watch frames.
    pub fn encoder(&self) -> Arc<Encoder> {
        self.encoder.clone()
    }

    /// Records bytes handed to a downstream connection, and the delivery delay of an event.
    pub fn observe_sent(&self, bytes: usize, received: Option<std::time::Instant>) {
        self.gauges.bytes_sent.inc_by(bytes as u64);
        if let Some(t) = received {
            self.gauges.delivery.observe(t.elapsed().as_secs_f64());
        }
    }

    /// Ends watchers that fell behind for too long. Run periodically.
    pub fn end_slow_watchers(&self) {
        let mut fan = self.fanout();
        let ended = fan.end_slow(std::time::Instant::now(), self.watch_config.slow_after);
        self.gauges.ended_slow.inc_by(ended);
        self.publish_history(&fan);
    }

    /// Whether downstream watches are open on this cache.
    pub fn has_watchers(&self) -> bool {
        !self.fanout().is_empty()
    }
}
