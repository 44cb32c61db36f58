//! The state of one resource in one encoding: the current objects, the resourceVersion the cache
//! is known to be at, and a window of recent states so a list can be served at an exact
//! resourceVersion and every page of a paged list at the RV of its first page.
//!
//! States are `imbl::OrdMap`s: taking one costs O(1) and consecutive states share all but the
//! path to the changed key, so keeping a state per event is cheap. This is the watch cache's
//! snapshotter (`staging/src/k8s.io/apiserver/pkg/storage/cacher/store`): the state at RV `n` is
//! the newest state with RV `<= n`, and a relist starts the window afresh.
//!
//! Every state carries its secondary [`Indexes`], persistent too, kept in step with its objects
//! by every change, so a list served from a past state reads that state's index.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use imbl::ordmap::DiffItem;
use imbl::OrdMap;

use super::index::{Indexes, DEFAULT_INDEXED_FIELDS};
use super::object::{CachedObject, Key};

/// The objects of a state, by key.
pub type Items = OrdMap<Key, Arc<CachedObject>>;

/// Default bound on the states kept, the current one included.
pub const DEFAULT_MAX_SNAPSHOTS: usize = 4096;
/// Default time a state is kept after a change superseded it (the watch cache keeps events for
/// 75 s, `eventFreshDuration`).
pub const DEFAULT_MAX_SNAPSHOT_AGE: Duration = Duration::from_secs(75);

/// How many past states a store keeps, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// States kept, the current one included (at least 1).
    pub max_snapshots: usize,
    /// How long a state is kept once superseded.
    pub max_snapshot_age: Duration,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self { max_snapshots: DEFAULT_MAX_SNAPSHOTS, max_snapshot_age: DEFAULT_MAX_SNAPSHOT_AGE }
    }
}

/// The state of the store at one resourceVersion, with its indexes. Cloning is O(1).
#[derive(Debug, Clone)]
pub struct Snapshot {
    rv: u64,
    items: Items,
    indexes: Indexes,
}

/// Indexes are derived from the items, so two states are equal when their objects are.
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.rv == other.rv && self.items == other.items
    }
}

impl Eq for Snapshot {}

impl Snapshot {
    /// A state without indexes: lists from it walk the key range.
    pub fn new(rv: u64, items: Items) -> Self {
        Self { rv, items, indexes: Indexes::default() }
    }

    /// The resourceVersion this state is served at (a list's `metadata.resourceVersion`).
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn items(&self) -> &Items {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Arc<CachedObject>> {
        self.items.get(key)
    }

    /// This state served at `rv`, a later RV at which the upstream's state of the same scope was
    /// shown to be the same (a metadata list listing exactly these objects at their RVs:
    /// `live::freshness`); a list of it is the upstream's list at `rv`.
    pub fn as_of(mut self, rv: u64) -> Self {
        self.rv = self.rv.max(rv);
        self
    }

    /// The indexes of this state (see [`Store::with_indexes`]).
    pub fn indexes(&self) -> &Indexes {
        &self.indexes
    }
}

/// One change to the store: a watch event, or a difference found by a relist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(Arc<CachedObject>),
    Modified(Arc<CachedObject>),
    /// The object's last state (a watch DELETED event carries the RV of the deletion).
    Deleted(Arc<CachedObject>),
}

impl Change {
    pub fn object(&self) -> &Arc<CachedObject> {
        match self {
            Change::Added(o) | Change::Modified(o) | Change::Deleted(o) => o,
        }
    }

    /// The watch event type.
    pub fn event_type(&self) -> &'static str {
        match self {
            Change::Added(_) => "ADDED",
            Change::Modified(_) => "MODIFIED",
            Change::Deleted(_) => "DELETED",
        }
    }
}

/// A change the store applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub change: Change,
    /// What the key held before, which a filtered watch needs to tell an object that stopped
    /// matching (sent as DELETED) from one that changed.
    pub previous: Option<Arc<CachedObject>>,
}

/// Why [`Store::at`] cannot give the state at a resourceVersion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The state was not kept (or precedes the last relist); `oldest` is the oldest RV served.
    #[error("resource version is older than the oldest kept, {oldest}")]
    TooOld { oldest: u64 },
    /// The cache has not reached that RV yet.
    #[error("resource version is newer than the cache's, {current}")]
    TooNew { current: u64 },
}

/// A watch event the store cannot apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Events come in RV order, so one at or below the cache's RV was already seen (or precedes
    /// a relist): applying it would move the state backwards.
    #[error("event at resource version {event} is not newer than the cache's {current}")]
    Stale { event: u64, current: u64 },
}

/// A superseded state: it held from `rv` up to the `rv` of the next one.
#[derive(Debug, Clone)]
struct Retired {
    rv: u64,
    retired_at: Instant,
    items: Items,
    indexes: Indexes,
}

/// The cache of one resource in one encoding.
#[derive(Debug, Clone)]
pub struct Store {
    items: Items,
    /// Always describes `items` exactly.
    indexes: Indexes,
    /// The RV the cache is known to be at: the last event, list or bookmark.
    rv: u64,
    /// The RV at which the current state began (its last change or the list).
    current_since: u64,
    /// Superseded states, oldest first, each holding until the next one's `rv`.
    history: VecDeque<Retired>,
    limits: StoreLimits,
    bytes: usize,
    synced: bool,
}

impl Store {
    /// A store indexing [`DEFAULT_INDEXED_FIELDS`].
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            items: Items::new(),
            indexes: Indexes::new(DEFAULT_INDEXED_FIELDS),
            rv: 0,
            current_since: 0,
            history: VecDeque::new(),
            limits,
            bytes: 0,
            synced: false,
        }
    }

    /// The same store indexing `fields` instead (see `index::indexed_fields`); past states keep
    /// the indexes they had.
    pub fn with_indexes(mut self, fields: &[&'static str]) -> Self {
        self.indexes = Indexes::new(fields);
        for object in self.items.values() {
            self.indexes.update(None, Some(object));
        }
        self
    }

    /// Replaces the whole state with a list's (a relist) and returns how the new state differs
    /// from the previous one, in key order, so that downstream watchers converge on it: ADDED
    /// and MODIFIED with the new object, DELETED with the vanished object's last state, each with
    /// the state it replaced (a DELETED's is its object). Objects
    /// equal in every byte are unchanged. Past states are dropped, as the watch cache's
    /// `Replace` resets its snapshots: the RVs between them and the list are unknown.
    pub fn replace(
        &mut self,
        objects: impl IntoIterator<Item = impl Into<Arc<CachedObject>>>,
        list_rv: u64,
        now: Instant,
    ) -> Vec<Applied> {
        let mut items = Items::new();
        for object in objects {
            let object = object.into();
            // A key listed twice keeps its last object, as a map insert would.
            items.insert(object.key.clone(), object);
        }
        // The indexes follow the same differences, so a relist that changes little costs little.
        let indexes = &mut self.indexes;
        let changes = self
            .items
            .diff(&items)
            .map(|item| match item {
                DiffItem::Add(_, new) => {
                    indexes.update(None, Some(new));
                    Applied { change: Change::Added(Arc::clone(new)), previous: None }
                }
                DiffItem::Update { old: (_, old), new: (_, new) } => {
                    indexes.update(Some(old), Some(new));
                    Applied {
                        change: Change::Modified(Arc::clone(new)),
                        previous: Some(Arc::clone(old)),
                    }
                }
                DiffItem::Remove(_, old) => {
                    indexes.update(Some(old), None);
                    Applied {
                        change: Change::Deleted(Arc::clone(old)),
                        previous: Some(Arc::clone(old)),
                    }
                }
            })
            .collect();
        self.bytes = items.values().map(|o| o.body.len()).sum();
        self.items = items;
        self.rv = list_rv;
        self.current_since = list_rv;
        self.history.clear();
        self.synced = true;
        self.expire(now);
        changes
    }

    /// Applies one watch event. An ADDED for a present key or a MODIFIED for an absent one is
    /// applied as an upsert, and a DELETED for an absent key only advances the RV, as the watch
    /// cache's store does.
    pub fn apply(&mut self, change: Change, now: Instant) -> Result<Applied, ApplyError> {
        let event = change.object().resource_version;
        if event <= self.rv {
            return Err(ApplyError::Stale { event, current: self.rv });
        }
        let previous = match &change {
            Change::Added(o) | Change::Modified(o) => {
                self.retire(event, now);
                self.bytes = self.bytes.saturating_add(o.body.len());
                let previous = self.items.insert(o.key.clone(), Arc::clone(o));
                self.indexes.update(previous.as_deref(), Some(o));
                previous
            }
            Change::Deleted(o) if self.items.contains_key(&o.key) => {
                self.retire(event, now);
                let previous = self.items.remove(&o.key);
                self.indexes.update(previous.as_deref(), None);
                previous
            }
            Change::Deleted(_) => None,
        };
        if let Some(p) = &previous {
            self.bytes = self.bytes.saturating_sub(p.body.len());
        }
        self.rv = event;
        self.expire(now);
        Ok(Applied { change, previous })
    }

    /// Records that the cache is at `rv` without any change (a BOOKMARK, or the upstream's
    /// progress notification). Returns whether the RV advanced.
    pub fn bookmark(&mut self, rv: u64, now: Instant) -> bool {
        let advanced = rv > self.rv;
        if advanced {
            self.rv = rv;
        }
        self.expire(now);
        advanced
    }

    /// Drops the states that are over the window's limits at `now`. Every change does this; call
    /// it on a timer to free states of a resource that stopped changing.
    pub fn expire(&mut self, now: Instant) {
        let keep = self.limits.max_snapshots.max(1) - 1;
        while self.history.len() > keep {
            self.history.pop_front();
        }
        while self.history.front().is_some_and(|r| self.expired(r, now)) {
            self.history.pop_front();
        }
    }

    fn expired(&self, state: &Retired, now: Instant) -> bool {
        now.saturating_duration_since(state.retired_at) > self.limits.max_snapshot_age
    }

    /// The current state, at the RV the cache is known to be at.
    pub fn current(&self) -> Snapshot {
        Snapshot { rv: self.rv, items: self.items.clone(), indexes: self.indexes.clone() }
    }

    /// The state exactly at `rv` (served as of `rv`): the newest kept state that began at or
    /// before it. States over the age limit at `now` count as dropped, so the limit holds even
    /// while no change comes to expire them.
    pub fn at(&self, rv: u64, now: Instant) -> Result<Snapshot, SnapshotError> {
        if rv > self.rv {
            return Err(SnapshotError::TooNew { current: self.rv });
        }
        if rv >= self.current_since {
            return Ok(Snapshot { rv, items: self.items.clone(), indexes: self.indexes.clone() });
        }
        // History is in RV order and in retirement order, and contiguous: the last state that
        // began at or before `rv` held at `rv`.
        let first_live = self.history.partition_point(|r| self.expired(r, now));
        let newer = self.history.partition_point(|r| r.rv <= rv);
        match newer.checked_sub(1).filter(|&i| i >= first_live).and_then(|i| self.history.get(i)) {
            Some(r) => Ok(Snapshot { rv, items: r.items.clone(), indexes: r.indexes.clone() }),
            None => {
                let oldest = self.history.get(first_live).map_or(self.current_since, |r| r.rv);
                Err(SnapshotError::TooOld { oldest })
            }
        }
    }

    /// The object at `key` now.
    pub fn get(&self, key: &str) -> Option<&Arc<CachedObject>> {
        self.items.get(key)
    }

    /// The RV the cache is known to be at.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The oldest RV [`Store::at`] can serve.
    pub fn oldest_rv(&self) -> u64 {
        self.history.front().map_or(self.current_since, |r| r.rv)
    }

    /// How many states are kept, the current one included.
    pub fn snapshot_count(&self) -> usize {
        self.history.len() + 1
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The summed size of the current objects' bodies (for metrics).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a full list has been loaded (the first [`Store::replace`]).
    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn limits(&self) -> StoreLimits {
        self.limits
    }

    /// Keeps the current state as a past one before a change at `event` replaces it: it held
    /// for every RV below the event, since events arrive in RV order with none skipped.
    fn retire(&mut self, event: u64, now: Instant) {
        self.history.push_back(Retired {
            rv: self.current_since,
            retired_at: now,
            items: self.items.clone(),
            indexes: self.indexes.clone(),
        });
        self.current_since = event;
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new(StoreLimits::default())
    }
}

#[cfg(test)]
mod tests;
