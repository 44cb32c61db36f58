//! One emulated node: what its agents send the apiserver (directly), or what its node tier
//! sends its pool (through the pool).
//!
//! Directly — as the 1.36 agents do (docs/design.md §7; `node::kubelet`, `node::agents`):
//! - the kubelet (its client certificate, one HTTP/2 connection): WatchLists of its pods
//!   (`spec.nodeName=NODE`), its Node (`metadata.name=NODE`), services (`spec.clusterIP!=None`),
//!   runtimeclasses and csidrivers, and of each ConfigMap and Secret its pods mount, by name
//!   (`metadata.name=NAME` in the namespace: the kubelet's watch-based ConfigMap and Secret
//!   managers, one watch per object its pods use: their app's, and the two every pod's
//!   projected token volume names); at its start its registration (the Node, its CSINode, node
//!   status patches); its Lease renewed every 10 s; for each of its pods the service account
//!   token of its projected volume and the status manager's syncs (a GET of the pod and a status
//!   patch each), and a GET of each pod deleted;
//! - kube-proxy (`system:kube-proxy`, a connection of its own): services and endpointslices with
//!   its label selector, servicecidrs, its Node; an Event as it starts.
//! - with `--cni`, a CNI-like agent (the ServiceAccount `kube-system/cni-agent`, a connection of
//!   its own): its node's pods and every node, namespace, service and endpointslice, in JSON —
//!   the node scenario's (`node::agents::cni`), as WatchLists.
//!
//! Calibrated against kubemark's 1.36 kubelet and kube-proxy, request by request from the
//! apiserver's audit log (scripts/realcluster/calibrate.py; BENCHMARKS.md "Calibration"). One
//! deliberate difference: kubemark's hollow kube-proxy has no NodeManager, the real one watches
//! its Node (cmd/kube-proxy/app/server.go, `proxy.NewNodeManager`); the emulated one does.
//!
//! Through the pool — what a node tier with the shipped configuration (`config/node.yaml`) sends
//! upstream for those agents, on one HTTP/2 connection with the node tiers' certificate: the
//! list+watch of each cache (its pods, its Node, services, kube-proxy's endpointslices); the
//! watches it has no cache for (runtimeclasses, csidrivers, servicecidrs, the kubelet's named
//! ConfigMap and Secret watches) and the kubelet's writes and reads by name, passed on as the
//! agent (`Impersonate-User`).
//! For a CNI-like agent its node tier renders the JSON pods and services from its protobuf
//! caches, and lists and watches nodes, namespaces and endpointslices in JSON as itself
//! (`watches::cni_watches`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::cluster::{pending_status, running_status, started_status, Shape, NAMESPACE};
use super::link::Link;
use super::watcher::{self, ClassStats, PodSeen, Scope, View};
use crate::node::cluster::node_name;

mod watches;

pub use self::watches::{resources, watches_per_node, whole_scopes};
use self::watches::{watches, Agent, PassOn, KUBELET, KUBE_PROXY};

/// The kubelet renews its Lease every `nodeLeaseDurationSeconds` (40) / 4.
const LEASE_EVERY: Duration = Duration::from_secs(10);
/// A refused or failed GET/PATCH of a new pod is tried again after this (doubling), this many
/// times: the status manager's next sync comes soon after a refusal.
const RETRY_AFTER: Duration = Duration::from_millis(100);
const ATTEMPTS: u32 = 6;

/// Whom node `i` talks to.
pub enum Conns {
    Direct {
        kubelet: Arc<Link>,
        kube_proxy: Arc<Link>,
        /// The CNI-like agent's, when the run has one.
        cni: Option<Arc<Link>>,
    },
    /// Its node tier's connection to the pool replicas, and the tokens of its kube-proxy and
    /// CNI-like agent, whose requests the node tier passes on with them as they are.
    Pool { tier: Arc<Link>, kube_proxy: String, cni: String },
}

impl Conns {
    /// The link whose moves the run follows: the node tier's, or the kubelet's.
    pub fn link(&self) -> Arc<Link> {
        match self {
            Conns::Direct { kubelet, .. } => kubelet.clone(),
            Conns::Pool { tier, .. } => tier.clone(),
        }
    }
}

/// The writes and named reads of every node's kubelet (and kube-proxy's Event).
#[derive(Default)]
pub struct Writes {
    pub lease_ok: AtomicU64,
    pub lease_failed: AtomicU64,
    pub pod_get_ok: AtomicU64,
    /// New pods whose every status sync was written.
    pub pod_status_ok: AtomicU64,
    pub pod_failed: AtomicU64,
    /// Pods bound before the kubelet started whose every status sync was written.
    pub existing_status_ok: AtomicU64,
    /// Service account tokens requested for the pods' projected volumes, answered 201.
    pub tokens_ok: AtomicU64,
    /// The registrations' and kube-proxy's requests not answered as a real cluster answers
    /// them (the Node 409 or 201, its CSINode 201 or 409, the status patches and the Event 2xx).
    pub start_failed: AtomicU64,
    pub node_status_ok: AtomicU64,
    /// Answered 403 on the way (then retried).
    pub refused: AtomicU64,
    /// Set once the run compares the views with the apiserver: the agents write no more (a
    /// write landing meanwhile would move an object past what its watchers were shown).
    stopped: std::sync::atomic::AtomicBool,
}

impl Writes {
    /// Every agent's writes end: none is sent from now on (those under way land).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    fn stopping(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// The watch classes a node runs, by name, with their counts.
pub type Classes = BTreeMap<&'static str, Arc<ClassStats>>;

/// What a run checks at the end: each watcher's view and its scope, by (node, watch): a node
/// started again replaces its own.
pub type Views = Arc<Mutex<BTreeMap<(usize, usize), (Scope, Arc<Mutex<View>>)>>>;

/// [`PassOn`] for node `i`'s connections.
fn pass_on(i: usize, conns: &Conns) -> PassOn {
    match conns {
        Conns::Direct { .. } => PassOn::default(),
        Conns::Pool { kube_proxy, cni, .. } => PassOn {
            kubelet: vec![("Impersonate-User", format!("system:node:{}", node_name(i)))],
            kube_proxy: vec![("Authorization", format!("Bearer {kube_proxy}"))],
            cni: vec![("Authorization", format!("Bearer {cni}"))],
        },
    }
}

/// Runs node `i` until the caller drops it. `restarted`: its node tier started again (through
/// the pool), with its state directory (deploy/components/disk-state, which the pool overlay
/// includes) — each of its caches resumes from the state it wrote as it stopped, a watch from
/// that RV (`live::reflector::resume`), and the watches it passes on resume from the RV their
/// agents saw (the last bookmark before the stop): every watch from its view's RV.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    i: usize,
    shape: Shape,
    conns: Conns,
    classes: Arc<Mutex<Classes>>,
    views: Views,
    writes: Arc<Writes>,
    since: Instant,
    restarted: bool,
) {
    let pool = matches!(conns, Conns::Pool { .. });
    let (kubelet, kube_proxy, cni) = match &conns {
        Conns::Direct { kubelet, kube_proxy, cni } => {
            (kubelet.clone(), kube_proxy.clone(), cni.clone().unwrap_or_else(|| kubelet.clone()))
        }
        Conns::Pool { tier, .. } => (tier.clone(), tier.clone(), tier.clone()),
    };
    let pass = pass_on(i, &conns);
    let mut tasks = JoinSet::new();
    tasks.spawn(kubelet.clone().move_back());
    let (pods_tx, pods_rx) = mpsc::channel(1024);
    for (w, (agent, spec)) in watches(i, pool, &shape, &pass).into_iter().enumerate() {
        let stats = classes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(spec.class)
            .or_default()
            .clone();
        let mut all = views.lock().unwrap_or_else(|p| p.into_inner());
        // A node tier started again resumes each watch from what it saw.
        let resume = all
            .get(&(i, w))
            .filter(|_| restarted)
            .map(|(_, v)| v.clone())
            .filter(|v| v.lock().unwrap_or_else(|p| p.into_inner()).synced);
        let from = resume.as_ref().map(|v| v.lock().unwrap_or_else(|p| p.into_inner()).rv);
        let view = resume.unwrap_or_default();
        all.insert((i, w), (spec.scope.clone(), view.clone()));
        drop(all);
        let link = match agent {
            Agent::Kubelet => kubelet.clone(),
            Agent::KubeProxy => kube_proxy.clone(),
            Agent::Cni => cni.clone(),
        };
        // The kubelet's status manager learns of its pods from its own watch.
        let kubelets_pods = agent == Agent::Kubelet && matches!(spec.scope, Scope::NodePods(_));
        let pods = kubelets_pods.then(|| pods_tx.clone());
        tasks.spawn(watcher::run(link, spec, stats, view, since, pods, from));
    }
    drop(pods_tx);
    let imp = pass.kubelet.clone();
    if !restarted {
        // A node tier started again is not its agents starting again.
        let proxy_imp = pass.kube_proxy.clone();
        tasks.spawn(register(i, kubelet.clone(), imp.clone(), writes.clone()));
        tasks.spawn(proxy_started(i, kube_proxy, proxy_imp, writes.clone()));
    }
    tasks.spawn(lease(i, kubelet.clone(), imp.clone(), writes.clone()));
    tasks.spawn(status_manager(i, kubelet, imp, writes, pods_rx));
    while tasks.join_next().await.is_some() {}
}

fn headers<'a>(
    imp: &'a [(&'static str, String)],
    extra: &[(&'static str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut h: Vec<(&str, &str)> = vec![("User-Agent", KUBELET)];
    h.extend(extra.iter().copied());
    h.extend(imp.iter().map(|(k, v)| (*k, v.as_str())));
    h
}

/// The kubelet's Lease: read (created if missing), then renewed every 10 s, from an offset of
/// its own in the period (kubelets start at different times).
async fn lease(i: usize, link: Arc<Link>, imp: Vec<(&'static str, String)>, writes: Arc<Writes>) {
    let node = node_name(i);
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}");
    let h = headers(&imp, &[("Accept", "application/json")]);
    let offset = Duration::from_millis(rand::random_range(0..LEASE_EVERY.as_millis() as u64));
    tokio::time::sleep(offset).await;
    let mut tick = tokio::time::interval(LEASE_EVERY);
    let mut current: Option<serde_json::Value> = None;
    // Bounded: a day of renewals.
    for _ in 0..8_640 {
        tick.tick().await;
        if writes.stopping() {
            return;
        }
        let (upstream, target) = link.current();
        let now = crate::node::cluster::micro_now();
        let ok = match current.take() {
            None => {
                let got = target.fetch(Method::GET, &path, &h, None).await;
                match got {
                    Ok((s, body)) if s.is_success() => {
                        current = serde_json::from_slice(&body).ok();
                        true
                    }
                    Ok((StatusCode::NOT_FOUND, _)) => {
                        let lease = json!({
                            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": node, "namespace": "kube-node-lease"},
                            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now},
                        });
                        let create =
                            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
                        let body = serde_json::to_vec(&lease).unwrap_or_default();
                        match target.fetch(Method::POST, create, &h, Some(body)).await {
                            Ok((s, body)) if s.is_success() => {
                                current = serde_json::from_slice(&body).ok();
                                true
                            }
                            _ => false,
                        }
                    }
                    Ok(_) => false,
                    Err(_) => {
                        link.failed(upstream);
                        false
                    }
                }
            }
            Some(mut lease) => {
                lease["spec"]["renewTime"] = json!(now);
                let body = serde_json::to_vec(&lease).unwrap_or_default();
                match target.fetch(Method::PUT, &path, &h, Some(body)).await {
                    Ok((s, body)) if s.is_success() => {
                        current = serde_json::from_slice(&body).ok();
                        true
                    }
                    Ok(_) => false,
                    Err(_) => {
                        link.failed(upstream);
                        false
                    }
                }
            }
        };
        let counter = if ok { &writes.lease_ok } else { &writes.lease_failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A request of the kubelet's registration: method, path, headers, body, the answers a real
/// cluster gives it.
type Step<'a> = (Method, String, &'a [(&'a str, &'a str)], Option<Vec<u8>>, &'static [u16]);

/// The kubelet's start, as kubemark's 1.36 kubelet sends it (the apiserver's audit log,
/// scripts/realcluster/calibrate.py): its CSINode looked up, its Node registered (it exists:
/// 409, then read), its CSINode created, the node status patched twice, and again when its
/// pods have started (~30 s), then every `nodeStatusReportFrequency` (5 min).
async fn register(
    i: usize,
    link: Arc<Link>,
    imp: Vec<(&'static str, String)>,
    writes: Arc<Writes>,
) {
    let node = node_name(i);
    let json = headers(&imp, &[("Accept", "application/json")]);
    let proto = headers(&imp, &[("Accept", crate::informer::ACCEPT_PROTOBUF)]);
    let csinode = format!("/apis/storage.k8s.io/v1/csinodes/{node}");
    let node_path = format!("/api/v1/nodes/{node}");
    let registered = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}});
    let csi = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": node}, "spec": {"drivers": []}});
    let body = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_default();
    let steps: [Step; 7] = [
        (Method::GET, format!("{csinode}?resourceVersion=0"), &proto, None, &[200, 404]),
        (Method::POST, "/api/v1/nodes".into(), &json, Some(body(&registered)), &[201, 409]),
        (Method::GET, node_path.clone(), &proto, None, &[200]),
        (Method::GET, format!("{node_path}?timeout=10s"), &proto, None, &[200]),
        (Method::GET, csinode.clone(), &proto, None, &[200, 404]),
        (
            Method::POST,
            "/apis/storage.k8s.io/v1/csinodes".into(),
            &json,
            Some(body(&csi)),
            &[201, 409],
        ),
        (Method::GET, node_path.clone(), &proto, None, &[200]),
    ];
    for (method, path, h, body, ok) in steps {
        start_request(&link, &writes, method, &path, h, body, ok).await;
    }
    let patch = headers(
        &imp,
        &[
            ("Content-Type", "application/strategic-merge-patch+json"),
            ("Accept", "application/json"),
        ],
    );
    let ready_since = crate::node::cluster::chrono_now();
    let status = || {
        body(&json!({"status": {"conditions": [{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "message": "kubelet is posting ready status",
            "lastHeartbeatTime": crate::node::cluster::chrono_now(),
            "lastTransitionTime": ready_since}]}}))
    };
    let status_path = format!("{node_path}/status");
    // Twice at once, once its pods started, then every 5 minutes (bounded: a day).
    let pauses = [Duration::ZERO, Duration::ZERO, Duration::from_secs(30)]
        .into_iter()
        .chain(std::iter::repeat_n(Duration::from_secs(300), 288));
    for pause in pauses {
        tokio::time::sleep(pause).await;
        let body = Some(status());
        if start_request(&link, &writes, Method::PATCH, &status_path, &patch, body, &[200]).await {
            writes.node_status_ok.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One request on the link's current upstream: its answer's status, or none when the
/// connection failed (the link then tries the next upstream).
async fn send(
    link: &Link,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Option<StatusCode> {
    let (upstream, target) = link.current();
    match target.fetch(method, path, headers, body).await {
        Ok((s, _)) => Some(s),
        Err(_) => {
            link.failed(upstream);
            None
        }
    }
}

/// One request of an agent's start, answered `ok` as a real cluster answers it, or counted in
/// `start_failed`; whether it was.
async fn start_request(
    link: &Link,
    writes: &Writes,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    ok: &[u16],
) -> bool {
    if writes.stopping() {
        return false;
    }
    let answered =
        send(link, method, path, headers, body).await.is_some_and(|s| ok.contains(&s.as_u16()));
    if !answered {
        writes.start_failed.fetch_add(1, Ordering::Relaxed);
    }
    answered
}

/// kube-proxy's start: the Event it records (events.k8s.io, in `default`, about its Node).
async fn proxy_started(
    i: usize,
    link: Arc<Link>,
    imp: Vec<(&'static str, String)>,
    writes: Arc<Writes>,
) {
    let node = node_name(i);
    let mut h: Vec<(&str, &str)> = vec![("User-Agent", KUBE_PROXY), ("Accept", "application/json")];
    h.extend(imp.iter().map(|(k, v)| (*k, v.as_str())));
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": format!("{node}.{:016x}", rand::random::<u64>()), "namespace": "default"},
        "eventTime": crate::node::cluster::micro_now(),
        "reportingController": "kube-proxy", "reportingInstance": format!("kube-proxy-{node}"),
        "action": "StartKubeProxy", "reason": "Starting", "type": "Normal", "note": "",
        "regarding": {"kind": "Node", "name": node, "uid": node}});
    let path = "/apis/events.k8s.io/v1/namespaces/default/events";
    let body = serde_json::to_vec(&event).unwrap_or_default();
    start_request(&link, &writes, Method::POST, path, &h, Some(body), &[201]).await;
}

/// What the kubelet sends for each of its pods, as kubemark's 1.36 kubelet sends it (the
/// apiserver's audit log, scripts/realcluster/calibrate.py):
/// - a pod bound before it started: its projected volume's service account token requested,
///   then its status synced twice (Pending, then Running and Ready) — each sync a GET of the
///   pod and a status patch; one pod in five once (its container already running at the first
///   sync: 1.8 syncs a pod were measured);
/// - a new pod: the token, then three syncs (Pending, Running, Ready), the first GETting the
///   pod twice;
/// - a pod deleted: one GET (404), the status manager's last sync of it.
///
/// A refused GET (the Node authorizer's graph catching up with a binding) is tried again after
/// 100 ms, doubling, as the status manager's next sync comes soon after a refusal.
async fn status_manager(
    i: usize,
    link: Arc<Link>,
    imp: Vec<(&'static str, String)>,
    writes: Arc<Writes>,
    mut pods: mpsc::Receiver<PodSeen>,
) {
    while let Some(seen) = pods.recv().await {
        if writes.stopping() {
            return;
        }
        let (key, new) = match &seen {
            PodSeen::Existing(key) => (key, false),
            PodSeen::Added(key) => (key, true),
            PodSeen::Deleted(key) => {
                if let Some(path) = pod_path(key) {
                    let get = headers(&imp, &[("Accept", crate::informer::ACCEPT_PROTOBUF)]);
                    send(&link, Method::GET, &path, &get, None).await;
                }
                continue;
            }
        };
        let Some(path) = pod_path(key) else { continue };
        let Some(slot) = key.rsplit('-').next().and_then(|s| s.parse::<usize>().ok()) else {
            continue;
        };
        token(&link, &imp, key).await.then(|| writes.tokens_ok.fetch_add(1, Ordering::Relaxed));
        let statuses = match (new, slot % 5) {
            (true, _) => vec![pending_status(), started_status(i, slot), running_status(i, slot)],
            (false, 0) => vec![running_status(i, slot)],
            (false, _) => vec![pending_status(), running_status(i, slot)],
        };
        let mut ok = true;
        for (round, status) in statuses.into_iter().enumerate() {
            let gets = if new && round == 0 { 2 } else { 1 };
            ok &= sync(&link, &imp, &writes, &path, gets, status).await;
        }
        let counter = match (ok, new) {
            (true, true) => &writes.pod_status_ok,
            (true, false) => &writes.existing_status_ok,
            (false, _) => &writes.pod_failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// `namespace/name` of a pod of the run's namespace → its path.
fn pod_path(key: &str) -> Option<String> {
    let (ns, name) = key.split_once('/')?;
    (ns == NAMESPACE).then(|| format!("/api/v1/namespaces/{ns}/pods/{name}"))
}

/// The service account token of a pod's projected volume (bound to the pod); whether it came.
async fn token(link: &Link, imp: &[(&'static str, String)], key: &str) -> bool {
    let Some((ns, name)) = key.split_once('/') else { return false };
    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/default/token");
    let h = headers(imp, &[("Content-Type", "application/json"), ("Accept", "application/json")]);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3607,
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name}}});
    let body = serde_json::to_vec(&request).unwrap_or_default();
    send(link, Method::POST, &path, &h, Some(body)).await.is_some_and(|s| s.is_success())
}

/// One status sync: `gets` GETs of the pod, then the patch, each GET tried again while
/// refused; whether the patch was written.
async fn sync(
    link: &Link,
    imp: &[(&'static str, String)],
    writes: &Writes,
    path: &str,
    gets: usize,
    status: serde_json::Value,
) -> bool {
    let get = headers(imp, &[("Accept", crate::informer::ACCEPT_PROTOBUF)]);
    let patch = headers(
        imp,
        &[("Content-Type", "application/merge-patch+json"), ("Accept", "application/json")],
    );
    let body = serde_json::to_vec(&status).unwrap_or_default();
    let mut wait = RETRY_AFTER;
    let mut got = 0;
    for _ in 0..ATTEMPTS + gets as u32 {
        if writes.stopping() {
            return false;
        }
        let (upstream, target) = link.current();
        let answer = if got < gets {
            target.fetch(Method::GET, path, &get, None).await
        } else {
            target.fetch(Method::PATCH, &format!("{path}/status"), &patch, Some(body.clone())).await
        };
        match answer {
            Ok((s, _)) if s.is_success() => {
                if got < gets {
                    writes.pod_get_ok.fetch_add(1, Ordering::Relaxed);
                    got += 1;
                    continue;
                }
                return true;
            }
            Ok((StatusCode::FORBIDDEN, _)) => {
                writes.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(_) => {
                link.failed(upstream);
            }
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
    false
}
