//! A read the cache may answer, as the cache paths (`cached`, `watch`) take it, and node mode's
//! gate in front of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::request::{Class, Verb};
use super::state::ProxyState;
use crate::auth::authorize::read_attributes;
use crate::auth::{NodeAuth, UserInfo};
use crate::cache::{Encoding, Scope};
use crate::upstream::caches::Live;
use crate::upstream::reflector::FirstLoad;
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
}

impl CachedRead<'_> {
    /// The cache that answers this read in `encoding` (`Caches::for_read`: a running one whose
    /// scope contains it, or one started for it), once the client may read it (node mode).
    /// `None`: the read passes through — and no review is asked for a read that would pass
    /// through anyway (a named object no running cache holds).
    pub async fn cache(&self, state: &ProxyState, encoding: Encoding) -> Option<Arc<Live>> {
        let caches = &state.caches;
        if self.scope.name().is_some() && !caches.holds_named(self.info, encoding, self.scope) {
            return None;
        }
        if !self.gate.open().await {
            return None;
        }
        caches.for_read(self.info, encoding, self.scope, self.first_load())
    }

    /// How a cache started for this read loads: as the read would ask the apiserver directly
    /// (a watch — a WatchList — streams; a list pages, at resourceVersion=0 when it accepts any
    /// state, as an informer's first list does).
    fn first_load(&self) -> FirstLoad {
        match (self.opts.watch, self.opts.resource_version.as_deref()) {
            (true, _) => FirstLoad::Stream,
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
    pub review: &'a Review,
}

impl Gate<'_> {
    pub async fn open(&self) -> bool {
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
                let allowed = if watch || self.review.afresh {
                    node.may_watch_cached(user, &attributes).await
                } else {
                    node.may_read_cached(user, &attributes).await
                };
                if !allowed {
                    self.review.deny();
                }
                allowed
            }
        }
    }
}

/// How a read from the cache is reviewed in node mode (`read::Gate`).
#[derive(Default)]
pub struct Review {
    /// A remembered denial is asked again rather than taken (a retry after a refusal).
    pub afresh: bool,
    /// Set when the upstream's review refused the read.
    denied: AtomicBool,
}

impl Review {
    pub fn retry() -> Self {
        Review { afresh: true, denied: AtomicBool::new(false) }
    }

    pub fn deny(&self) {
        self.denied.store(true, Ordering::Relaxed);
    }

    pub fn denied(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }
}
