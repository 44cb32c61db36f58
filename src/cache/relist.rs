//! The differences a relist found, as watch events: what lets a cache's watchers go on across a
//! relist instead of being reset (the watch cache's behaviour after its reflector relists).

use std::sync::Arc;

use super::frames::Encoder;
use super::history::{Event, EventType};
use super::store::{Applied, Change};

/// A relist's differences as watch events that take a watcher from the cache's previous state
/// (at `old_rv`) to the list's (at `list_rv`), in RV order: ADDED and MODIFIED at their objects'
/// own RVs (all after `old_rv`: the cache had every change up to it), then DELETED for vanished
/// objects, carrying their last state at the list's RV (their deletions' RVs are unknown; the
/// list's is the first at which they are known to be gone). `None` when the differences do not
/// fit that order — the cache was not at `old_rv` after all — and watchers must be reset.
pub(crate) fn relist_events(
    encoder: &Encoder,
    changes: Vec<Applied>,
    old_rv: u64,
    list_rv: u64,
) -> Option<Vec<Event>> {
    let now = std::time::Instant::now();
    let mut events = Vec::with_capacity(changes.len());
    let mut deleted = Vec::new();
    for Applied { change, previous } in changes {
        match change {
            Change::Added(o) | Change::Modified(o)
                if o.resource_version <= old_rv || o.resource_version > list_rv =>
            {
                tracing::warn!(key = %o.key, rv = o.resource_version, old_rv, list_rv, "relist found a change outside the gap it closes; resetting watchers");
                return None;
            }
            Change::Added(o) => {
                events.push(Event::new(o.resource_version, EventType::Added, o, previous, now))
            }
            Change::Modified(o) => {
                events.push(Event::new(o.resource_version, EventType::Modified, o, previous, now))
            }
            Change::Deleted(o) => {
                let body = encoder.with_resource_version(&o.body, list_rv).ok()?;
                let gone = (*o).clone().at(list_rv, bytes::Bytes::from(body));
                deleted.push(Event::new(
                    list_rv,
                    EventType::Deleted,
                    Arc::new(gone),
                    previous,
                    now,
                ));
            }
        }
    }
    events.sort_by_key(|e| e.rv);
    events.extend(deleted);
    Some(events)
}

#[cfg(test)]
mod tests;
