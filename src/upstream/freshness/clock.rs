//! The upstream's current RV, shared by every cache's freshness proofs.
//!
//! RVs are the cluster's (etcd's revision), not a resource's: one consistent one-item list of
//! any resource tells every cache how far the upstream is. So the consistent reads that arrive
//! together — a node's agents starting, whatever resources they read — share one such list
//! ([`Clock::current_rv`]): a list sent after a read arrived answers it, whichever cache asked
//! for it; one is in flight at a time, the next gathers every read that arrives meanwhile, and
//! a list waits [`GATHER`] before it is sent, so that the reads that arrive together (a few
//! milliseconds apart, as a node agent's informers start) go with it.
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
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// A result every waiter of one single-flight list gets: `None` while it runs.
type Shared<T> = watch::Receiver<Option<T>>;

/// How long a shared list waits for more reads to join it before it is sent: a small part of a
/// proof's time (a list takes milliseconds; a probe ~1.5 s), enough for the reads a client
/// starts together.
pub const GATHER: Duration = Duration::from_millis(20);

/// Sends one consistent one-item list of a collection path; its RV, or `None` when it failed.
pub type Fetch = Box<dyn FnOnce() -> futures_util::future::BoxFuture<'static, Option<u64>> + Send>;

/// The upstream's current RV, learned by consistent one-item lists and shared by every cache.
#[derive(Default)]
pub struct Clock {
    /// The list that readers can still join: its request has not been sent.
    next: Mutex<Option<Shared<Option<u64>>>>,
    /// The last shared list that answered: when its request was sent, and its RV.
    last: Mutex<Option<(Instant, u64)>>,
    /// Held while a shared list is in flight: one at a time.
    fetching: tokio::sync::Mutex<()>,
    /// Per resource (`group/resource`), the highest RV a consistent list of it returned: the
    /// apiserver's watch cache of that resource has reached it.
    progressed: Mutex<HashMap<String, u64>>,
    /// Per resource, the list of its own under way ([`Clock::progress`]).
    own: Mutex<HashMap<String, Shared<Option<u64>>>>,
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
        if let Some((sent, rv)) = *self.last.lock().unwrap_or_else(|p| p.into_inner()) {
            if sent >= arrived {
                return Some(rv);
            }
        }
        let mut rx = {
            let mut slot = self.next.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    *slot = Some(rx.clone());
                    let this = self.clone();
                    let resource = resource.to_string();
                    tokio::spawn(async move {
                        let _turn = this.fetching.lock().await;
                        tokio::time::sleep(GATHER).await;
                        // From here on the request is (about to be) sent: a read arriving now
                        // needs the next.
                        this.next.lock().unwrap_or_else(|p| p.into_inner()).take();
                        let sent = Instant::now();
                        let rv = fetch().await;
                        if let Some(rv) = rv {
                            this.progressed_to(&resource, rv);
                            let mut last = this.last.lock().unwrap_or_else(|p| p.into_inner());
                            if last.is_none_or(|(at, _)| at < sent) {
                                *last = Some((sent, rv));
                            }
                        }
                        let _ = tx.send(Some(rv));
                    });
                    rx
                }
            }
        };
        let got = rx.wait_for(Option::is_some).await.ok()?;
        (*got).flatten()
    }

    /// The RV of the last shared list, if it was sent at or after `arrived`: the upstream's RV
    /// for a read that arrived then, with no request.
    pub fn sent_since(&self, arrived: Instant) -> Option<u64> {
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.filter(|(sent, _)| *sent >= arrived).map(|(_, rv)| rv)
    }

    /// A consistent list of `resource` sent at `sent` returned `rv` (a proof of its own, of one
    /// object): the newest sample for reads that arrived before it, and the resource's watch
    /// cache has reached `rv`.
    pub fn sampled(&self, resource: &str, sent: Instant, rv: u64) {
        self.progressed_to(resource, rv);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|(at, _)| at < sent) {
            *last = Some((sent, rv));
        }
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
