//! How an emulated node reaches its upstream: directly, one connection per agent; through the
//! pool, its node tier's `upstreams` — its own replica first, the others after it (rotated by
//! the node's index, as a Service spreads connections) — moved as kubeplex's failover moves
//! (`src/upstream/failover.rs`, docs/operations.md "Tiers"): away to the next one when the
//! active one cannot be reached, and back to the first once it accepts a TCP connection again,
//! tried every 3–7 s at random so that the nodes do not return in the same instant. A move
//! tells the node's watchers ([`Link::moves`]), which resume on the new upstream from the
//! newest RV they saw.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::target::Target;

/// The most move-back checks a link makes in a run (a day at one per 3 s).
const MAX_CHECKS: u32 = 28_800;

/// Moves of every node's link in a run.
#[derive(Default)]
pub struct Moves {
    /// Away from an upstream that could not be reached.
    pub away: AtomicU64,
    /// Back to the first upstream after its return.
    pub back: AtomicU64,
}

/// One node's upstreams, in the order it tries them.
pub struct Link {
    targets: Vec<Arc<Target>>,
    active: AtomicUsize,
    moved: watch::Sender<u64>,
    counts: Arc<Moves>,
}

impl Link {
    /// `targets` in order: the first is where the node belongs.
    pub fn new(targets: Vec<Arc<Target>>, counts: Arc<Moves>) -> Arc<Link> {
        assert!(!targets.is_empty(), "a link needs an upstream");
        Arc::new(Link { targets, active: AtomicUsize::new(0), moved: watch::channel(0).0, counts })
    }

    /// The upstream requests go to now, and its index.
    pub fn current(&self) -> (usize, Arc<Target>) {
        let i = self.active.load(Ordering::Acquire) % self.targets.len();
        (i, self.targets[i].clone())
    }

    /// On the first upstream.
    pub fn home(&self) -> bool {
        self.active.load(Ordering::Acquire) == 0
    }

    /// Told on every move.
    pub fn moves(&self) -> watch::Receiver<u64> {
        self.moved.subscribe()
    }

    /// Upstream `which` could not be reached: if it is still the active one, the next takes
    /// over. Whether another one is active now (the request may be sent again there at once,
    /// as kubeplex sends a body-less request that found no connection).
    pub fn failed(&self, which: usize) -> bool {
        if self.targets.len() < 2 {
            return false;
        }
        let next = (which + 1) % self.targets.len();
        if self.active.compare_exchange(which, next, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            self.counts.away.fetch_add(1, Ordering::Relaxed);
            self.moved.send_modify(|n| *n += 1);
        }
        self.active.load(Ordering::Acquire) != which
    }

    /// Until dropped: while another upstream is active, a TCP connection to the first every
    /// 3–7 s; once it accepts, the first is active again.
    pub async fn move_back(self: Arc<Self>) {
        if self.targets.len() < 2 {
            return;
        }
        let Some(addr) = authority(&self.targets[0].url) else { return };
        for _ in 0..MAX_CHECKS {
            let wait = rand::random_range(3_000..7_000u64);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            if self.home() {
                continue;
            }
            let connect = tokio::net::TcpStream::connect(&addr);
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), connect).await {
                self.active.store(0, Ordering::Release);
                self.counts.back.fetch_add(1, Ordering::Relaxed);
                self.moved.send_modify(|n| *n += 1);
            }
        }
    }
}

/// `host:port` of an `https://host:port` URL.
fn authority(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    (!authority.is_empty()).then(|| authority.to_string())
}

#[cfg(test)]
mod tests;
