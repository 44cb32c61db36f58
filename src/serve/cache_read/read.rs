//! A read the cache may answer, as the cache paths (`cached`, `watch`) take it, and what one
//! attempt to answer it decided besides the answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::cache::{Encoding, Scope};
use crate::live::caches::Live;
use crate::live::reflector::fed::Feeder;
use crate::live::reflector::FirstLoad;
use crate::serve::state::ProxyState;
use crate::wire::request::{ListOptions, ResourcePath};
use crate::wire::resource::ResourceInfo;

/// A read the cache may answer, as the cache paths (`cached`, `watch`) take it.
pub struct CachedRead<'a> {
    pub info: &'a Arc<ResourceInfo>,
    pub rp: &'a ResourcePath,
    pub opts: &'a ListOptions,
    /// What it can see: the cache that answers must contain it.
    pub scope: &'a Scope,
    /// What this attempt to answer it decided besides the answer.
    pub attempt: &'a Attempt,
}

impl CachedRead<'_> {
    /// Whether a cache may answer this read in `encoding` at all: a read of one named object
    /// never starts a cache (`live::caches`), so only a running cache that holds it may — and
    /// no review is asked for a read that would pass through anyway.
    pub fn may_be_cached(&self, state: &ProxyState, encoding: Encoding) -> bool {
        self.scope.name().is_none() || state.caches.holds_named(self.info, encoding, self.scope)
    }

    /// The cache that answers this read in `encoding` (`Caches::for_read`: a running one whose
    /// scope contains it, or one started for it); asked once the client may read it (node
    /// mode's gate, `auth::gate`). `None`: the read passes through.
    ///
    /// `whole`: the read asks for what a cache of its scope loads — every object of it, in the
    /// cache's encoding, in one unpaged list. A cache it starts then takes its first load from
    /// the read's own answer (`live::reflector::fed`): the read is passed through, with what
    /// feeds the cache noted in its [`Attempt`], and `None` is returned.
    pub fn cache(&self, state: &ProxyState, encoding: Encoding, whole: bool) -> Option<Arc<Live>> {
        let caches = &state.caches;
        let live = caches.for_read(self.info, encoding, self.scope, self.first_load(whole))?;
        let same_scope = || live.scope().contains(self.scope) && self.scope.contains(live.scope());
        // A cache rendered from another encoding's (`live::mirror`) that has not taken its
        // state over yet: a list or get passes through, as fast as the upstream answers it,
        // rather than wait for the rendering; a watch waits (passed through, it would hold an
        // upstream watch for as long as it runs).
        if !live.is_synced() && live.rendered_from().is_some() && !self.opts.watch {
            return None;
        }
        // A read of one object by name that a cache of a wider scope holds, found loading: it
        // passes through at once — as fast as the apiserver answers one object, at the cost of
        // that one read, as directly — rather than wait for the whole scope's first load (a
        // pool's cache of every ConfigMap, started by a kubelet's named watch of one: 100,000
        // ConfigMaps load in seconds, the kubelet's pod waits for its volume meanwhile). A named
        // read of exactly its cache's scope (a node tier's own Node) waits: that load is the
        // read, and passed through as well it would cost the apiserver twice.
        if !live.is_synced()
            && !live.has_loaded()
            && self.scope.name().is_some()
            && live.scope().name().is_none()
        {
            let labels = [live.label(), encoding.as_str(), "named"];
            state.metrics.freshness.sync_waits.with_label_values(&labels).inc();
            return None;
        }
        if whole && !live.is_synced() && same_scope() {
            if let Some(feeder) = live.take_feeder() {
                let consistent = self.opts.resource_version.is_none();
                self.attempt.feed(feeder, consistent, encoding.media_type());
                return None;
            }
        }
        Some(live)
    }

    /// How a cache started for this read loads: as the read would ask the apiserver directly
    /// (a watch — a WatchList — streams; a list pages, at resourceVersion=0 when it accepts any
    /// state, as an informer's first list does) — or, for a read of the `whole` of it, from the
    /// read's own answer.
    fn first_load(&self, whole: bool) -> FirstLoad {
        let rv = self.opts.resource_version.as_deref();
        match (self.opts.watch, rv) {
            (true, _) => FirstLoad::Stream,
            (false, _) if whole => FirstLoad::Fed { any_state: rv.is_some() },
            (false, Some("0")) => FirstLoad::PagedAnyState,
            (false, _) => FirstLoad::Paged,
        }
    }
}

/// One attempt to answer a read from the cache: how node mode reviews it (`auth::gate`), and
/// what it decided besides the answer — that the upstream's review refused it, or that its answer
/// passed through is to feed a cold cache's first load.
#[derive(Default)]
pub struct Attempt {
    /// A remembered denial is asked again rather than taken (a retry after a refusal).
    pub afresh: bool,
    /// Set when the upstream's review refused the read.
    denied: AtomicBool,
    /// Set when the read's answer is to feed the first load of the cache it started: what it
    /// feeds, whether it asked for the most recent state, and the cache's media type.
    feeder: Mutex<Option<(Feeder, bool, &'static str)>>,
}

impl Attempt {
    pub fn retry() -> Self {
        Attempt { afresh: true, ..Attempt::default() }
    }

    fn feed(&self, feeder: Feeder, consistent: bool, media_type: &'static str) {
        let feeding = Some((feeder, consistent, media_type));
        *self.feeder.lock().unwrap_or_else(|p| p.into_inner()) = feeding;
    }

    /// What the read's answer feeds, if anything (`live::reflector::fed`).
    pub fn take_feeder(&self) -> Option<(Feeder, bool, &'static str)> {
        self.feeder.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub fn deny(&self) {
        self.denied.store(true, Ordering::Relaxed);
    }

    pub fn denied(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }
}
