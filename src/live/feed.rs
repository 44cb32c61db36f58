//! What a reflector learns from the upstream, as a sequence of [`Feed`] events, and how the live
//! layer applies them to a cache ([`apply`]). This is kube-runtime's split of `watcher()` (the
//! stream of events) from `reflector` (the store writer): the reflector knows the upstream's
//! protocol and nothing of the cache; the cache knows states and watchers and nothing of the
//! upstream.
//!
//! The events are handed to the applier in the reflector's own task, as they are read (a sink
//! rather than a pulled `Stream`): there is no queue between the upstream's socket and the
//! store, so an event reaches the cache's watchers with no extra hop or buffer.

use std::time::Instant;

use crate::cache::resource::{EventKind, ResourceCache};
use crate::cache::CachedObject;

/// One thing the reflector learned, in the order it learned it.
#[derive(Debug, Clone)]
pub enum Feed {
    /// A load (paged list or streaming list) is being requested, at `requested`: its state will
    /// be consistent for every read that arrived before then — when `consistent` (a list at
    /// `resourceVersion=0` is consistent for no read).
    LoadStarted { requested: Instant, consistent: bool },
    /// The load ended without a complete state; nothing was replaced. `unreachable`: the
    /// upstream gave no answer (no connection, a 5xx, a 429), rather than refusing it;
    /// `forbidden`: it refused kubeplex the list (401, 403).
    LoadFailed { unreachable: bool, forbidden: bool },
    /// A load's complete state at `rv`. `whole` is false when objects had to be skipped (the
    /// state is not whole; the cache must not answer until a later load is).
    Loaded { objects: Vec<CachedObject>, rv: u64, whole: bool },
    /// A change after the state.
    Event(EventKind, CachedObject),
    /// The upstream is at `rv` with no further change of this resource (BOOKMARK).
    Bookmark(u64),
    /// A change's object could not be indexed and was skipped.
    Skipped,
    /// The upstream answered a watch of the state (or a streaming list's state is in and its
    /// stream goes on as a watch). `via_tier`: the upstream is a tier above kubeplex (a pool),
    /// not the apiserver: its own watch may be in a gap this one cannot see.
    Watching { via_tier: bool },
    /// The watch failed or was refused: changes may be missed until one is answered again.
    WatchLost,
    /// The upstream no longer serves the resource (404 for its collection: its CRD deleted,
    /// or its version no longer served). The cache cannot go on; its owner stops it
    /// (`live::caches`), which ends its watchers as the apiserver ends its own.
    NotServed,
}

/// Applies one event to `cache` (kube-runtime's `Writer::apply_watcher_event`).
pub fn apply(cache: &ResourceCache, feed: Feed) {
    match feed {
        Feed::LoadStarted { requested, consistent } => cache.load_started(requested, consistent),
        Feed::LoadFailed { .. } => cache.load_failed(),
        Feed::Loaded { objects, rv, whole } => {
            cache.replace(objects, rv);
            if !whole {
                cache.mark_incomplete();
            }
        }
        Feed::Event(kind, object) => cache.apply(kind, object),
        Feed::Bookmark(rv) => cache.bookmark(rv),
        Feed::Skipped => cache.mark_incomplete(),
        Feed::Watching { via_tier } => cache.watching(via_tier),
        Feed::WatchLost | Feed::NotServed => cache.watch_lost(),
    }
}
