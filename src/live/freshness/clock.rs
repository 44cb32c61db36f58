//! The upstream's current RV, shared by every cache's freshness proofs.
//!
//! RVs are the cluster's (etcd's revision), not a resource's: one consistent one-item list of
//! any resource tells every cache how far the upstream is. So the consistent reads that arrive
//! together — a node's agents starting, whatever resources they read — share one such list
//! ([`Clock::current_rv`]): a list sent after a read arrived answers it, whichever cache asked
//! for it; one is in flight at a time, the next gathers every read that arrives meanwhile, and
//! a list waits [`super::gather::GATHER`] before it is sent (longer in a burst), so that the
//! reads that arrive together (a few milliseconds apart, as a node agent's informers start) go
//! with it.
//!
//! What one list does *not* do is make the apiserver's watch cache of every resource current:
//! the apiserver asks etcd for progress for the resource it lists, and a quiet resource's watch
//! cache learns the cluster's RV only from that (or etcd's periodic progress notifications,
//! every 10 minutes). A cache whose own watch does not reach the RV needs a bookmark probe, and
//! the probe's bookmark carries its resource's watch-cache RV; so before a probe the resource is
//! brought there by a list of its own ([`Clock::progress`]) — unless a list of that resource
//! already did, which the clock remembers per resource.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::BoxFuture;

use tokio::sync::watch;

use super::gather::Gathered;

/// A result every waiter of one single-flight list gets: `None` while it runs.
type Shared<T> = watch::Receiver<Option<T>>;

/// Sends one consistent one-item list of a collection path; its RV, or `None` when it failed.
pub type Fetch = Box<dyn FnOnce() -> futures_util::future::BoxFuture<'static, Option<u64>> + Send>;

/// The upstream's current RV, learned by consistent one-item lists and shared by every cache.
#[derive(Default)]
pub struct Clock {
    /// The shared lists: one in flight at a time, and the last one's RV.
    lists: Arc<Gathered<u64>>,
    /// Per resource (`group/resource`), the highest RV a consistent list of it returned: the
    /// apiserver's watch cache of that resource has reached it.
    progressed: Mutex<HashMap<String, u64>>,
    /// Per resource, the list of its own under way ([`Clock::progress`]).
    own: Mutex<HashMap<String, Shared<Option<u64>>>>,
    /// When the upstream last answered a proof's list 429, 503 or 504, or not in time,
    /// whichever cache's it was: its priority and fairness limits kubeplex's user, not one
    /// cache ([`Clock::overloaded_within`]).
    overloaded_at: Mutex<Option<tokio::time::Instant>>,
}

impl Clock {
    pub fn new() -> Arc<Self> {
        Arc::new(Clock::default())
    }

    /// The upstream's current RV, from a consistent list sent after a read arrived at
    /// `arrived`: the last one if it was, else the one not sent yet if there is one (of whichever
    /// resource), else a new one of `resource` made by `fetch`. `None` when it failed.
    pub async fn current_rv(
        self: &Arc<Self>,
        resource: &str,
        arrived: Instant,
        fetch: Fetch,
    ) -> Option<u64> {
        let this = self.clone();
        let resource = resource.to_string();
        let fetch = move |_sent| -> BoxFuture<'static, Option<u64>> {
            Box::pin(async move {
                let rv = fetch().await;
                if let Some(rv) = rv {
                    this.progressed_to(&resource, rv);
                }
                rv
            })
        };
        self.lists.get(arrived, fetch).await
    }

    /// The upstream answered a proof's list 429, 503 or 504, or not in time: overloaded.
    pub fn overloaded(&self) {
        let now = tokio::time::Instant::now();
        *self.overloaded_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    }

    /// Whether the upstream was overloaded within `memory`.
    pub fn overloaded_within(&self, memory: std::time::Duration) -> bool {
        let at = *self.overloaded_at.lock().unwrap_or_else(|p| p.into_inner());
        at.is_some_and(|t| t.elapsed() < memory)
    }

    /// The RV of the last shared list, if it was sent at or after `arrived`: the upstream's RV
    /// for a read that arrived then, with no request.
    pub fn sent_since(&self, arrived: Instant) -> Option<u64> {
        self.lists.since(arrived)
    }

    /// A consistent list of `resource` sent at `sent` returned `rv` (a proof of its own, of one
    /// object): the newest sample for reads that arrived before it, and the resource's watch
    /// cache has reached `rv`.
    pub fn sampled(&self, resource: &str, sent: Instant, rv: u64) {
        self.progressed_to(resource, rv);
        self.lists.record(sent, rv);
    }

    /// Makes sure the apiserver's watch cache of `resource` has reached `rv`: at once when a
    /// consistent list of it already returned `rv` or later; else by a list of its own (one at a
    /// time per resource, joined by every cache of it), made by `fetch`. Whether it got there.
    pub async fn progress(
        self: &Arc<Self>,
        resource: &str,
        rv: u64,
        fetch: impl Fn() -> Fetch,
    ) -> bool {
        // A list of this resource already in flight may have been sent before `rv` was
        // current: then one more, sent now.
        for _ in 0..2 {
            if self.progressed(resource) >= rv {
                return true;
            }
            let mut rx = {
                let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
                match own.get(resource).filter(|rx| rx.borrow().is_none()) {
                    Some(rx) => rx.clone(),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        own.insert(resource.to_string(), rx.clone());
                        let this = self.clone();
                        let resource = resource.to_string();
                        let fetch = fetch();
                        tokio::spawn(async move {
                            let got = fetch().await;
                            if let Some(got) = got {
                                this.progressed_to(&resource, got);
                            }
                            let _ = tx.send(Some(got));
                        });
                        rx
                    }
                }
            };
            let _ = rx.wait_for(Option::is_some).await;
        }
        self.progressed(resource) >= rv
    }

    /// The highest RV a consistent list of `resource` returned.
    pub fn progressed(&self, resource: &str) -> u64 {
        let progressed = self.progressed.lock().unwrap_or_else(|p| p.into_inner());
        progressed.get(resource).copied().unwrap_or(0)
    }

    fn progressed_to(&self, resource: &str, rv: u64) {
        let mut progressed = self.progressed.lock().unwrap_or_else(|p| p.into_inner());
        let at = progressed.entry(resource.to_string()).or_insert(0);
        *at = (*at).max(rv);
    }
}

#[cfg(test)]
mod tests;
