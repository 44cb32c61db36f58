//! A cache resumed from the state its previous run left on disk (`live::disk`): after a
//! restart — a DaemonSet rollout, a rescheduled pod — kubeplex does not load its caches again
//! (a consistent load each, which a tier above must prove current: a freshness proof per
//! restarted node), it watches the upstream from the state's RV. Its clients, told that RV by
//! the last bookmark before the old process stopped, resume their watches
//! from it too, and nobody lists anything.
//!
//! The state is applied only once the upstream has accepted the watch from its RV (it has the
//! history from there, so the state at that RV and the events after it are the upstream's):
//! as a load not older than that RV, consistent for no read ([`Feed::LoadStarted`] with
//! `consistent: false`, then [`Feed::Loaded`]). Until then readers wait, as for any first
//! load. If the upstream has no history from there (410), a load not older than the RV
//! follows; if it refuses the watch, the state is dropped and the cache loads as usual; if it
//! cannot be reached, the state stands by as after any failed first load (served until the
//! upstream answers: `live::disk`), and the cache loads once it does.

use std::sync::atomic::Ordering;

use super::{ReflectError, Reflector, State};
use crate::live::disk::StandBy;
use crate::live::feed::Feed;

impl<F: Fn(Feed) + Send + Sync> Reflector<F> {
    /// Watches from `state`'s RV first, and applies the state once the upstream accepts that
    /// watch (module documentation).
    pub fn resume_from(mut self, state: StandBy) -> Self {
        let rv =
            state.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|s| s.resource_version);
        if let Some(rv) = rv.filter(|rv| *rv > 0) {
            self.resume = Some((rv, state));
        }
        self
    }

    /// Where [`Reflector::run`] starts when resuming: a watch from the state's RV. Its loads
    /// after that are consistent.
    pub(super) fn resume_state(&self) -> Option<State> {
        let (rv, _) = self.resume.as_ref()?;
        self.listed.store(true, Ordering::Release);
        self.resuming.store(true, Ordering::Release);
        Some(State::Watch { rv: *rv })
    }

    /// The upstream accepted the watch from the state's RV: the state is the cache's, as a
    /// load not older than that RV.
    pub(super) fn apply_resumed_state(&self) {
        if !self.resuming.swap(false, Ordering::AcqRel) {
            return;
        }
        let Some((_, slot)) = &self.resume else { return };
        let Some(state) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        tracing::info!(resource = %self.describe, rv = state.resource_version, "resumed from the state on disk");
        self.load_started(false);
        (self.feed)(Feed::Loaded {
            objects: state.objects,
            rv: state.resource_version,
            whole: true,
        });
    }

    /// The watch from the state's RV failed before the upstream answered it: what comes next
    /// (module documentation).
    pub(super) fn resume_failed(&self, e: &ReflectError, rv: u64, failures: u32) -> State {
        self.resuming.store(false, Ordering::Release);
        if matches!(e, ReflectError::Gone) {
            // The stand-by state stays for the load that follows, should that one not reach
            // the upstream.
            return self.relist_after_gone(rv);
        }
        tracing::info!(resource = %self.describe, error = %e, "cannot resume from the state on disk; loading");
        // An unreachable upstream brings the stand-by state into service; a refusal drops it.
        (self.feed)(Feed::LoadFailed { unreachable: e.unreachable(), forbidden: e.forbidden() });
        self.wait_after(e, failures, self.relist())
    }
}
