//! The caches' own background work, for as long as they run: idle caches stopped, refused ones
//! tried again, the memory budget enforced against growth by events, and (with a state
//! directory) every cache's state written to disk.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::budget::ENFORCE_EVERY;
use super::Caches;

/// How often idle caches are looked for, at most (more often for short idle timeouts).
const REAP_EVERY: Duration = Duration::from_secs(30);

impl Caches {
    /// Starts the caches' maintenance loops in `tasks`: they end when `tasks` is dropped or
    /// aborted.
    pub fn maintain(self: &Arc<Self>, tasks: &mut JoinSet<()>) {
        let reap_every =
            REAP_EVERY.min(self.config.idle_timeout / 2).max(Duration::from_millis(100));
        let reaper = self.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(reap_every);
            loop {
                tick.tick().await;
                reaper.reap_idle();
                reaper.retry_refused();
            }
        });
        if self.has_budget() {
            let budget = self.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(ENFORCE_EVERY);
                loop {
                    tick.tick().await;
                    budget.enforce_budget();
                }
            });
        }
        if let Some(disk) = self.disk.clone() {
            let caches = self.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(disk.interval());
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let (disk, running) = (disk.clone(), caches.running());
                    let _ = tokio::task::spawn_blocking(move || disk.write_all(&running)).await;
                }
            });
        }
    }
}
