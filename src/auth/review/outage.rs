//! The upstream's outages as the reviews see them: when one began (the last moment kubeplex
//! knew the cluster's policy), whether a last answer may stand in for a review, and how often
//! a review is tried while the upstream cannot be reached.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::policy::ReviewConfig;
use super::wire::ReviewError;

/// While the upstream is unreachable, how often a review is tried again (the other reads in
/// between use the last answers at once).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// An outage of the upstream as the reviews see it.
#[derive(Clone, Copy)]
struct Outage {
    /// When the upstream last answered anything before it: the policy the last answers
    /// reflect. `None`: it never answered since kubeplex started.
    began: Option<Instant>,
    /// When a review was last tried.
    tried: Instant,
}

/// Whether the upstream answers reviews, and since when it has not.
#[derive(Default)]
pub struct Outages {
    outage: Mutex<Option<Outage>>,
    /// Whether `outage` is `Some`: read without the lock by every decision.
    in_outage: AtomicBool,
    /// When the upstream last answered before the restart whose saved answers were imported.
    restored_answer: Mutex<Option<Instant>>,
}

impl Outages {
    pub fn in_outage(&self) -> bool {
        self.in_outage.load(Ordering::Acquire)
    }

    /// In an outage where a review was tried less than [`RETRY_INTERVAL`] ago: when the
    /// upstream last answered (no review is sent). Otherwise `None`, and a review may be tried
    /// (the next [`RETRY_INTERVAL`] of reads will not).
    pub fn skip_review(&self) -> Option<Option<Instant>> {
        if !self.in_outage() {
            return None;
        }
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        let o = outage.as_mut()?;
        if o.tried.elapsed() < RETRY_INTERVAL {
            return Some(o.began);
        }
        o.tried = Instant::now();
        None
    }

    /// After a failed review: if the upstream was unreachable, when it last answered.
    pub fn began(&self, e: &ReviewError) -> Option<Instant> {
        if !e.unreachable() {
            return None;
        }
        let outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        outage.and_then(|o| o.began)
    }

    /// Records how a review request went: unreachable (the outage begins or goes on) or
    /// answered (it ends). `last_answered`: when the upstream last answered anything, as the
    /// upstream client saw it.
    pub fn reached(&self, answered: bool, last_answered: Option<Instant>, config: &ReviewConfig) {
        if answered && !self.in_outage() {
            return;
        }
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        match (answered, outage.as_mut()) {
            (true, Some(_)) => {
                *outage = None;
                self.in_outage.store(false, Ordering::Release);
                tracing::info!("reviews reach the upstream again");
            }
            (true, None) => {}
            (false, Some(o)) => o.tried = Instant::now(),
            (false, None) => {
                let began = self.last_answered(last_answered);
                *outage = Some(Outage { began, tried: Instant::now() });
                self.in_outage.store(true, Ordering::Release);
                tracing::warn!(
                    last_answered_seconds_ago = began.map(|b| b.elapsed().as_secs()),
                    grace_seconds = config.outage_grace.as_secs(),
                    "the upstream cannot be reached for reviews; using the answers that were current when it last answered"
                );
            }
        }
    }

    /// When the upstream last answered: in this process (`upstream`, as the upstream client
    /// saw it), or before the restart whose answers were imported.
    pub fn last_answered(&self, upstream: Option<Instant>) -> Option<Instant> {
        let restored = *self.restored_answer.lock().unwrap_or_else(PoisonError::into_inner);
        upstream.or(restored)
    }

    /// Answers saved before a restart were taken in: the upstream last answered at `answered`.
    pub fn restored(&self, answered: Instant) {
        *self.restored_answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answered);
        // An outage already under way that had no answer to date from now has this one.
        if let Some(o) = self.outage.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            o.began = o.began.or(Some(answered));
        }
    }
}

/// Whether a last answer valid until `expires_at` may stand in for a review in an outage
/// that `began` (see the module's documentation).
pub fn usable(config: &ReviewConfig, expires_at: Instant, began: Option<Instant>) -> bool {
    let Some(began) = began else { return false };
    !config.outage_grace.is_zero()
        && expires_at + config.outage_recent >= began
        && began.elapsed() <= config.outage_grace
}
