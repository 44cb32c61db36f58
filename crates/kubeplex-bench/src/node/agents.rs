//! The node's other agents, each a client of its own with its own ServiceAccount token:
//! - kube-proxy 1.36 (bound to `system:node-proxier`): services and endpointslices with the
//!   label selector it sends on both informers, servicecidrs, and its Node — protobuf,
//!   WatchList;
//! - a CNI-like agent (a ClusterRole reading pods, nodes, namespaces, services,
//!   endpointslices): its node's pods, and every node, namespace, service and endpointslice — in
//!   JSON, LIST at `resourceVersion=0` then WATCH (client-go's reflector without WatchList, as
//!   agents built on older client-go or with WatchListClient off read);
//! - a log-agent-like one (may get pods): a consistent GET of each new pod of its node by name,
//!   learnt from the node's kubelet when the pod's container starts (as a new log file would
//!   reveal it) — it watches nothing.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::kubelet::get_retrying;
use super::shared::Shared;
use crate::informer::{self, Informer, Start, Watched};
use crate::target::Target;

/// kube-proxy ignores headless services and services another proxy implements
/// (`pkg/proxy`: the same selector on its Service and EndpointSlice informers).
pub const KUBE_PROXY_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

const KUBE_PROXY_AGENT: &str = "kube-proxy/v1.36.2 (linux/amd64) kubernetes/0000000";
const CNI_AGENT: &str = "cni-agent/v1.0.0";
const LOG_AGENT: &str = "log-agent/v1.0.0";

/// Runs each informer of one agent until the caller drops them.
async fn informers(target: Arc<Target>, shared: Arc<Shared>, set: Vec<(&'static str, Informer)>) {
    let mut tasks = JoinSet::new();
    for (class, spec) in set {
        let w = Watched::new(spec);
        shared.watch_view(class, w.clone());
        let tally = shared.join(class).tally.clone();
        tasks.spawn(informer::run(target.clone(), w, tally, shared.since, None));
    }
    while tasks.join_next().await.is_some() {}
}

pub async fn kube_proxy(node: String, target: Arc<Target>, shared: Arc<Shared>) {
    let spec = |collection: &str, selectors: Vec<(&'static str, String)>| Informer {
        collection: collection.into(),
        selectors,
        protobuf: true,
        start: Start::WatchList,
        user_agent: KUBE_PROXY_AGENT,
    };
    let labels = || vec![("labelSelector", KUBE_PROXY_SELECTOR.to_string())];
    let set = vec![
        ("kube-proxy: services (label selector)", spec("/api/v1/services", labels())),
        (
            "kube-proxy: endpointslices (label selector)",
            spec("/apis/discovery.k8s.io/v1/endpointslices", labels()),
        ),
        ("kube-proxy: servicecidrs", spec("/apis/networking.k8s.io/v1/servicecidrs", vec![])),
        (
            "kube-proxy: its Node (metadata.name=NODE)",
            spec("/api/v1/nodes", vec![("fieldSelector", format!("metadata.name={node}"))]),
        ),
    ];
    informers(target, shared, set).await;
}

pub async fn cni(node: String, target: Arc<Target>, shared: Arc<Shared>) {
    let spec = |collection: &str, selectors: Vec<(&'static str, String)>| Informer {
        collection: collection.into(),
        selectors,
        protobuf: false,
        start: Start::ListWatch,
        user_agent: CNI_AGENT,
    };
    let set = vec![
        (
            "cni: its node's pods (JSON, spec.nodeName=NODE)",
            spec("/api/v1/pods", vec![("fieldSelector", format!("spec.nodeName={node}"))]),
        ),
        ("cni: nodes (JSON)", spec("/api/v1/nodes", vec![])),
        ("cni: namespaces (JSON)", spec("/api/v1/namespaces", vec![])),
        ("cni: services (JSON)", spec("/api/v1/services", vec![])),
        ("cni: endpointslices (JSON)", spec("/apis/discovery.k8s.io/v1/endpointslices", vec![])),
    ];
    informers(target, shared, set).await;
}

/// GETs each pod (`namespace/name`) the kubelet hands over, once, retrying while refused.
pub async fn log_agent(
    target: Arc<Target>,
    shared: Arc<Shared>,
    mut pods: mpsc::UnboundedReceiver<String>,
) {
    let headers = [("Accept", "application/json"), ("User-Agent", LOG_AGENT)];
    while let Some(key) = pods.recv().await {
        let (ns, name) = key.split_once('/').unwrap_or(("", &key));
        let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
        get_retrying(&target, &path, &headers, &shared.writes.log_agent_get).await;
    }
}
