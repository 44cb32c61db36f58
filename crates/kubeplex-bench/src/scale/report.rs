//! A scale run's figures, per mode, side by side.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use super::cluster::Shape;
use super::disrupt::Disruption;
use super::node::{Classes, Writes};
use super::writer::WriteCounts;
use crate::hist::{Histogram, Summary};
use crate::node::report::{Counters, Served};

#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub shape: Shape,
    pub write_rate: f64,
    pub seconds: f64,
    pub modes: Vec<ModeReport>,
}

/// A process's CPU-seconds in the start-up (until every watch synced), in the steady run
/// (the writer's seconds and the settling), and in all; its RSS at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Process {
    pub name: String,
    pub cpu_startup_s: f64,
    pub cpu_steady_s: f64,
    pub cpu_total_s: f64,
    pub rss_mib: f64,
    /// A pool replica's RSS once ready — its configured caches loaded — before any node
    /// connected.
    pub rss_ready_mib: Option<f64>,
    /// The bytes of the objects a pool replica's caches hold at the end
    /// (`kubeplex_cache_bytes`).
    pub caches_mib: Option<f64>,
    /// A pool replica's heap in use (`kubeplex_allocator_heap_bytes{state="in_use"}`) once
    /// ready, and at the end.
    pub heap_ready_mib: Option<f64>,
    pub heap_mib: Option<f64>,
    /// The bytes of the events a pool replica's caches keep for resuming watches, at the end.
    pub history_mib: Option<f64>,
    /// Of the objects' and the history's bytes, the custom resources' (Cilium's).
    pub custom_caches_mib: Option<f64>,
    pub custom_history_mib: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassReport {
    pub class: &'static str,
    pub watchers: u64,
    pub synced: u64,
    pub requests: u64,
    pub initial_events: u64,
    pub events: u64,
    pub errors: u64,
    pub refused: u64,
    pub restarts: u64,
    pub out_of_order: u64,
    pub failures: BTreeMap<String, u64>,
    pub sync_time: Summary,
    pub delivery: Summary,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KubeletWrites {
    pub lease_ok: u64,
    pub lease_failed: u64,
    pub pod_get_ok: u64,
    pub pod_status_ok: u64,
    pub pod_failed: u64,
    pub existing_status_ok: u64,
    pub tokens_ok: u64,
    pub node_status_ok: u64,
    pub start_failed: u64,
    pub refused: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Written {
    pub endpointslices: u64,
    pub services: u64,
    pub pods_replaced: u64,
    /// With Cilium agents: each replaced pod's CiliumEndpoint.
    pub ciliumendpoints_replaced: u64,
    pub failed: u64,
    pub skipped: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    pub mode: &'static str,
    pub nodes: usize,
    /// Watches the nodes keep open (their agents', or their node tiers').
    pub watches: usize,
    /// The pool replicas ready (their caches loaded), from the mode's start.
    pub pool_ready_s: f64,
    /// Every node's every watch synced, from the nodes' start.
    pub all_synced_s: Option<f64>,
    /// Every pod bound before its kubelet started had its first status syncs written, from
    /// the nodes' start (the steady run starts after it).
    pub starts_written_s: Option<f64>,
    /// The apiserver during the start-up (the pool's and the nodes'), in the steady run, and
    /// in all (after every watch ended: the watches are counted when they end).
    pub startup: Served,
    pub steady: Served,
    pub total: Served,
    /// Open long-running requests (watches) at the apiserver, the most sampled, above those
    /// open before the mode started (the control plane's own).
    pub apiserver_open_watches_max: i64,
    pub control_plane: Vec<Process>,
    pub replicas: Vec<Process>,
    pub classes: Vec<ClassReport>,
    /// The writer's stamp → a node seeing it, by what changed.
    pub delivery: BTreeMap<String, Summary>,
    pub kubelet_writes: KubeletWrites,
    pub written: Written,
    /// The watch events the apiserver sent for the nodes' reads after start-up: to the nodes
    /// (counted by them) directly, to the pool replicas (counted by them) through the pool.
    pub node_read_events: u64,
    pub views_checked: u64,
    pub views_wrong: u64,
    pub views_examples: Vec<String>,
    /// Through the pool: the rollout and the replica's restart, after the steady run (the
    /// classes' counts and the views cover them too; their delivery times are their own).
    pub disruptions: Vec<Disruption>,
    /// Through the pool with `--soak`: the soak after them.
    pub soak: Option<super::soak::SoakReport>,
    pub phases: Phases,
}

/// When the mode's phases began, in seconds since the Unix epoch: what the apiserver's audit
/// log is cut by (scripts/realcluster/calibrate.py).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Phases {
    /// The nodes started (the start-up).
    pub nodes_start: f64,
    /// The writer started (the steady run).
    pub writer_start: f64,
    /// The steady run and its settling ended.
    pub steady_end: f64,
}

/// What [`super::run_mode`] read.
pub(super) struct Readings {
    pub mode: &'static str,
    pub nodes: usize,
    pub watches: usize,
    pub pool_ready_s: f64,
    pub all_synced_s: Option<f64>,
    pub starts_written_s: Option<f64>,
    pub before: Counters,
    pub at_sync: Counters,
    pub steady_end: Counters,
    pub after: Counters,
    pub open_max: f64,
    pub control_plane: Vec<(String, u32)>,
    /// CPU-seconds before, at sync, at the steady run's end, after.
    pub cpu: [Vec<f64>; 4],
    pub control_plane_rss: Vec<u64>,
    pub replicas: Vec<(String, u32)>,
    /// Replicas' CPU-seconds (from their start) at sync and at the end.
    pub replicas_cpu: [Vec<f64>; 2],
    pub replicas_rss: Vec<u64>,
    /// Replicas' RSS once ready, before any node connected.
    pub replicas_rss_ready: Vec<u64>,
    /// The bytes of the objects replicas' caches hold at the end.
    pub replicas_cache_bytes: Vec<f64>,
    /// Replicas' heap in use once ready, and at the end.
    pub replicas_heap_ready: Vec<f64>,
    pub replicas_heap: Vec<f64>,
    pub replicas_history_bytes: Vec<f64>,
    /// Of those, the custom resources' (Cilium's).
    pub replicas_custom_bytes: Vec<f64>,
    pub replicas_custom_history: Vec<f64>,
    pub classes: Classes,
    pub writes: Arc<Writes>,
    pub counts: Arc<WriteCounts>,
    pub views: (u64, u64, Vec<String>),
    pub pool_events_received: u64,
    pub disruptions: Vec<Disruption>,
    pub soak: Option<super::soak::SoakReport>,
    pub phases: Phases,
}

fn at(v: &[f64], i: usize) -> f64 {
    v.get(i).copied().unwrap_or(0.0)
}

const MIB: f64 = 1024.0 * 1024.0;

pub(super) fn mode_report(r: Readings) -> ModeReport {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let [c0, c1, c2, c3] = &r.cpu;
    let control_plane = r
        .control_plane
        .iter()
        .enumerate()
        .map(|(i, (name, _))| Process {
            name: name.clone(),
            cpu_startup_s: at(c1, i) - at(c0, i),
            cpu_steady_s: at(c2, i) - at(c1, i),
            cpu_total_s: at(c3, i) - at(c0, i),
            rss_mib: r.control_plane_rss.get(i).copied().unwrap_or(0) as f64 / MIB,
            rss_ready_mib: None,
            caches_mib: None,
            heap_ready_mib: None,
            heap_mib: None,
            history_mib: None,
            custom_caches_mib: None,
            custom_history_mib: None,
        })
        .collect();
    let [p1, p2] = &r.replicas_cpu;
    let replicas = r
        .replicas
        .iter()
        .enumerate()
        .map(|(i, (name, _))| Process {
            name: name.clone(),
            cpu_startup_s: at(p1, i),
            cpu_steady_s: at(p2, i) - at(p1, i),
            cpu_total_s: at(p2, i),
            rss_mib: r.replicas_rss.get(i).copied().unwrap_or(0) as f64 / MIB,
            rss_ready_mib: r.replicas_rss_ready.get(i).map(|&b| b as f64 / MIB),
            caches_mib: r.replicas_cache_bytes.get(i).map(|&b| b / MIB),
            heap_ready_mib: r.replicas_heap_ready.get(i).map(|&b| b / MIB),
            heap_mib: r.replicas_heap.get(i).map(|&b| b / MIB),
            history_mib: r.replicas_history_bytes.get(i).map(|&b| b / MIB),
            custom_caches_mib: r.replicas_custom_bytes.get(i).map(|&b| b / MIB),
            custom_history_mib: r.replicas_custom_history.get(i).map(|&b| b / MIB),
        })
        .collect();
    let mut delivery: BTreeMap<String, Histogram> = BTreeMap::new();
    let classes = r
        .classes
        .iter()
        .map(|(class, s)| {
            let d = s.delivery.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let what = if class.contains("ciliumendpoints") {
                "ciliumendpoints"
            } else if class.contains("pods") {
                "pods"
            } else if class.contains("endpointslices") {
                "endpointslices"
            } else if class.contains("services") {
                "services"
            } else {
                "other"
            };
            delivery.entry(what.into()).or_default().merge(&d);
            ClassReport {
                class,
                watchers: load(&s.watchers),
                synced: load(&s.synced),
                requests: load(&s.requests),
                initial_events: load(&s.initial_events),
                events: load(&s.events),
                errors: load(&s.errors),
                refused: load(&s.refused),
                restarts: load(&s.restarts),
                out_of_order: load(&s.out_of_order),
                failures: s.failures.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                sync_time: s.sync_time.lock().unwrap_or_else(|p| p.into_inner()).summary(),
                delivery: d.summary(),
            }
        })
        .collect();
    let w = &r.writes;
    let c = &r.counts;
    ModeReport {
        mode: r.mode,
        nodes: r.nodes,
        watches: r.watches,
        pool_ready_s: r.pool_ready_s,
        all_synced_s: r.all_synced_s,
        starts_written_s: r.starts_written_s,
        startup: Served::between(&r.before, &r.at_sync),
        steady: Served::between(&r.at_sync, &r.steady_end),
        total: Served::between(&r.before, &r.after),
        apiserver_open_watches_max: r.open_max as i64,
        control_plane,
        replicas,
        classes,
        delivery: delivery
            .into_iter()
            .filter(|(_, h)| h.count() > 0)
            .map(|(k, h)| (k, h.summary()))
            .collect(),
        kubelet_writes: KubeletWrites {
            lease_ok: load(&w.lease_ok),
            lease_failed: load(&w.lease_failed),
            pod_get_ok: load(&w.pod_get_ok),
            pod_status_ok: load(&w.pod_status_ok),
            pod_failed: load(&w.pod_failed),
            existing_status_ok: load(&w.existing_status_ok),
            tokens_ok: load(&w.tokens_ok),
            node_status_ok: load(&w.node_status_ok),
            start_failed: load(&w.start_failed),
            refused: load(&w.refused),
        },
        written: Written {
            endpointslices: load(&c.endpointslices),
            services: load(&c.services),
            pods_replaced: load(&c.pods_replaced),
            ciliumendpoints_replaced: load(&c.ciliumendpoints_replaced),
            failed: load(&c.failed),
            skipped: load(&c.skipped),
        },
        node_read_events: if r.replicas.is_empty() {
            r.classes.values().map(|c| load(&c.events)).sum()
        } else {
            r.pool_events_received
        },
        views_checked: r.views.0,
        views_wrong: r.views.1,
        views_examples: r.views.2,
        disruptions: r.disruptions,
        soak: r.soak,
        phases: r.phases,
    }
}

impl fmt::Display for ScaleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shape;
        writeln!(
            f,
            "scale: {} nodes, {} pods each, {} services ({} endpoints each); {:.1} writes/s for {:.0} s",
            s.nodes, s.pods_per_node, s.services, s.endpoints_per_slice, self.write_rate, self.seconds
        )?;
        let modes = &self.modes;
        let row =
            |f: &mut fmt::Formatter<'_>, label: &str, cell: &dyn Fn(&ModeReport) -> String| {
                let cells: Vec<String> = modes.iter().map(cell).collect();
                writeln!(f, "| {label} | {} |", cells.join(" | "))
            };
        let head: Vec<&str> = modes.iter().map(|m| m.mode).collect();
        writeln!(f, "| | {} |", head.join(" | "))?;
        writeln!(f, "|---|{}", "---|".repeat(modes.len()))?;
        row(f, "watches the nodes keep open", &|m| m.watches.to_string())?;
        row(f, "all watches synced", &|m| {
            m.all_synced_s.map_or("no".into(), |s| format!("{s:.1} s"))
        })?;
        row(f, "existing pods' first status syncs written", &|m| {
            m.starts_written_s.map_or("no".into(), |s| format!("{s:.1} s"))
        })?;
        row(f, "apiserver open watches, most (above the control plane's)", &|m| {
            m.apiserver_open_watches_max.to_string()
        })?;
        for (label, pick) in [("start-up", 0), ("steady", 1)] {
            let served =
                |m: &ModeReport| if pick == 0 { m.startup.clone() } else { m.steady.clone() };
            row(f, &format!("apiserver LIST / WATCH / GET, {label}"), &|m| {
                let s = served(m);
                format!("{} / {} / {}", s.list, s.watch, s.get)
            })?;
            row(f, &format!("apiserver watch events / MB sent, {label}"), &|m| {
                let s = served(m);
                format!("{} / {:.1}", s.watch_events, s.watch_event_bytes as f64 / 1e6)
            })?;
        }
        row(f, "watch events the apiserver sent for node reads, steady", &|m| {
            m.node_read_events.to_string()
        })?;
        row(f, "apiserver watch events by resource, steady", &|m| {
            let parts: Vec<String> =
                m.steady.watch_events_by_resource.iter().map(|(r, n)| format!("{r} {n}")).collect();
            parts.join(", ")
        })?;
        row(f, "apiserver writes (all, steady)", &|m| m.steady.writes.to_string())?;
        row(f, "apiserver reviews (SubjectAccess + Token), start-up / steady", &|m| {
            let reviews = |s: &Served| s.subject_access_reviews + s.token_reviews;
            format!("{} / {}", reviews(&m.startup), reviews(&m.steady))
        })?;
        for (label, pick) in [("start-up", 0), ("steady", 1), ("total", 2)] {
            row(f, &format!("control plane CPU-s, {label}"), &|m| {
                let parts: Vec<String> = m
                    .control_plane
                    .iter()
                    .map(|p| {
                        let v = [p.cpu_startup_s, p.cpu_steady_s, p.cpu_total_s][pick];
                        format!("{} {v:.1}", p.name)
                    })
                    .collect();
                parts.join(", ")
            })?;
            row(f, &format!("pool replicas CPU-s, {label}"), &|m| {
                let v: f64 = m
                    .replicas
                    .iter()
                    .map(|p| [p.cpu_startup_s, p.cpu_steady_s, p.cpu_total_s][pick])
                    .sum();
                if m.replicas.is_empty() {
                    "—".into()
                } else {
                    format!("{v:.1}")
                }
            })?;
        }
        row(f, "RSS (MiB)", &|m| {
            let parts: Vec<String> = m
                .control_plane
                .iter()
                .chain(&m.replicas)
                .map(|p| format!("{} {:.0}", p.name, p.rss_mib))
                .collect();
            parts.join(", ")
        })?;
        if modes.iter().any(|m| !m.replicas.is_empty()) {
            row(f, "pool replica RSS (MiB): ready, before any node / at the end; objects' bytes held; per node watch above ready (KiB)", &|m| {
                replica_parts(m, |p, watches| {
                    let ready = p.rss_ready_mib.unwrap_or(0.0);
                    let per_watch = (p.rss_mib - ready) * 1024.0 / watches;
                    let caches = p.caches_mib.unwrap_or(0.0);
                    Some(format!("{} {ready:.0} / {:.0}; {caches:.0}; {per_watch:.1}", p.name, p.rss_mib))
                })
            })?;
            row(f, "pool replica heap in use (MiB): ready / at the end; of it the watch history's bytes; per node watch above ready, the history left out (KiB)", &|m| {
                replica_parts(m, |p, watches| {
                    let (ready, end) = (p.heap_ready_mib?, p.heap_mib?);
                    let history = p.history_mib.unwrap_or(0.0);
                    let per_watch = (end - ready - history) * 1024.0 / watches;
                    Some(format!("{} {ready:.0} / {end:.0}; {history:.0}; {per_watch:.1}", p.name))
                })
            })?;
        }
        if modes.iter().any(|m| m.replicas.iter().any(|p| p.custom_caches_mib.unwrap_or(0.0) > 0.0))
        {
            row(f, "pool replica, custom resources' share (MiB): objects' bytes / watch history's bytes", &|m| {
                replica_parts(m, |p, _| {
                    let (held, history) = (p.custom_caches_mib?, p.custom_history_mib.unwrap_or(0.0));
                    Some(format!("{} {held:.1} / {history:.1}", p.name))
                })
            })?;
        }
        for what in ["endpointslices", "services", "pods", "ciliumendpoints"] {
            row(f, &format!("write → node sees it, {what}: p50 / p99 / max ms (n)"), &|m| {
                m.delivery.get(what).map_or("—".into(), |d| {
                    format!("{:.0} / {:.0} / {:.0} ({})", d.p50_ms, d.p99_ms, d.max_ms, d.count)
                })
            })?;
        }
        row(f, "events the nodes read (after sync)", &|m| {
            m.classes.iter().map(|c| c.events).sum::<u64>().to_string()
        })?;
        row(f, "watch errors / refused / restarts / out of order", &|m| {
            let sum = |g: fn(&ClassReport) -> u64| m.classes.iter().map(g).sum::<u64>();
            format!(
                "{} / {} / {} / {}",
                sum(|c| c.errors),
                sum(|c| c.refused),
                sum(|c| c.restarts),
                sum(|c| c.out_of_order)
            )
        })?;
        row(f, "watch failures by answer", &|m| {
            let mut all: BTreeMap<&str, u64> = BTreeMap::new();
            for c in &m.classes {
                for (k, n) in &c.failures {
                    *all.entry(k).or_default() += n;
                }
            }
            let parts: Vec<String> = all.iter().map(|(k, n)| format!("{k} {n}")).collect();
            parts.join(", ")
        })?;
        row(f, "watchers synced, by class", &|m| {
            let parts: Vec<String> = m
                .classes
                .iter()
                .filter(|c| c.synced < c.watchers)
                .map(|c| format!("{} {} of {}", c.class, c.synced, c.watchers))
                .collect();
            if parts.is_empty() {
                "all".into()
            } else {
                parts.join(", ")
            }
        })?;
        row(f, "kubelet leases ok / failed; pods' GETs; new, bound before: status ok / failed (refused)", &|m| {
            let k = &m.kubelet_writes;
            format!(
                "{} / {}; {}; {}, {} / {} ({})",
                k.lease_ok,
                k.lease_failed,
                k.pod_get_ok,
                k.pod_status_ok,
                k.existing_status_ok,
                k.pod_failed,
                k.refused
            )
        })?;
        row(f, "agents' starts: node status patches, tokens; not as a cluster answers", &|m| {
            let k = &m.kubelet_writes;
            format!("{}, {}; {}", k.node_status_ok, k.tokens_ok, k.start_failed)
        })?;
        row(
            f,
            "writer: slices, services, pods replaced, their CiliumEndpoints (failed, skipped)",
            &|m| {
                let w = &m.written;
                format!(
                    "{}, {}, {}, {} ({}, {})",
                    w.endpointslices,
                    w.services,
                    w.pods_replaced,
                    w.ciliumendpoints_replaced,
                    w.failed,
                    w.skipped
                )
            },
        )?;
        row(f, "views equal to the apiserver's", &|m| {
            format!("{} of {}", m.views_checked - m.views_wrong, m.views_checked)
        })?;
        for m in modes {
            for e in &m.views_examples {
                writeln!(f, "  {}: differs: {e}", m.mode)?;
            }
        }
        for d in self.modes.iter().flat_map(|m| &m.disruptions) {
            writeln!(f, "{d}")?;
        }
        for s in self.modes.iter().filter_map(|m| m.soak.as_ref()) {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Disruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.served;
        let secs = |v: Option<f64>| v.map_or("no".into(), |v| format!("{v:.1} s"));
        writeln!(f, "{} ({:.0} s):", self.name, self.seconds)?;
        writeln!(
            f,
            "  apiserver LIST / WATCH / GET: {} / {} / {} (bound on lists and proofs: {}); writes {}, reviews {}",
            s.list,
            s.watch,
            s.get,
            self.bound,
            s.writes,
            s.subject_access_reviews + s.token_reviews
        )?;
        let calls: Vec<String> = self.pool_calls.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(f, "  pool upstream calls: {}", calls.join(", "))?;
        writeln!(
            f,
            "  apiserver watch events / MB sent: {} / {:.1}",
            s.watch_events,
            s.watch_event_bytes as f64 / 1e6
        )?;
        if let Some(r) = self.replica_ready_s {
            writeln!(f, "  replica ready {r:.1} s after its start")?;
        }
        writeln!(
            f,
            "  done (synced again / back home): {}; node tiers home {} of {}; moved away {}, back {}",
            secs(self.done_s),
            self.home.0,
            self.home.1,
            self.moved_away,
            self.moved_back
        )?;
        let failures: Vec<String> =
            self.watch_failures.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            f,
            "  watch failures: {}; restarts {}; out of order {}",
            if failures.is_empty() { "none".into() } else { failures.join(", ") },
            self.restarts,
            self.out_of_order
        )?;
        let d = &self.delivery;
        write!(
            f,
            "  write → node sees it: p50 / p99 / max {:.0} / {:.0} / {:.0} ms ({})",
            d.p50_ms, d.p99_ms, d.max_ms, d.count
        )
    }
}

/// Each pool replica's part of a row (given the replica and the node watches it serves, at
/// least 1), joined; "—" when none has one.
fn replica_parts(m: &ModeReport, part: impl Fn(&Process, f64) -> Option<String>) -> String {
    let watches = (m.watches as f64 / m.replicas.len().max(1) as f64).max(1.0);
    let parts: Vec<String> = m.replicas.iter().filter_map(|p| part(p, watches)).collect();
    if parts.is_empty() {
        "—".into()
    } else {
        parts.join(", ")
    }
}
