//! Disruptions through the pool (issue 30), each while the writer goes on writing, with what the
//! apiserver served during it:
//! - **a rollout**: every node tier started again within a window, one after another, spread
//!   evenly (a DaemonSet rolled): its connection closed, a new one opened (a TLS handshake),
//!   every watch resumed from its RV — its caches from the states it wrote as it stopped, the
//!   watches it passes on from its agents' (`node::run`);
//! - **a replica's restart**: pool replica 0 killed (SIGKILL: a node lost, no draining) and
//!   started again after a while: its node tiers move to the next replica (their `upstreams`),
//!   resume there from their RVs, and go back once it accepts connections again.
//!
//! The bound each must keep (issue 30): the apiserver's list and proof requests during it at
//! most 2 × replicas × the resources the nodes read; every view still equal to the apiserver's,
//! no event out of RV order or repeated.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

use super::link::{Link, Moves};
use super::node::{self, Classes, Views, Writes};
use super::writer::{self, WriteCounts};
use super::{connect, synced_watches, Cluster, ScaleSpec};
use crate::hist::{Histogram, Summary};
use crate::node::report::{series, Counters, Served};
use crate::node::tier::Tier;

/// How long the node tiers are given to be back on their own replica after its return.
const BACK_WITHIN: Duration = Duration::from_secs(60);

/// What one disruption cost and broke.
#[derive(Debug, Clone, Serialize)]
pub struct Disruption {
    pub name: &'static str,
    /// From its start until every node synced (the rollout) or was back (the restart).
    pub seconds: f64,
    /// What the apiserver served meanwhile (the writer's writes among them).
    pub served: Served,
    /// The pool replicas' upstream calls meanwhile, by verb (`kubeplex_upstream_calls_total`:
    /// loads, watches and freshness proofs; a killed replica's calls before its death are
    /// lost with it).
    pub pool_calls: BTreeMap<String, i64>,
    /// 2 × replicas × the resources the nodes read: the most list and proof requests the
    /// apiserver may serve during it.
    pub bound: usize,
    /// The replica started again, ready (its caches loaded) after its start.
    pub replica_ready_s: Option<f64>,
    /// Every restarted node tier's watches synced again (the rollout), or every node tier back
    /// on its own replica (the restart), from the disruption's start.
    pub done_s: Option<f64>,
    /// Node tiers on their own replica at the end, of all.
    pub home: (usize, usize),
    pub moved_away: u64,
    pub moved_back: u64,
    /// Watch failures meanwhile, by answer (`transport`, `stream`, a status).
    pub watch_failures: BTreeMap<String, u64>,
    /// Watches started over (410, or cut in their initial state) meanwhile.
    pub restarts: u64,
    pub out_of_order: u64,
    /// The writer's stamp → a node seeing it, meanwhile.
    pub delivery: Summary,
}

/// A run's state that the disruptions act on.
pub(super) struct Run<'a> {
    pub spec: &'a ScaleSpec,
    pub cluster: &'a Arc<Cluster>,
    pub replicas: &'a mut Tier,
    pub nodes: &'a mut JoinSet<()>,
    pub handles: &'a mut Vec<AbortHandle>,
    pub links: &'a mut Vec<Arc<Link>>,
    pub moves: &'a Arc<Moves>,
    pub classes: &'a Arc<Mutex<Classes>>,
    pub views: &'a Views,
    pub writes: &'a Arc<Writes>,
    pub counts: &'a Arc<WriteCounts>,
    pub since: Instant,
    /// A writer runs all along (a soak's): a disruption starts none of its own.
    pub writing: bool,
}

/// The figures a disruption is measured between.
struct Snapshot {
    at: Instant,
    apiserver: Counters,
    /// Each replica's process and its calls so far.
    pool_calls: Vec<(Option<u32>, BTreeMap<String, f64>)>,
    failures: BTreeMap<String, u64>,
    restarts: u64,
    out_of_order: u64,
    moved: (u64, u64),
}

impl Run<'_> {
    /// Every node tier started again within `within`, while the writer writes.
    pub async fn rollout(&mut self, within: Duration) -> anyhow::Result<Disruption> {
        self.restart_nodes(within, false).await
    }

    /// Every node tier started again within `within`, each resuming from its state (a
    /// rollout) or, `cold`, without one: each lists everything again (a burst of cold
    /// clients).
    pub async fn restart_nodes(
        &mut self,
        within: Duration,
        cold: bool,
    ) -> anyhow::Result<Disruption> {
        let name = if cold { "node tiers started cold" } else { "node tiers rolled" };
        tracing::info!(seconds = within.as_secs_f64(), name, "starting every node tier again");
        let steady = self.take_delivery();
        let start = self.snapshot().await;
        let writer = self.write_for(within);
        let n = self.links.len();
        let shape = self.spec.shape;
        let expected =
            synced_watches(self.classes) + (n * node::watches_per_node(true, &shape)) as u64;
        let step = within.checked_div(n.max(1) as u32).unwrap_or_default();
        for i in 0..n {
            tokio::time::sleep_until(start.at + step * i as u32).await;
            self.handles[i].abort();
            let conns = connect(self.cluster, Some(self.replicas), i, shape.cni, self.moves)?;
            self.links[i] = conns.link();
            let (classes, views, writes) =
                (self.classes.clone(), self.views.clone(), self.writes.clone());
            let since = self.since;
            self.handles[i] = self.nodes.spawn(async move {
                node::run(i, shape, conns, classes, views, writes, since, !cold).await
            });
        }
        let synced = self.wait(|| synced_watches(self.classes) >= expected).await;
        let done = synced.then(|| start.at.elapsed());
        let _ = writer.await;
        tokio::time::sleep(self.spec.settle).await;
        let mut d = self.measured(name, &start, steady).await;
        d.done_s = done.map(|t| t.as_secs_f64());
        Ok(d)
    }

    /// Replica 0 killed, started again after `down`, while the writer writes.
    pub async fn kill_replica(&mut self, down: Duration) -> anyhow::Result<Disruption> {
        tracing::info!(down_s = down.as_secs_f64(), "killing pool replica 0");
        let steady = self.take_delivery();
        let start = self.snapshot().await;
        let writer = self.write_for(down + Duration::from_secs(10));
        self.replicas.kill(0).await;
        tokio::time::sleep(down).await;
        let restarted = Instant::now();
        self.replicas.restart(0).await?;
        let ready = restarted.elapsed();
        let links = self.links.clone();
        let back = tokio::time::timeout(BACK_WITHIN, async {
            while !links.iter().all(|l| l.home()) {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await
        .ok()
        .map(|_| start.at.elapsed());
        let _ = writer.await;
        tokio::time::sleep(self.spec.settle).await;
        let mut d = self.measured("pool replica restarted", &start, steady).await;
        d.replica_ready_s = Some(ready.as_secs_f64());
        d.done_s = back.map(|t| t.as_secs_f64());
        Ok(d)
    }

    /// A disruption that `act` brings about (while the writer writes), measured as the others;
    /// with when `act` ended (the upstream back).
    pub async fn around<F, Fut>(
        &mut self,
        name: &'static str,
        act: F,
    ) -> anyhow::Result<(Disruption, Instant)>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        tracing::info!(name, "disrupting");
        let steady = self.take_delivery();
        let start = self.snapshot().await;
        let admins: Vec<SocketAddr> = self.replicas.nodes.iter().map(|k| k.admin).collect();
        let watching = upstream_watches(&admins).await.unwrap_or(0.0);
        act().await?;
        let ended = Instant::now();
        // The writes made meanwhile reach the nodes once the pool watches again (its reflectors
        // back off while the apiserver does not answer): the settle counts from then.
        watches_back(&admins, watching, ended).await;
        tokio::time::sleep(self.spec.settle).await;
        let mut d = self.measured(name, &start, steady).await;
        d.done_s = Some((ended - start.at).as_secs_f64());
        Ok((d, ended))
    }

    /// The nodes' watch failures so far, by answer.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut failures: BTreeMap<String, u64> = BTreeMap::new();
        for c in classes.values() {
            for (k, n) in c.failures.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                *failures.entry(k.clone()).or_default() += n;
            }
        }
        failures
    }

    fn write_for(&self, long: Duration) -> tokio::task::JoinHandle<()> {
        if self.writing {
            return tokio::spawn(tokio::time::sleep(long));
        }
        tokio::spawn(writer::run(
            self.cluster.clone(),
            self.spec.shape,
            self.spec.write_rate,
            Instant::now() + long,
            self.counts.clone(),
        ))
    }

    /// Waits until `done` (at most the run's sync timeout); whether it came.
    async fn wait(&self, done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + self.spec.sync_timeout;
        while Instant::now() < deadline {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        false
    }

    async fn snapshot(&self) -> Snapshot {
        let apiserver = match self.cluster.metrics().await {
            Ok(text) => Counters::read(&text),
            Err(_) => Counters::default(),
        };
        let mut pool_calls = Vec::new();
        for k in &self.replicas.nodes {
            pool_calls.push((k.pid(), calls_by_verb(&k.metrics().await.unwrap_or_default())));
        }
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let failures = self.failures();
        let sum = |f: fn(&super::watcher::ClassStats) -> u64| classes.values().map(|c| f(c)).sum();
        Snapshot {
            at: Instant::now(),
            apiserver,
            pool_calls,
            failures,
            restarts: sum(|c| c.restarts.load(Ordering::Relaxed)),
            out_of_order: sum(|c| c.out_of_order.load(Ordering::Relaxed)),
            moved: (
                self.moves.away.load(Ordering::Relaxed),
                self.moves.back.load(Ordering::Relaxed),
            ),
        }
    }

    /// The figures between `start` and now; the classes' delivery times given back as they
    /// were before (`steady`), the disruption's own reported here.
    async fn measured(
        &self,
        name: &'static str,
        start: &Snapshot,
        steady: BTreeMap<&'static str, Histogram>,
    ) -> Disruption {
        let end = self.snapshot().await;
        let mut pool_calls: BTreeMap<String, i64> = BTreeMap::new();
        for (i, (pid, after)) in end.pool_calls.iter().enumerate() {
            // A replica started again counts from 0.
            let before = start.pool_calls.get(i).filter(|(was, _)| was == pid).map(|(_, b)| b);
            for (verb, n) in after {
                let d = n - before.and_then(|b| b.get(verb)).copied().unwrap_or(0.0);
                *pool_calls.entry(verb.clone()).or_default() += d as i64;
            }
        }
        let mut watch_failures = end.failures.clone();
        for (k, n) in &start.failures {
            if let Some(v) = watch_failures.get_mut(k) {
                *v = v.saturating_sub(*n);
            }
        }
        watch_failures.retain(|_, n| *n > 0);
        let during = self.take_delivery();
        let mut delivery = Histogram::default();
        for h in during.values() {
            delivery.merge(h);
        }
        self.give_delivery(steady);
        Disruption {
            name,
            seconds: start.at.elapsed().as_secs_f64(),
            served: Served::between(&start.apiserver, &end.apiserver),
            pool_calls,
            bound: 2 * self.replicas.nodes.len() * node::resources(&self.spec.shape),
            replica_ready_s: None,
            done_s: None,
            home: (self.links.iter().filter(|l| l.home()).count(), self.links.len()),
            moved_away: end.moved.0 - start.moved.0,
            moved_back: end.moved.1 - start.moved.1,
            watch_failures,
            restarts: end.restarts - start.restarts,
            out_of_order: end.out_of_order - start.out_of_order,
            delivery: delivery.summary(),
        }
    }

    /// Each class's delivery times so far, leaving them empty.
    fn take_delivery(&self) -> BTreeMap<&'static str, Histogram> {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        classes
            .iter()
            .map(|(k, c)| {
                (*k, std::mem::take(&mut *c.delivery.lock().unwrap_or_else(|p| p.into_inner())))
            })
            .collect()
    }

    fn give_delivery(&self, hists: BTreeMap<&'static str, Histogram>) {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        for (k, h) in hists {
            if let Some(c) = classes.get(k) {
                *c.delivery.lock().unwrap_or_else(|p| p.into_inner()) = h;
            }
        }
    }
}

/// `kubeplex_upstream_calls_total` summed by verb.
fn calls_by_verb(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, labels, value) in series(text) {
        if name == "kubeplex_upstream_calls_total" {
            let verb = labels.get("verb").cloned().unwrap_or_default();
            *out.entry(verb).or_default() += value;
        }
    }
    out
}

/// The watches the pool's replicas hold open at the apiserver (`kubeplex_upstream_watches`,
/// summed): the apiserver's open watches for the nodes, whatever else runs against it; `None`
/// while a replica does not answer.
pub(super) async fn upstream_watches(admins: &[SocketAddr]) -> Option<f64> {
    let mut sum = 0.0;
    for admin in admins {
        let text = crate::target::scrape(&format!("http://{admin}/metrics"), false).await.ok()?;
        sum += series(&text)
            .iter()
            .filter(|(n, ..)| n == "kubeplex_upstream_watches")
            .map(|x| x.2)
            .sum::<f64>();
    }
    Some(sum)
}

/// How long the pool's watches at the apiserver may take to come back after a disruption ends.
pub(super) const WATCHES_BACK_WITHIN: Duration = Duration::from_secs(120);

/// How long after `ended` the pool's watches at the apiserver were back at `level`; `None`: not
/// within [`WATCHES_BACK_WITHIN`].
pub(super) async fn watches_back(
    admins: &[SocketAddr],
    level: f64,
    ended: Instant,
) -> Option<Duration> {
    while ended.elapsed() < WATCHES_BACK_WITHIN {
        if upstream_watches(admins).await.is_some_and(|n| n >= level) {
            return Some(ended.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}
