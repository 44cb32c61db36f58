//! A read the cache may answer, as the cache paths (`cached`, `watch`) take it, and node mode's
//! gate in front of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::request::{Class, Verb};
use super::state::ProxyState;
use crate::auth::authorize::read_attributes;
use crate::auth::{NodeAuth, UserInfo};
use crate::cache::{Encoding, Scope};
use crate::live::caches::Live;
use crate::live::reflector::fed::Feeder;
use crate::live::reflector::FirstLoad;
use crate::wire::request::{ListOptions, ResourcePath};
use crate::wire::resource::ResourceInfo;

/// A read the cache may answer, as the cache paths (`cached`, `watch`) take it.
pub struct CachedRead<'a> {
    pub info: &'a Arc<ResourceInfo>,
    pub rp: &'a ResourcePath,
    pub opts: &'a ListOptions,
    /// What it can see: the cache that answers must contain it.
    pub scope: &'a Scope,
    pub gate: &'a Gate<'a>,
    /// What this attempt to answer it decided besides the answer.
    pub attempt: &'a Attempt,
}

impl CachedRead<'_> {
    /// The cache that answers this read in `encoding` (`Caches::for_read`: a running one whose
    /// scope contains it, or one started for it), once the client may read it (node mode).
    /// `None`: the read passes through — and no review is asked for a read that would pass
    /// through anyway (a named object no running cache holds).
    ///
    /// `whole`: the read asks for what a cache of its scope loads — every object of it, in the
    /// cache's encoding, in one unpaged list. A cache it starts then takes its first load from
    /// the read's own answer (`live::reflector::fed`): the read is passed through, with what
    /// feeds the cache noted in its [`Attempt`], and `None` is returned.
    pub async fn cache(
        &self,
        state: &ProxyState,
        encoding: Encoding,
        whole: bool,
    ) -> Option<Arc<Live>> {
        let caches = &state.caches;
        if self.scope.name().is_some() && !caches.holds_named(self.info, encoding, self.scope) {
            return None;
        }
        if !self.gate.open(self.attempt).await {
            return None;
        }
        let live = caches.for_read(self.info, encoding, self.scope, self.first_load(whole))?;
        let same_scope = || live.scope().contains(self.scope) && self.scope.contains(live.scope());
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

/// Node mode's authorization of a read from the cache (`NodeAuth::may_read_cached`; for a
/// watch, and for a read sent again after a refusal, `may_watch_cached`, which asks a
/// remembered denial again): only a grant opens it; a
/// denial or a failed review sends the read upstream, where the apiserver answers it — a
/// refusal included — as it would without kubeplex.
pub struct Gate<'a> {
    pub node: Option<(&'a NodeAuth, UserInfo)>,
    /// The request's headers when they ask to act as someone else: the read is then that
    /// user's, once the upstream agrees the client may impersonate them (the apiserver's
    /// impersonation filter: `impersonate` on each part) — as a node tier vouches for its
    /// kubelet at a pool tier. A refusal, or a failed check, keeps the gate shut.
    pub impersonation: Option<&'a http::HeaderMap>,
    pub class: &'a Class,
    pub rp: &'a ResourcePath,
}

impl Gate<'_> {
    /// Whether the read may be answered from the cache; a refusal by the upstream's review is
    /// noted in `attempt`.
    pub async fn open(&self, attempt: &Attempt) -> bool {
        match &self.node {
            None => true,
            Some((node, client)) => {
                let target;
                let user = match self.impersonation {
                    Some(headers) => match node.impersonation(client, headers).await {
                        Ok(Some(t)) => {
                            target = t;
                            &target
                        }
                        _ => return false,
                    },
                    None => client,
                };
                let watch = self.class.verb == Verb::Watch;
                let attributes = read_attributes(self.rp, self.class.options.as_ref(), watch);
                let allowed = if watch || attempt.afresh {
                    node.may_watch_cached(user, &attributes).await
                } else {
                    node.may_read_cached(user, &attributes).await
                };
                if !allowed {
                    attempt.deny();
                }
                allowed
            }
        }
    }
}

/// One attempt to answer a read from the cache: how node mode reviews it ([`Gate`]), and what
/// it decided besides the answer — that the upstream's review refused it, or that its answer
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
