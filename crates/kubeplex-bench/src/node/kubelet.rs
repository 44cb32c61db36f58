//! One node's kubelet, as kubelet 1.36 talks to the apiserver (client-go ≥ 1.35: protobuf,
//! WatchList informers):
//! - reads: its pods (`spec.nodeName=NODE`), its Node (`metadata.name=NODE`), services
//!   (`spec.clusterIP!=None`, for the pods' environment), runtime classes, CSI drivers, and one
//!   `metadata.name=X` watch per ConfigMap and Secret its pods use (the `Watch` change-detection
//!   strategy), started with the first pod that needs it and stopped with the last;
//! - writes: its Lease (created, then updated every 10 s), its node status (a strategic merge
//!   patch at start and then periodically), and for each pod bound to it the status manager's
//!   consistent GET then status patch (Pending, then Running once the ConfigMaps and Secrets it
//!   uses have been read and its container started) and the container events.
//!
//! A pod bound to the node is handed to the log agent once its container runs, as a new log
//! file would reveal it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::cluster::{pending_status, references, running_status};
use super::shared::{Outcomes, Shared};
use crate::informer::{self, Change, Informer, Start, Watched, ACCEPT_PROTOBUF};
use crate::target::Target;

const USER_AGENT: &str = "kubelet/v1.36.2 (linux/amd64) kubernetes/0000000";
/// How often the Lease is renewed (`nodeLeaseDurationSeconds` 40 / 4).
const LEASE_EVERY: Duration = Duration::from_secs(10);
/// How long a container takes to start (a fake runtime: image present).
const CONTAINER_START: Duration = Duration::from_millis(500);
/// The status manager syncs a pod's status when it changes and every `syncPeriod` (10 s,
/// `pkg/kubelet/status/status_manager.go`); a sync whose GET fails (the Node authorizer
/// refusing it until its graph has the binding) leaves the status for the next one.
const STATUS_SYNC_PERIOD: Duration = Duration::from_secs(10);
/// Syncs of a status that is not written yet, at most (a bound on the loop).
const STATUS_SYNCS: usize = 6;
/// The log agent's GET of a new pod is retried this many times while it is refused or not
/// found yet.
const GET_ATTEMPTS: usize = 10;
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// How long a pod's volumes wait for its ConfigMaps and Secrets (the kubelet waits two minutes
/// before it reports an error and retries).
const SOURCES_WAIT: Duration = Duration::from_secs(30);

pub const PODS: &str = "kubelet: pods (spec.nodeName=NODE)";
pub const NODE: &str = "kubelet: its Node (metadata.name=NODE)";
pub const SERVICES: &str = "kubelet: services (spec.clusterIP!=None)";
pub const RUNTIME_CLASSES: &str = "kubelet: runtimeclasses";
pub const CSI_DRIVERS: &str = "kubelet: csidrivers";
/// Synced from its own start, not the run's.
pub const NAMED: &str = "kubelet: a ConfigMap or Secret (metadata.name=X; sync from its start)";

/// The kubelet's own settings.
#[derive(Debug, Clone, Copy)]
pub struct KubeletConfig {
    /// How often the node status is patched (the kubelet: `nodeStatusReportFrequency`, 5m, and
    /// at once on a change).
    pub node_status_every: Duration,
    /// The run's length, which bounds the periodic loops.
    pub duration: Duration,
}

fn watch_list(collection: String, selectors: Vec<(&'static str, String)>) -> Informer {
    Informer {
        collection,
        selectors,
        protobuf: true,
        start: Start::WatchList,
        user_agent: USER_AGENT,
    }
}

/// A referenced ConfigMap or Secret's watch, shared by the pods that use it.
struct NamedWatch {
    pods: usize,
    task: AbortHandle,
    view: u64,
    watched: Arc<Watched>,
}

/// Runs node `node`'s kubelet until the caller drops it.
pub async fn run(
    node: String,
    target: Arc<Target>,
    shared: Arc<Shared>,
    config: KubeletConfig,
    logs: mpsc::UnboundedSender<String>,
) {
    let mut tasks = JoinSet::new();
    let (tx, mut changes) = mpsc::unbounded_channel();
    let field = |s: String| vec![("fieldSelector", s)];
    let base = [
        (PODS, watch_list("/api/v1/pods".into(), field(format!("spec.nodeName={node}"))), true),
        (NODE, watch_list("/api/v1/nodes".into(), field(format!("metadata.name={node}"))), false),
        (
            SERVICES,
            watch_list("/api/v1/services".into(), field("spec.clusterIP!=None".into())),
            false,
        ),
        (RUNTIME_CLASSES, watch_list("/apis/node.k8s.io/v1/runtimeclasses".into(), vec![]), false),
        (CSI_DRIVERS, watch_list("/apis/storage.k8s.io/v1/csidrivers".into(), vec![]), false),
    ];
    for (class, spec, handled) in base {
        let w = Watched::new(spec);
        shared.watch_view(class, w.clone());
        let tally = shared.join(class).tally.clone();
        let handler = handled.then(|| tx.clone());
        tasks.spawn(informer::run(target.clone(), w, tally, shared.since, handler));
    }
    drop(tx);
    tasks.spawn(lease(node.clone(), target.clone(), shared.clone(), config.duration));
    tasks.spawn(node_status(node.clone(), target.clone(), shared.clone(), config));

    let mut named: HashMap<String, NamedWatch> = HashMap::new();
    let mut uses: HashMap<String, Vec<String>> = HashMap::new();
    while let Some(change) = changes.recv().await {
        while tasks.try_join_next().is_some() {}
        match change {
            Change::Added { key, object } => {
                let bound = shared.seen(&key);
                let Some(pod) = decode(&object) else { continue };
                let (configmaps, secrets) = references(&pod);
                let ns = pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
                let (mut used, mut sources) = (Vec::new(), Vec::new());
                for (resource, name) in configmaps
                    .iter()
                    .map(|n| ("configmaps", n))
                    .chain(secrets.iter().map(|n| ("secrets", n)))
                {
                    let id = format!("{resource}/{ns}/{name}");
                    let watch = named.entry(id.clone()).or_insert_with(|| {
                        let collection = format!("/api/v1/namespaces/{ns}/{resource}");
                        let w = Watched::new(watch_list(
                            collection,
                            field(format!("metadata.name={name}")),
                        ));
                        let view = shared.watch_view(NAMED, w.clone());
                        let tally = shared.join(NAMED).tally.clone();
                        // Its sync time counts from its own start: how long a new pod's
                        // ConfigMap or Secret takes to be read.
                        let task = tasks.spawn(informer::run(
                            target.clone(),
                            w.clone(),
                            tally,
                            tokio::time::Instant::now(),
                            None,
                        ));
                        NamedWatch { pods: 0, task, view, watched: w }
                    });
                    watch.pods += 1;
                    sources.push(watch.watched.clone());
                    used.push(id);
                }
                uses.insert(key.clone(), used);
                // Pods bound before the kubelet started already run; new ones are started.
                let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
                if phase != "Running" {
                    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
                    let ip = pod
                        .pointer("/metadata/annotations/kubeplex-bench~1pod-ip")
                        .and_then(Value::as_str)
                        .unwrap_or("10.244.0.2");
                    let start = PodStart {
                        key,
                        bound,
                        sources,
                        uid: uid.to_string(),
                        node: node.clone(),
                        ip: ip.to_string(),
                        target: target.clone(),
                        shared: shared.clone(),
                    };
                    tasks.spawn(start.run(logs.clone()));
                }
            }
            Change::Deleted { key } => {
                for id in uses.remove(&key).unwrap_or_default() {
                    let stop = named.get_mut(&id).is_some_and(|w| {
                        w.pods -= 1;
                        w.pods == 0
                    });
                    if stop {
                        if let Some(w) = named.remove(&id) {
                            w.task.abort();
                            shared.forget(w.view);
                            // A watch whose pods went before it synced was abandoned, not
                            // failed: it leaves the class's count of clients to sync.
                            if !w.watched.synced.load(Ordering::Relaxed) {
                                shared.abandon(NAMED);
                            }
                        }
                    }
                }
            }
        }
    }
    // The pods informer is only dropped with the run; keep the other tasks until then.
    while tasks.join_next().await.is_some() {}
}

/// A pod's object from a watch event: a protobuf envelope (or JSON).
fn decode(object: &[u8]) -> Option<Value> {
    match kubeplex_wire::proto::decode_unknown(object) {
        Ok(env) => {
            let t = kubeplex_wire::codec::type_for(env.api_version, env.kind)?;
            kubeplex_wire::codec::from_protobuf(t, env.raw).ok()
        }
        Err(_) => serde_json::from_slice(object).ok(),
    }
}

/// What the kubelet does for a pod newly bound to it.
struct PodStart {
    /// `namespace/name`.
    key: String,
    /// When it was bound (pods bound during the run).
    bound: Option<tokio::time::Instant>,
    /// The watches of the ConfigMaps and Secrets it uses: its volumes and environment wait for
    /// them (the kubelet's managers wait for their reflector's first sync).
    sources: Vec<Arc<Watched>>,
    uid: String,
    node: String,
    ip: String,
    target: Arc<Target>,
    shared: Arc<Shared>,
}

/// What one status sync did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Synced {
    Written,
    /// The GET or the patch failed: the status waits for the next sync.
    NotYet,
    /// The pod is gone: nothing more to do.
    Gone,
}

impl PodStart {
    /// The pod worker and the status manager for one pod: its Pending status is synced at
    /// once; its volumes wait for the ConfigMaps and Secrets it uses, its container starts,
    /// and its Running status is synced — each sync again every 10 s while its GET is refused
    /// (the status manager's rule), and the newest status wins.
    async fn run(self, logs: mpsc::UnboundedSender<String>) {
        let seen = tokio::time::Instant::now();
        let mut written = match self.status(pending_status(&self.node)).await {
            Synced::Gone => return,
            Synced::Written => {
                self.shared.first_status(seen);
                true
            }
            Synced::NotYet => false,
        };
        let synced = || self.sources.iter().all(|w| w.synced.load(Ordering::Relaxed));
        let sources_by = seen + SOURCES_WAIT;
        let mut next_sync = tokio::time::Instant::now() + STATUS_SYNC_PERIOD;
        while !synced() {
            let now = tokio::time::Instant::now();
            if now >= sources_by {
                self.shared.writes.pod_sources.record(false);
                return;
            }
            if !written && now >= next_sync {
                next_sync = now + STATUS_SYNC_PERIOD;
                match self.status(pending_status(&self.node)).await {
                    Synced::Gone => return,
                    Synced::Written => {
                        self.shared.first_status(seen);
                        written = true;
                    }
                    Synced::NotYet => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.shared.writes.pod_sources.record(true);
        tokio::time::sleep(CONTAINER_START).await;
        for (reason, message) in [
            ("Pulled", "Container image \"registry.example/app:1.0\" already present on machine"),
            ("Created", "Created container: app"),
            ("Started", "Started container app"),
        ] {
            self.event(reason, message).await;
        }
        // A status change: synced at once, then with the periodic syncs until written.
        for sync in 0..STATUS_SYNCS {
            if sync > 0 {
                tokio::time::sleep(STATUS_SYNC_PERIOD).await;
            }
            match self.status(running_status(&self.node, &self.ip)).await {
                Synced::Gone => return,
                Synced::NotYet => continue,
                Synced::Written => {
                    if !written {
                        self.shared.first_status(seen);
                    }
                    if let Some(at) = self.bound {
                        self.shared.started(at);
                    }
                    let _ = logs.send(self.key.clone());
                    return;
                }
            }
        }
        self.shared.writes.pod_status.record(false);
    }

    fn path(&self) -> String {
        let (ns, name) = self.key.split_once('/').unwrap_or(("", &self.key));
        format!("/api/v1/namespaces/{ns}/pods/{name}")
    }

    /// One sync of the status manager (`syncPod`): a consistent GET of the pod, then a
    /// strategic merge patch of its status.
    async fn status(&self, status: Value) -> Synced {
        let writes = &self.shared.writes;
        let path = self.path();
        let headers = [("Accept", ACCEPT_PROTOBUF), ("User-Agent", USER_AGENT)];
        match self.target.fetch(Method::GET, &path, &headers, None).await {
            Ok((s, _)) if s.is_success() => writes.pod_get.record(true),
            Ok((StatusCode::NOT_FOUND, _)) => return Synced::Gone,
            // Refused (the graph has not caught up yet): counted, and left for the next sync;
            // a pod whose status is never written counts as a failed status write.
            Ok((StatusCode::FORBIDDEN, _)) => {
                writes.pod_get.refused.fetch_add(1, Ordering::Relaxed);
                return Synced::NotYet;
            }
            _ => {
                writes.pod_get.record(false);
                return Synced::NotYet;
            }
        }
        let body = json!({"metadata": {"uid": self.uid}, "status": status});
        let headers = [
            ("Accept", ACCEPT_PROTOBUF),
            ("User-Agent", USER_AGENT),
            ("Content-Type", "application/strategic-merge-patch+json"),
        ];
        let patched = self
            .target
            .fetch(
                Method::PATCH,
                &format!("{path}/status"),
                &headers,
                serde_json::to_vec(&body).ok(),
            )
            .await;
        let ok = patched.is_ok_and(|(s, _)| s.is_success());
        writes.pod_status.record(ok);
        if ok {
            Synced::Written
        } else {
            Synced::NotYet
        }
    }

    async fn event(&self, reason: &str, message: &str) {
        let (ns, name) = self.key.split_once('/').unwrap_or(("", &self.key));
        let now = super::cluster::chrono_now();
        let body = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{:016x}", rand::random::<u64>()), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
                "uid": self.uid, "fieldPath": "spec.containers{app}"},
            "reason": reason, "message": message,
            "source": {"component": "kubelet", "host": self.node},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1, "type": "Normal",
            "reportingComponent": "kubelet", "reportingInstance": self.node});
        let headers = [("Accept", ACCEPT_PROTOBUF), ("User-Agent", USER_AGENT)];
        let path = format!("/api/v1/namespaces/{ns}/events");
        let sent =
            self.target.fetch(Method::POST, &path, &headers, serde_json::to_vec(&body).ok()).await;
        let ok = sent.as_ref().is_ok_and(|(s, _)| s.is_success());
        if !ok {
            let answer = sent.map(|(s, b)| format!("{s} {}", String::from_utf8_lossy(&b)));
            tracing::warn!(pod = %self.key, ?answer, "event not written");
        }
        self.shared.writes.events.record(ok);
    }
}

/// A GET retried while it is refused (403) or not found yet; whether it succeeded.
pub async fn get_retrying(
    target: &Target,
    path: &str,
    headers: &[(&str, &str)],
    outcomes: &Outcomes,
) -> bool {
    for attempt in 0..GET_ATTEMPTS {
        match target.fetch(Method::GET, path, headers, None).await {
            Ok((s, _)) if s.is_success() => {
                outcomes.record(true);
                return true;
            }
            Ok((StatusCode::FORBIDDEN, _)) => {
                outcomes.refused.fetch_add(1, Ordering::Relaxed);
            }
            // Deleted meanwhile (a rollout): nothing to do.
            Ok((StatusCode::NOT_FOUND, _)) if attempt > 0 => break,
            _ => {}
        }
        tokio::time::sleep(RETRY_AFTER).await;
    }
    outcomes.record(false);
    false
}

/// The node lease: created if missing, then renewed every 10 s by an update of the last copy
/// (a conflict re-reads it first), for the run's length.
async fn lease(node: String, target: Arc<Target>, shared: Arc<Shared>, duration: Duration) {
    let collection = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let path = format!("{collection}/{node}");
    let headers = [("Accept", "application/json"), ("User-Agent", USER_AGENT)];
    let outcomes = &shared.writes.lease;
    let mut current: Option<Value> = None;
    let mut tick = tokio::time::interval(LEASE_EVERY);
    let renewals = duration.as_secs() / LEASE_EVERY.as_secs() + 2;
    for _ in 0..renewals {
        tick.tick().await;
        let now = super::cluster::micro_now();
        let result = match current.take() {
            None => match target.fetch(Method::GET, &path, &headers, None).await {
                Ok((s, body)) if s.is_success() => Ok((s, body)),
                Ok((StatusCode::NOT_FOUND, _)) => {
                    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": node, "namespace": "kube-node-lease"},
                        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}});
                    target
                        .fetch(Method::POST, collection, &headers, serde_json::to_vec(&lease).ok())
                        .await
                }
                other => other,
            },
            Some(mut lease) => {
                lease["spec"]["renewTime"] = json!(now);
                target.fetch(Method::PUT, &path, &headers, serde_json::to_vec(&lease).ok()).await
            }
        };
        match result {
            Ok((s, body)) if s.is_success() => {
                outcomes.record(true);
                current = serde_json::from_slice(&body).ok();
            }
            _ => outcomes.record(false),
        }
    }
}

/// Node status: a strategic merge patch of the Ready condition's heartbeat, at start and then
/// every `node_status_every`, for the run's length.
async fn node_status(
    node: String,
    target: Arc<Target>,
    shared: Arc<Shared>,
    config: KubeletConfig,
) {
    let every = config.node_status_every.max(Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    let reports = config.duration.as_secs_f64() / every.as_secs_f64();
    let headers = [
        ("Accept", ACCEPT_PROTOBUF),
        ("User-Agent", USER_AGENT),
        ("Content-Type", "application/strategic-merge-patch+json"),
    ];
    for _ in 0..(reports.ceil() as u64 + 1).min(10_000) {
        tick.tick().await;
        let now = super::cluster::chrono_now();
        let patch = json!({"status": {"conditions": [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": now, "reason": "KubeletHasSufficientMemory"},
            {"type": "DiskPressure", "status": "False", "lastHeartbeatTime": now, "reason": "KubeletHasNoDiskPressure"},
            {"type": "PIDPressure", "status": "False", "lastHeartbeatTime": now, "reason": "KubeletHasSufficientPID"},
            {"type": "Ready", "status": "True", "lastHeartbeatTime": now, "reason": "KubeletReady",
                "message": "kubelet is posting ready status"}]}});
        let path = format!("/api/v1/nodes/{node}/status");
        let sent =
            target.fetch(Method::PATCH, &path, &headers, serde_json::to_vec(&patch).ok()).await;
        shared.writes.node_status.record(sent.is_ok_and(|(s, _)| s.is_success()));
    }
}
