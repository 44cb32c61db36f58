//! The cluster's controllers during a run, straight to the apiserver as cluster-admin (never
//! through kubeplex): at `rate` changes a second, in turn, an EndpointSlice changed (every
//! node's kube-proxy reads it), a pod replaced (deleted, and created again bound to the same
//! node: that node's kubelet reads it, then GETs it and writes its status), another
//! EndpointSlice, and a Service changed (every node reads it); with Cilium agents, a replaced
//! pod's CiliumEndpoint replaced too (every node reads it). Each change carries the wall
//! clock in an annotation ([`STAMP`]), which the watchers turn into delivery times.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde::Serialize;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::cluster::{
    cilium_endpoint, pod, pod_name, service_name, Cluster, Shape, CILIUM, NAMESPACE, STAMP,
};
use super::watcher::now_micros;

/// Writes in flight at most (a slow apiserver makes the writer fall behind, not pile up).
const IN_FLIGHT: usize = 16;

#[derive(Debug, Default, Serialize)]
pub struct WriteCounts {
    pub endpointslices: AtomicU64,
    pub services: AtomicU64,
    pub pods_replaced: AtomicU64,
    /// With Cilium agents: each replaced pod's CiliumEndpoint, deleted and created again.
    pub ciliumendpoints_replaced: AtomicU64,
    pub failed: AtomicU64,
    /// Writes not sent because `IN_FLIGHT` were still pending.
    pub skipped: AtomicU64,
}

/// Writes until `until`.
pub async fn run(
    cluster: Arc<Cluster>,
    shape: Shape,
    rate: f64,
    until: Instant,
    counts: Arc<WriteCounts>,
) {
    if rate <= 0.0 || shape.nodes == 0 || shape.services == 0 || shape.pods_per_node == 0 {
        tokio::time::sleep_until(until).await;
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.min(1_000.0)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tasks = JoinSet::new();
    let mut n: usize = 0;
    while Instant::now() < until {
        tick.tick().await;
        while tasks.try_join_next().is_some() {}
        if tasks.len() >= IN_FLIGHT {
            counts.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let (cluster, counts) = (cluster.clone(), counts.clone());
        let step = n;
        tasks.spawn(async move {
            let ok = write(&cluster, &shape, step, &counts).await;
            if !ok {
                counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        });
        n += 1;
    }
    while tasks.join_next().await.is_some() {}
}

async fn write(cluster: &Cluster, shape: &Shape, n: usize, counts: &WriteCounts) -> bool {
    let admin = &cluster.admin;
    let stamp = now_micros().to_string();
    let merge = [("Content-Type", "application/merge-patch+json")];
    let annotate = || {
        serde_json::to_vec(&json!({"metadata": {"annotations": {STAMP: stamp}}}))
            .unwrap_or_default()
    };
    let round = n / 4;
    match n % 4 {
        0 | 2 => {
            let s = (round * 2 + n % 4 / 2) % shape.services;
            let path = format!(
                "/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/{}-1",
                service_name(s)
            );
            let ok = matches!(admin.fetch(Method::PATCH, &path, &merge, Some(annotate())).await, Ok((st, _)) if st.is_success());
            if ok {
                counts.endpointslices.fetch_add(1, Ordering::Relaxed);
            }
            ok
        }
        1 => {
            let s = round % shape.services;
            let path = format!("/api/v1/namespaces/{NAMESPACE}/services/{}", service_name(s));
            let ok = matches!(admin.fetch(Method::PATCH, &path, &merge, Some(annotate())).await, Ok((st, _)) if st.is_success());
            if ok {
                counts.services.fetch_add(1, Ordering::Relaxed);
            }
            ok
        }
        _ => {
            // Nodes in turn, a different slot each time round.
            let node = round % shape.nodes;
            let slot = (round / shape.nodes) % shape.pods_per_node;
            let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{}", pod_name(node, slot));
            let deleted = admin
                .fetch(Method::DELETE, &format!("{path}?gracePeriodSeconds=0"), &[], None)
                .await;
            if !matches!(deleted, Ok((st, _)) if st.is_success() || st == http::StatusCode::NOT_FOUND)
            {
                return false;
            }
            let body = serde_json::to_vec(&pod(node, slot, Some(now_micros()))).unwrap_or_default();
            let created = admin
                .fetch(
                    Method::POST,
                    &format!("/api/v1/namespaces/{NAMESPACE}/pods"),
                    &[],
                    Some(body),
                )
                .await;
            let ok = matches!(created, Ok((st, _)) if st.is_success());
            if ok {
                counts.pods_replaced.fetch_add(1, Ordering::Relaxed);
            }
            if ok && shape.cilium {
                return replace_endpoint(cluster, node, slot, counts).await;
            }
            ok
        }
    }
}

/// A replaced pod's CiliumEndpoint, as its node's Cilium agent replaces it: the old one deleted
/// (its pod is gone), the new one created with the new pod's stamp (every agent reads it).
async fn replace_endpoint(
    cluster: &Cluster,
    node: usize,
    slot: usize,
    counts: &WriteCounts,
) -> bool {
    let admin = &cluster.admin;
    let endpoints = format!("{CILIUM}/namespaces/{NAMESPACE}/ciliumendpoints");
    let path = format!("{endpoints}/{}", pod_name(node, slot));
    let deleted = admin.fetch(Method::DELETE, &path, &[], None).await;
    if !matches!(deleted, Ok((st, _)) if st.is_success() || st == http::StatusCode::NOT_FOUND) {
        return false;
    }
    let body =
        serde_json::to_vec(&cilium_endpoint(node, slot, Some(now_micros()))).unwrap_or_default();
    let created = admin.fetch(Method::POST, &endpoints, &[], Some(body)).await;
    let ok = matches!(created, Ok((st, _)) if st.is_success());
    if ok {
        counts.ciliumendpoints_replaced.fetch_add(1, Ordering::Relaxed);
    }
    ok
}
