//! The bookmark probe (step 2 of the proof, `live::freshness`): a WATCH from the cache's RV
//! with `allowWatchBookmarks=true&timeoutSeconds=3`, metadata only, whose pre-timeout BOOKMARK
//! at R′ — once the cache holds every event the probe saw before it — marks the cache at R′.
//! One runs per cache at a time, shared by every read waiting on it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::lists::{request, ACCEPT_METADATA_WATCH};
use super::outcome::{NotProven, Proof};
use super::{Freshness, Shared};
use crate::cache::resource::ResourceCache;
use crate::wire::meta;

/// `timeoutSeconds` of a probe watch: its bookmark is due 2 s before the deadline, so 3 is the
/// shortest that gets one (1–2 s in).
const PROBE_TIMEOUT_SECONDS: u64 = 3;
/// How long past its deadline a probe's stream may stay silent before it is abandoned.
const PROBE_MARGIN: Duration = Duration::from_secs(2);
/// A probe that could not start (a relist under way) is retried after this long.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// Largest line of a probe's watch (a PartialObjectMetadata event).
const MAX_PROBE_LINE: usize = 16 << 20;

impl Freshness {
    /// The cache not at `rv` yet: joins the probe under way, or starts one if
    /// `probe_worth_it()`, until the cache is there or `deadline`.
    pub(super) async fn probe_until(
        self: &Arc<Self>,
        cache: &ResourceCache,
        rv: u64,
        deadline: Instant,
        probe_worth_it: impl FnOnce() -> bool,
    ) -> Result<Proof, NotProven> {
        if !self.probing() && !probe_worth_it() {
            return Err(NotProven::Declined);
        }
        // The probe's bookmark carries this resource's watch-cache RV: the apiserver must have
        // asked etcd for its progress to `rv` first.
        let progressed = self.clock.progress(&self.resource, rv, || self.fetch());
        if !matches!(tokio::time::timeout_at(deadline, progressed).await, Ok(true)) {
            return Err(NotProven::Timeout);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NotProven::Timeout);
            }
            let mut probe = self.probe();
            let probe_done = async move {
                probe.wait_for(Option::is_some).await.ok().is_some_and(|m| *m == Some(true))
            };
            tokio::select! {
                reached = cache.wait_for(rv, left) => {
                    let by_probe = self.probed_to.load(Ordering::Acquire) >= rv;
                    return match reached {
                        Ok(_) if by_probe => Ok(Proof::Probe),
                        Ok(_) => Ok(Proof::Watch),
                        Err(_) => Err(NotProven::Timeout),
                    };
                }
                moved = probe_done => {
                    if cache.resource_version() >= rv {
                        return Ok(Proof::Probe);
                    }
                    // A probe that moved nothing (a relist under way, an upstream error) is
                    // not retried at once; one that moved the cache short of `rv` (it began
                    // before `rv` was current) is.
                    if !moved {
                        tokio::time::sleep_until(deadline.min(Instant::now() + RETRY_AFTER)).await;
                    }
                }
            }
        }
    }

    /// Whether a probe is under way (joining it costs the upstream nothing more).
    fn probing(&self) -> bool {
        let slot = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().is_some_and(|rx| rx.borrow().is_none())
    }

    /// The probe under way, or a new one.
    fn probe(self: &Arc<Self>) -> Shared<bool> {
        let mut slot = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = &*slot {
            if rx.borrow().is_none() {
                return rx.clone();
            }
        }
        let (tx, rx) = watch::channel(None);
        *slot = Some(rx.clone());
        let this = self.clone();
        tokio::spawn(async move {
            let moved = this.run_probe().await;
            let _ = tx.send(Some(moved));
        });
        rx
    }

    /// One probe watch; whether it moved the cache.
    async fn run_probe(&self) -> bool {
        let Some(cache) = self.cache.upgrade() else { return false };
        let Some((epoch, from)) = cache.probe_start() else { return false };
        self.calls.proof_watch.inc();
        // Scoped as the cache's own watch is: it must see exactly the events the cache will.
        let path = format!(
            "{}?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds={PROBE_TIMEOUT_SECONDS}{}",
            cache.collection_path(),
            cache.selector_query()
        );
        let deadline = Instant::now() + Duration::from_secs(PROBE_TIMEOUT_SECONDS) + PROBE_MARGIN;
        let Some(req) = request(&path, ACCEPT_METADATA_WATCH) else { return false };
        let resp = match tokio::time::timeout_at(deadline, self.upstream.send(req)).await {
            Ok(Ok(resp)) if resp.status() == StatusCode::OK => resp,
            _ => return false,
        };
        let mut body = resp.into_body();
        let mut lines = BytesMut::new();
        // Every event of the resource after `from` the probe has seen goes up to here.
        let mut events_through = from;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                _ => return false,
            };
            let Ok(data) = frame.into_data() else { continue };
            lines.extend_from_slice(&data);
            while let Some(pos) = lines.iter().position(|b| *b == b'\n') {
                let line = lines.split_to(pos + 1);
                if line.len() <= 1 {
                    continue;
                }
                let Ok(event) = meta::parse_watch_event_json(&line) else { return false };
                let rv = match event.event_type.as_ref() {
                    "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" => {
                        match meta::object_meta_json(event.object)
                            .ok()
                            .and_then(|m| m.resource_version.parse::<u64>().ok())
                        {
                            Some(rv) => rv,
                            None => return false,
                        }
                    }
                    // ERROR (410: the cache's RV is compacted away upstream; its own watch will
                    // relist) or anything unknown: no proof.
                    _ => return false,
                };
                if event.event_type != "BOOKMARK" {
                    events_through = events_through.max(rv);
                    continue;
                }
                drop(body);
                // The cache's own watch carries the same events; once it has them all, the
                // bookmark's RV holds for it too.
                let left = deadline.saturating_duration_since(Instant::now());
                if cache.wait_for(events_through, left).await.is_err() {
                    return false;
                }
                self.probed_to.fetch_max(rv, Ordering::AcqRel);
                return cache.mark_progress(epoch, events_through, rv);
            }
            if lines.len() > MAX_PROBE_LINE {
                return false;
            }
        }
    }
}
