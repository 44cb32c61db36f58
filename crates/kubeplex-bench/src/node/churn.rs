//! The cluster's controllers during a run, writing straight to the fake apiserver (never
//! through kubeplex, and without requests, so that the apiserver's figures are the agents'):
//! a rolling update that goes on through every app in turn — each step deletes an app's oldest
//! pod and creates its replacement bound to the app's next node (created with `spec.nodeName` set, as
//! after the scheduler's binding: the sim serves no `pods/binding`) — the app's EndpointSlice
//! following its pods, and a Service changed now and then.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kubeplex_sim::Sim;
use serde::Serialize;
use serde_json::{json, Value};

use super::cluster::{self, app_name, app_namespace, node_name, PodRef};
use super::shared::Shared;
use super::NodeSpec;

/// What the controllers wrote.
#[derive(Debug, Default)]
pub struct ChurnCounts {
    pub pods_created: AtomicU64,
    pub pods_deleted: AtomicU64,
    pub endpointslice_updates: AtomicU64,
    pub service_updates: AtomicU64,
    pub failed: AtomicU64,
}

pub struct Churn {
    spec: NodeSpec,
    apps: Vec<VecDeque<PodRef>>,
    /// Pods created so far (names and addresses), and of each app.
    created: usize,
    created_of: Vec<usize>,
    service_versions: Vec<u64>,
}

impl Churn {
    /// The pods of the cluster's start (`pods_per_node` per node on average, running),
    /// to seed the fake apiserver with: they exist before it serves, so even the Node
    /// authorizer's lagging graph has them.
    pub fn initial(spec: &NodeSpec) -> (Churn, Vec<Value>) {
        let mut churn = Churn {
            spec: spec.clone(),
            apps: vec![VecDeque::new(); spec.apps],
            created: 0,
            created_of: vec![0; spec.apps],
            service_versions: vec![0; spec.apps],
        };
        // Each app's pods spread over consecutive nodes, and each node runs pods of as many
        // apps as it has pods (app a's k-th pod on node a + k).
        let pods = (0..spec.nodes * spec.pods_per_node)
            .map(|i| {
                let a = i % spec.apps;
                churn.next_pod(a, (a + churn.created_of[a]) % spec.nodes, true)
            })
            .collect();
        (churn, pods)
    }

    /// Once the fake apiserver serves them: the seeded pods' uids, and the apps' EndpointSlices.
    pub fn link(&mut self, sim: &Sim) -> anyhow::Result<()> {
        for a in 0..self.spec.apps {
            let ns = app_namespace(&self.spec, a);
            for p in self.apps[a].iter_mut() {
                let pod = sim.get("", "pods", &ns, &p.name);
                let uid =
                    pod.as_ref().and_then(|v| v.pointer("/metadata/uid")).and_then(Value::as_str);
                p.uid = uid.unwrap_or("").to_string();
            }
            sim.upsert(cluster::endpoint_slice(&self.spec, a, self.apps[a].make_contiguous()))
                .map_err(|s| anyhow::anyhow!("endpointslice: {}", s.message))?;
        }
        Ok(())
    }

    /// The next pod of app `a` on node `node`, recorded as the app's newest.
    fn next_pod(&mut self, a: usize, node: usize, running: bool) -> Value {
        let k = self.created;
        self.created += 1;
        self.created_of[a] += 1;
        let (name, node) = (format!("{}-{k:06}", app_name(a)), node_name(node));
        let ip = format!("10.244.{}.{}", k / 250 % 250, k % 250 + 2);
        let mut pod = cluster::pod(&self.spec, a, &name, &node, &ip, running);
        pod["metadata"]["annotations"] = json!({"kubeplex-bench/pod-ip": ip});
        self.apps[a].push_back(PodRef { name, node, ip, uid: String::new() });
        pod
    }

    /// Binds a new pod of app `a` to `node` (now: its kubelet's latency counts from here).
    fn create(&mut self, sim: &Sim, a: usize, node: usize, shared: &Shared) -> anyhow::Result<()> {
        let pod = self.next_pod(a, node, false);
        let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        shared.bound(format!("{}/{name}", app_namespace(&self.spec, a)));
        let stored = sim.create(pod).map_err(|s| anyhow::anyhow!("pod {name}: {}", s.message))?;
        let uid = stored.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        if let Some(p) = self.apps[a].back_mut() {
            p.uid = uid.to_string();
        }
        Ok(())
    }

    /// Runs for the spec's duration: `pod_rate` rollout steps a second, a Service change every
    /// `service_every`.
    pub async fn run(mut self, sim: Arc<Sim>, shared: Arc<Shared>, counts: Arc<ChurnCounts>) {
        let spec = self.spec.clone();
        let deadline = tokio::time::Instant::now() + spec.duration;
        let mut steps = (spec.pod_rate > 0.0).then(|| {
            let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / spec.pod_rate));
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let mut services = (!spec.service_every.is_zero()).then(|| {
            let mut t = tokio::time::interval_at(
                tokio::time::Instant::now() + spec.service_every,
                spec.service_every,
            );
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let max_steps = (spec.pod_rate * spec.duration.as_secs_f64()).ceil() as u64;
        let (mut step, mut service) = (0u64, 0usize);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = async { steps.as_mut().expect("guarded").tick().await }, if steps.is_some() && step < max_steps => {
                    let ok = self.roll(&sim, step as usize, &shared, &counts);
                    if ok.is_err() {
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    step += 1;
                }
                _ = async { services.as_mut().expect("guarded").tick().await }, if services.is_some() => {
                    let a = service % spec.apps.max(1);
                    service += 1;
                    self.service_versions[a] += 1;
                    match sim.upsert(cluster::service(&spec, a, self.service_versions[a])) {
                        Ok(_) => counts.service_updates.fetch_add(1, Ordering::Relaxed),
                        Err(_) => counts.failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
        }
    }

    /// One rollout step of app `step % apps`: its oldest pod replaced by one on its next node.
    fn roll(
        &mut self,
        sim: &Sim,
        step: usize,
        shared: &Shared,
        counts: &ChurnCounts,
    ) -> anyhow::Result<()> {
        let a = step % self.spec.apps;
        let ns = app_namespace(&self.spec, a);
        if let Some(old) = self.apps[a].pop_front() {
            sim.delete("", "pods", &ns, &old.name)
                .map_err(|s| anyhow::anyhow!("pod {}: {}", old.name, s.message))?;
            counts.pods_deleted.fetch_add(1, Ordering::Relaxed);
        }
        // App a's k-th pod goes to node a + k, as its first ones did: each app stays spread
        // over nodes and each node keeps running many apps.
        let node = (a + self.created_of[a]) % self.spec.nodes;
        self.create(sim, a, node, shared)?;
        counts.pods_created.fetch_add(1, Ordering::Relaxed);
        sim.upsert(cluster::endpoint_slice(&self.spec, a, self.apps[a].make_contiguous()))
            .map_err(|s| anyhow::anyhow!("endpointslice: {}", s.message))?;
        counts.endpointslice_updates.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// [`ChurnCounts`] at the end of a run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ChurnReport {
    pub pods_created: u64,
    pub pods_deleted: u64,
    pub endpointslice_updates: u64,
    pub service_updates: u64,
    pub failed: u64,
}

impl ChurnCounts {
    pub fn report(&self) -> ChurnReport {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ChurnReport {
            pods_created: n(&self.pods_created),
            pods_deleted: n(&self.pods_deleted),
            endpointslice_updates: n(&self.endpointslice_updates),
            service_updates: n(&self.service_updates),
            failed: n(&self.failed),
        }
    }
}
