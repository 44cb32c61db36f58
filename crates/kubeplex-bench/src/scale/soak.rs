//! `--soak`: hours in production, compressed (issue 47). After the steady run through the pool,
//! the writer goes on churning for the soak's whole duration while a schedule of disruptions
//! repeats, one every `every`:
//! - **a rollout** of every node tier (a DaemonSet rolled: each resumes from its state);
//! - **a pool replica** killed and started again;
//! - **the kube-apiserver restarted** (a shell command the script gives: the harness's);
//! - **etcd compacted** to its current revision (a shell command), then the pool's upstream
//!   connections cut for a moment: its watches resume from RVs etcd no longer has;
//! - **an upstream outage**: the pool's connections to the apiserver (through a relay here,
//!   [`Relay`]) cut and refused for a minute;
//! - **a burst of cold clients**: every node tier started again without its state, within
//!   seconds: each lists everything again.
//!
//! Every `sample` (~10 s) a row of samples goes to a CSV file: each replica's RSS, heap, CPU,
//! connections, tasks, watchers, review-cache entries, disk-state and watch-history bytes,
//! descriptors (its `/metrics`); the apiserver's open watches, request rate and CPU; the last
//! minute's write → node p50/p99; watch failures and 5xx by the nodes. Each disruption is a
//! `#marker` line. `scripts/realcluster/svgplot.py` renders the file. The last disruption leaves
//! an interval before the end, so the samples end settled; the report gives each flat series'
//! least-squares slope in % of its mean per hour, over whole cycles from the first disruption
//! after the first 10 minutes, and over the settled levels (the sample before each disruption),
//! and how long the pool's watches at the apiserver took to come back after each disruption.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

mod relay;
mod samples;
#[cfg(test)]
mod tests;

pub use self::relay::Relay;
pub use self::samples::least_squares;
use self::samples::{Sampler, Window};
use super::cluster::Cluster;
use super::disrupt::{upstream_watches, watches_back, Disruption, Run};
use crate::node::report::Counters;

/// Samples before this (from the soak's start) are left out of the slopes: caches, pools and
/// the allocator's arenas grow to their working size first.
const WARM_UP: Duration = Duration::from_secs(600);
/// [`WARM_UP`], or a sixth of a short soak (a test's).
fn warm_up(soak: Duration) -> Duration {
    WARM_UP.min(soak / 6)
}

/// After etcd's compaction, the pool's upstream connections are cut this long.
const COMPACTION_CUT: Duration = Duration::from_secs(5);
/// A cold burst: every node tier started again within this long.
const BURST_WITHIN: Duration = Duration::from_secs(10);

/// What a soak does.
#[derive(Debug, Clone)]
pub struct SoakSpec {
    /// How long the churn and the schedule go on.
    pub duration: Duration,
    /// A disruption starts this long after the last one started.
    pub every: Duration,
    /// A row of samples every this long.
    pub sample: Duration,
    /// The upstream outage's length.
    pub outage: Duration,
    /// A shell command that restarts the kube-apiserver and returns once it serves again.
    pub restart_apiserver: Option<String>,
    /// A shell command that compacts etcd to its current revision.
    pub compact_etcd: Option<String>,
    /// The samples' CSV file.
    pub samples: PathBuf,
    /// The disruptions, in their order, repeated ([`SCHEDULE`] unless given: a run that looks
    /// at one kind, the cold bursts' memory say, gives only it).
    pub schedule: Vec<Kind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Kind {
    Rollout,
    ReplicaRestart,
    ApiserverRestart,
    Compaction,
    Outage,
    ColdBurst,
}

/// The disruptions' order, repeated (unless the soak is given its own).
pub const SCHEDULE: [Kind; 6] = [
    Kind::Rollout,
    Kind::ReplicaRestart,
    Kind::ApiserverRestart,
    Kind::Compaction,
    Kind::Outage,
    Kind::ColdBurst,
];

/// One disruption of the soak.
#[derive(Debug, Clone, Serialize)]
pub struct Stamped {
    /// From the soak's start.
    pub at_s: f64,
    pub kind: Kind,
    /// The watches the pool held open at the apiserver just before (`kubeplex_upstream_watches`
    /// of every replica: the apiserver's open watches for the nodes).
    pub watches_before: f64,
    /// From the disruption's end (the replica, apiserver or connections back; the node tiers
    /// started) until the pool's watches at the apiserver were back at that level; `None`: not
    /// within [`super::disrupt::WATCHES_BACK_WITHIN`].
    pub watches_back_s: Option<f64>,
    pub disruption: Disruption,
}

/// A series' trend after the warm-up.
#[derive(Debug, Clone, Serialize)]
pub struct Slope {
    pub series: String,
    pub mean: f64,
    /// Least-squares slope, per hour.
    pub per_hour: f64,
    /// `per_hour` in % of the mean.
    pub percent_per_hour: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub seconds: f64,
    pub samples: usize,
    pub csv: String,
    pub disruptions: Vec<Stamped>,
    /// Disruptions whose harness command failed (the soak went on once the apiserver answered).
    pub failed: Vec<String>,
    /// The series an operator expects flat (memory and counts): their slopes over the samples
    /// from the first disruption after the warm-up to the end — whole cycles of disruption and
    /// recovery, as the last disruption leaves an interval before the end.
    pub slopes: Vec<Slope>,
    /// The same series' slopes over their settled levels: the last sample before each of
    /// those disruptions, and the last of all — where each recovery left them.
    pub settled_slopes: Vec<Slope>,
    /// Watch requests of the nodes answered 5xx, by code, over the soak.
    pub node_5xx: BTreeMap<String, u64>,
    pub writes_failed: u64,
}

/// Runs the soak on `run` (the pool's run, its steady phase done); the writer churns all
/// along.
pub(super) async fn soak(
    run: &mut Run<'_>,
    spec: &SoakSpec,
    relay: Option<&Relay>,
) -> anyhow::Result<SoakReport> {
    let start = Instant::now();
    let until = start + spec.duration;
    run.writing = true;
    let writer = tokio::spawn(super::writer::run(
        run.cluster.clone(),
        run.spec.shape,
        run.spec.write_rate,
        until,
        run.counts.clone(),
    ));
    let markers: Arc<Mutex<Vec<(f64, String)>>> = Default::default();
    let (stop, stopped) = watch::channel(false);
    let admins: Vec<SocketAddr> = run.replicas.nodes.iter().map(|k| k.admin).collect();
    let sampler = Sampler {
        admins: admins.clone(),
        cluster: run.cluster.clone(),
        classes: run.classes.clone(),
        counts: run.counts.clone(),
        markers: markers.clone(),
        every: spec.sample,
        path: spec.samples.clone(),
    };
    let sampling = tokio::spawn(sampler.run(start, stopped));
    let mut disruptions = Vec::new();
    let mut failed = Vec::new();
    let mut next = start + spec.every.min(Duration::from_secs(120));
    let schedule = if spec.schedule.is_empty() { &SCHEDULE[..] } else { &spec.schedule[..] };
    for kind in schedule.iter().cycle().copied() {
        tokio::time::sleep_until(next).await;
        // The last disruption leaves a whole interval before the end: the samples end settled,
        // and the slopes cover whole cycles of disruption and recovery.
        if Instant::now() + spec.every > until {
            break;
        }
        next = Instant::now() + spec.every;
        let skipped = match kind {
            Kind::ApiserverRestart => spec.restart_apiserver.is_none(),
            Kind::Compaction => spec.compact_etcd.is_none() || relay.is_none(),
            Kind::Outage => relay.is_none(),
            _ => false,
        };
        if skipped {
            continue;
        }
        let at_s = start.elapsed().as_secs_f64();
        lock(&markers).push((at_s, format!("{kind:?}")));
        tracing::info!(?kind, at_s, "soak: disruption");
        let watches_before = upstream_watches(&admins).await.unwrap_or(0.0);
        let done = match kind {
            Kind::Rollout => {
                let within = run.spec.rollout.unwrap_or(Duration::from_secs(60));
                run.rollout(within).await.map(|d| (d, Instant::now()))
            }
            Kind::ReplicaRestart => {
                let down = run.spec.kill_replica.unwrap_or(Duration::from_secs(10));
                run.kill_replica(down).await.map(|d| (d, Instant::now()))
            }
            Kind::ColdBurst => {
                run.restart_nodes(BURST_WITHIN, true).await.map(|d| (d, Instant::now()))
            }
            Kind::ApiserverRestart => {
                let cmd = spec.restart_apiserver.as_deref().unwrap_or_default();
                run.around("apiserver restarted", || shell(cmd)).await
            }
            Kind::Compaction => {
                let (cmd, relay) = (spec.compact_etcd.as_deref().unwrap_or_default(), relay);
                run.around("etcd compacted, pool cut", || async move {
                    shell(cmd).await?;
                    if let Some(r) = relay {
                        r.set_down(true);
                        tokio::time::sleep(COMPACTION_CUT).await;
                        r.set_down(false);
                    }
                    Ok(())
                })
                .await
            }
            Kind::Outage => {
                let (outage, relay) = (spec.outage, relay);
                run.around("upstream outage", || async move {
                    if let Some(r) = relay {
                        r.set_down(true);
                        tokio::time::sleep(outage).await;
                        r.set_down(false);
                    }
                    Ok(())
                })
                .await
            }
        };
        // A disruption that failed (a command of the harness's: the apiserver not back in
        // time) is reported, and the soak goes on once the apiserver answers again.
        let (disruption, ended) = match done {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(?kind, error = %e, "soak: the disruption failed");
                failed.push(format!("{kind:?} at {at_s:.0} s: {e:#}"));
                lock(&markers).push((start.elapsed().as_secs_f64(), format!("{kind:?} failed")));
                let deadline = Instant::now() + Duration::from_secs(600);
                while open_watches(run.cluster).await.is_none() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                continue;
            }
        };
        let back = watches_back(&admins, watches_before, ended).await;
        disruptions.push(Stamped {
            at_s,
            kind,
            watches_before,
            watches_back_s: back.map(|d| d.as_secs_f64()),
            disruption,
        });
    }
    let _ = writer.await;
    run.writing = false;
    stop.send_replace(true);
    let rows = sampling.await.unwrap_or_default();
    let warm = warm_up(spec.duration).as_secs_f64();
    let cycles: Vec<f64> = disruptions.iter().map(|d| d.at_s).filter(|at| *at >= warm).collect();
    let failures = run.failures();
    Ok(SoakReport {
        seconds: start.elapsed().as_secs_f64(),
        samples: rows.rows.len(),
        csv: spec.samples.display().to_string(),
        disruptions,
        failed,
        slopes: rows.slopes(&Window::cycles(&cycles, warm)),
        settled_slopes: rows.slopes(&Window::settled(&cycles)),
        node_5xx: failures.into_iter().filter(|(k, _)| k.starts_with('5')).collect(),
        writes_failed: run.counts.failed.load(Ordering::Relaxed),
    })
}

/// Runs a shell command (the harness's), for at most 5 minutes.
async fn shell(cmd: &str) -> anyhow::Result<()> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    match tokio::time::timeout(Duration::from_secs(300), child.wait()).await {
        Ok(status) => {
            let status = status?;
            anyhow::ensure!(status.success(), "`{cmd}`: {status}");
            Ok(())
        }
        Err(_) => anyhow::bail!("`{cmd}`: still running after 5 minutes"),
    }
}

/// The apiserver's open long-running requests (its watches).
async fn open_watches(cluster: &Cluster) -> Option<f64> {
    let text = cluster.metrics().await.ok()?;
    Some(Counters::read(&text).open_watches)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl std::fmt::Display for SoakReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "soak: {:.0} min, {} samples ({}); writes failed {}; nodes' watch 5xx {:?}",
            self.seconds / 60.0,
            self.samples,
            self.csv,
            self.writes_failed,
            self.node_5xx
        )?;
        for failure in &self.failed {
            writeln!(f, "soak: a disruption failed: {failure}")?;
        }
        for s in &self.disruptions {
            let back = s.watches_back_s.map_or("not within 120 s".into(), |b| format!("{b:.1} s"));
            writeln!(
                f,
                "soak at {:.0} s, {:?}: the pool's watches at the apiserver {} before, back after {back}",
                s.at_s, s.kind, s.watches_before
            )?;
            writeln!(f, "{}", s.disruption)?;
        }
        let slopes = [
            ("over whole cycles, from the first disruption after the warm-up", &self.slopes),
            ("of the settled levels, before each disruption and at the end", &self.settled_slopes),
        ];
        for (what, slopes) in slopes {
            writeln!(f, "slopes {what} (least squares):")?;
            for s in slopes {
                writeln!(
                    f,
                    "  {:<36} mean {:>10.1}  {:>+9.2}/h  {:>+7.2} %/h",
                    s.series, s.mean, s.per_hour, s.percent_per_hour
                )?;
            }
        }
        Ok(())
    }
}
