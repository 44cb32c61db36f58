//! Which of the upstreams requests go to: the first of an ordered list that can be reached (a
//! pool tier's Service, then the apiserver), and back to an earlier one once it can be
//! reached again (docs/operations.md, "Tiers").
//!
//! - A request that cannot reach the active upstream (no connection: refused, reset before
//!   an answer, timed out) moves the active one to the next in the list; a body-less request is
//!   sent again there at once (`Upstream::send`). An answer of any status — a 503 included —
//!   is the upstream's word and moves nothing: a pool whose own upstream is down would
//!   otherwise send every node to the apiserver at the moment it can least take them.
//! - While an earlier upstream is not the active one, a probe connects to it (TCP, no request:
//!   it costs the apiserver nothing) every few seconds, jittered so that many nodes do not
//!   come back in the same instant; once one accepts, it is active again. Watches opened on a
//!   later upstream see the change ([`Failover::subscribe`]) and move back, resuming from their
//!   resourceVersion — RVs are the apiserver's at every tier.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use rand::Rng;
use tokio::sync::watch;

/// How often an earlier upstream is tried while a later one is active: between these, at
/// random. Well within the 30 s in which node tiers must be back on a returned pool.
const PROBE_EVERY: (Duration, Duration) = (Duration::from_secs(3), Duration::from_secs(7));
/// How long a probe's connection attempt may take.
const PROBE_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The upstream a response came from: its position in the list (0: the most preferred). Set
/// on every response `Upstream` returns, so a watch knows whether it runs on a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy(pub usize);

/// The active upstream and the way back to earlier ones.
pub(super) struct Failover {
    /// `host:port` of each upstream, in order, for the probe.
    addresses: Vec<String>,
    /// Each upstream's URL, for logs and metrics.
    urls: Vec<String>,
    active: watch::Sender<usize>,
    probing: AtomicBool,
    /// Switches away from an unreachable upstream, and back to an earlier one.
    away: AtomicU64,
    back: AtomicU64,
}

impl Failover {
    /// `upstreams`: (URL, `host:port`) of each, in order of preference.
    pub(super) fn new(upstreams: Vec<(String, String)>) -> Self {
        let (urls, addresses): (Vec<_>, Vec<_>) = upstreams.into_iter().unzip();
        Failover {
            addresses,
            urls,
            active: watch::channel(0).0,
            probing: AtomicBool::new(false),
            away: AtomicU64::new(0),
            back: AtomicU64::new(0),
        }
    }

    /// Registers `kubeplex_upstream_active` and `kubeplex_upstream_switches_total`, read from
    /// this state at each scrape.
    pub(super) fn register(self: &Arc<Self>, registry: &Registry) -> Result<(), prometheus::Error> {
        let active = IntGaugeVec::new(
            Opts::new(
                "kubeplex_upstream_active",
                "1 for the upstream requests go to now, 0 for the others (upstreams: a pool tier first, the apiserver last).",
            ),
            &["server"],
        )?;
        let switches = IntCounterVec::new(
            Opts::new(
                "kubeplex_upstream_switches_total",
                "Changes of the active upstream: away (the active one could not be reached; the next took over) and back (an earlier one could be reached again).",
            ),
            &["direction"],
        )?;
        let descs = active.desc().into_iter().chain(switches.desc()).cloned().collect();
        registry.register(Box::new(Metrics {
            failover: Arc::downgrade(self),
            active,
            switches,
            descs,
        }))
    }

    /// The position of the upstream requests go to now.
    pub(super) fn active(&self) -> usize {
        *self.active.borrow()
    }

    /// The active upstream's position, as it changes.
    pub(super) fn subscribe(&self) -> watch::Receiver<usize> {
        self.active.subscribe()
    }

    pub(super) fn url(&self, at: usize) -> &str {
        &self.urls[at]
    }

    /// Upstream `at` could not be reached: if it is the active one and another follows it,
    /// the next one becomes active and the probe starts trying the earlier ones. Returns the
    /// position to use now.
    pub(super) fn unreachable(self: &Arc<Self>, at: usize, error: &dyn std::fmt::Display) -> usize {
        let next = at + 1;
        if next >= self.urls.len() {
            return at;
        }
        let moved = self.active.send_if_modified(|active| {
            if *active == at {
                *active = next;
                true
            } else {
                false
            }
        });
        if moved {
            tracing::warn!(from = %self.urls[at], to = %self.urls[next], %error, "upstream unreachable; using the next one");
            self.away.fetch_add(1, Ordering::Relaxed);
            self.start_probe();
        }
        self.active().max(next)
    }

    /// Starts the probe of the earlier upstreams unless it runs. It holds only a weak
    /// reference: it ends with the client, or once the first upstream is active again.
    fn start_probe(self: &Arc<Self>) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.probing.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(probe(Arc::downgrade(self)));
    }

    /// Tries the upstreams before the active one, first to last; the first that accepts a
    /// connection becomes active. Returns whether the first upstream is active.
    async fn probe_once(&self) -> bool {
        let active = self.active();
        for at in 0..active {
            if reachable(&self.addresses[at]).await {
                let moved = self.active.send_if_modified(|now| {
                    if *now > at {
                        *now = at;
                        true
                    } else {
                        false
                    }
                });
                if moved {
                    tracing::info!(from = %self.urls[active], to = %self.urls[at], "upstream reachable again; going back to it");
                    self.back.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
        }
        self.active() == 0
    }
}

/// The failover's series, set from its state when scraped.
struct Metrics {
    failover: Weak<Failover>,
    active: IntGaugeVec,
    switches: IntCounterVec,
    descs: Vec<Desc>,
}

impl Collector for Metrics {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(failover) = self.failover.upgrade() else { return Vec::new() };
        let active = failover.active();
        for (at, url) in failover.urls.iter().enumerate() {
            self.active.with_label_values(&[url]).set(i64::from(at == active));
        }
        for (direction, count) in [("away", &failover.away), ("back", &failover.back)] {
            let counter = self.switches.with_label_values(&[direction]);
            counter.inc_by(count.load(Ordering::Relaxed).saturating_sub(counter.get()));
        }
        self.active.collect().into_iter().chain(self.switches.collect()).collect()
    }
}

async fn probe(failover: Weak<Failover>) {
    loop {
        let pause = rand::rng().random_range(PROBE_EVERY.0..PROBE_EVERY.1);
        tokio::time::sleep(pause).await;
        let Some(failover) = failover.upgrade() else { return };
        if failover.probe_once().await {
            failover.probing.store(false, Ordering::Release);
            // Moved away again between the check and the store: probe on.
            if failover.active() == 0 || failover.probing.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }
}

/// Whether a TCP connection to `address` (`host:port`) can be made.
async fn reachable(address: &str) -> bool {
    matches!(
        tokio::time::timeout(PROBE_CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address)).await,
        Ok(Ok(_))
    )
}

/// `host:port` of a URL's authority, with the scheme's default port when it names none.
pub(super) fn address(authority: &http::uri::Authority, https: bool) -> String {
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let host = authority.host();
    format!("{host}:{port}")
}

#[cfg(test)]
mod tests;
