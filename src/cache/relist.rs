//! The differences a relist found, as watch events: what lets a cache's watchers go on across a
//! relist instead of being reset (the apiserver's watch cache ends every watcher when its
//! reflector relists: `Cacher.startCaching` → `terminateAllWatchers`, and they list again).

use std::sync::Arc;

use super::frames::Encoder;
use super::history::{Event, EventType};
use super::store::{Applied, Change};

/// A relist's differences as watch events that take a watcher from the cache's previous state
/// (at `old_rv`) to the list's (at `list_rv`), in strictly increasing RV order: ADDED and
/// MODIFIED at their objects' own RVs (all after `old_rv`: the cache had every change up to
/// it), and a DELETED for each vanished object, carrying its last state re-stamped with an RV
/// of the gap no change holds ([`deletion_rvs`]). `None` when the differences do not fit that
/// order — the cache was not at `old_rv` after all — and watchers must be reset.
///
/// No two events share an RV: a watcher that saw the first of two would resume from that RV,
/// and every event at it counts as seen — a kubeplex downstream drops the second as a replay
/// (`Store::apply`), a client resuming misses it. The apiserver never sends two events at one
/// RV (each is an etcd revision); the soak lost deletions when these all went at the list's.
///
/// The events take a watcher from the cache's previous state, so they are right only for one
/// that held it: a client at an RV inside the gap (read elsewhere, ahead of the cache — or a
/// deletion placed before its true RV) may hold an object created and deleted in the gap,
/// which no event mentions. Watches must not start or resume strictly inside `(old_rv,
/// list_rv)` (`ResourceCache::replace`).
pub(crate) fn relist_events(
    encoder: &Encoder,
    changes: Vec<Applied>,
    old_rv: u64,
    list_rv: u64,
) -> Option<Vec<Event>> {
    let now = std::time::Instant::now();
    let mut events = Vec::with_capacity(changes.len());
    let mut vanished = Vec::new();
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
            Change::Deleted(o) => vanished.push((o, previous)),
        }
    }
    let taken: std::collections::HashSet<u64> = events.iter().map(|e| e.rv).collect();
    let Some(rvs) = deletion_rvs(&taken, vanished.len(), old_rv, list_rv) else {
        tracing::warn!(gone = vanished.len(), old_rv, list_rv, "relist found more objects gone than free resource versions in its gap; resetting watchers");
        return None;
    };
    for ((o, previous), rv) in vanished.into_iter().zip(rvs) {
        let body = encoder.with_resource_version(&o.body, rv).ok()?;
        let gone = (*o).clone().at(rv, bytes::Bytes::from(body));
        events.push(Event::new(rv, EventType::Deleted, Arc::new(gone), previous, now));
    }
    events.sort_by_key(|e| e.rv);
    if let Some(pair) = events.windows(2).find(|pair| pair[0].rv == pair[1].rv) {
        tracing::warn!(rv = pair[0].rv, first = %pair[0].object.key, second = %pair[1].object.key, "relist found two changes at one resource version; resetting watchers");
        return None;
    }
    Some(events)
}

/// RVs for `gone` deletions whose own RVs are unknown: the newest of the gap `(old_rv,
/// list_rv]` that no change in `taken` holds, oldest first (the list's own RV first of all, the
/// first at which an object is known to be gone). Every deletion the cache missed was an etcd
/// revision of its own in that gap, which no object's current RV can be, so with an apiserver
/// upstream there are always enough; `None` if not.
fn deletion_rvs(
    taken: &std::collections::HashSet<u64>,
    gone: usize,
    old_rv: u64,
    list_rv: u64,
) -> Option<Vec<u64>> {
    let mut rvs: Vec<u64> = (old_rv.saturating_add(1)..=list_rv)
        .rev()
        .filter(|rv| !taken.contains(rv))
        .take(gone)
        .collect();
    if rvs.len() < gone {
        return None;
    }
    rvs.reverse();
    Some(rvs)
}

#[cfg(test)]
mod tests;
