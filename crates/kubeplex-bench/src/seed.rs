//! `seed` and `cleanup`: the objects a run reads, created idempotently in one namespace and
//! labelled `kubeplex-bench=true` so cleanup removes exactly them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::bail;
use http::{Method, StatusCode};
use serde::Serialize;
use serde_json::{json, Value};

use super::target::Target;

pub const LABEL: &str = "kubeplex-bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Pods,
    Configmaps,
}

impl Kind {
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Configmaps => "configmaps",
        }
    }
}

/// Object `i` of a seeded set: a realistic pod (the demo's, spread over `nodes` nodes) or a
/// configmap, padded with an annotation to about `size` bytes when that is larger.
pub fn object(kind: Kind, namespace: &str, i: usize, nodes: usize, size: usize) -> Value {
    let mut v = match kind {
        Kind::Pods => kubeplex_sim::seed::pod(namespace, i, nodes),
        Kind::Configmaps => json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("bench-{i:06}"), "namespace": namespace},
            "data": {"index": i.to_string()}
        }),
    };
    if kind == Kind::Pods {
        v["metadata"]["name"] = json!(format!("bench-{i:06}"));
    }
    v["metadata"]["labels"][LABEL] = json!("true");
    let len = serde_json::to_vec(&v).map_or(0, |b| b.len());
    if size > len + 64 {
        v["metadata"]["annotations"]["kubeplex-bench/padding"] = json!("x".repeat(size - len - 64));
    }
    v
}

#[derive(Debug, Clone, Serialize)]
pub struct SeedReport {
    pub kind: Kind,
    pub namespace: String,
    pub created: u64,
    pub existing: u64,
    pub seconds: f64,
}

impl std::fmt::Display for SeedReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} in {}: {} created, {} already there, {:.1} s",
            self.kind.resource(),
            self.namespace,
            self.created,
            self.existing,
            self.seconds
        )
    }
}

/// Creates `count` objects (and the namespace), `concurrency` at a time; objects that exist
/// are left as they are.
pub async fn seed(
    target: Arc<Target>,
    kind: Kind,
    namespace: &str,
    count: usize,
    size: usize,
    nodes: usize,
    concurrency: usize,
) -> anyhow::Result<SeedReport> {
    let started = std::time::Instant::now();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let (status, body) = target
        .fetch(Method::POST, "/api/v1/namespaces", &[], Some(serde_json::to_vec(&ns)?))
        .await?;
    if !status.is_success() && status != StatusCode::CONFLICT {
        bail!("creating namespace {namespace}: {status} {}", String::from_utf8_lossy(&body));
    }
    let created = Arc::new(AtomicU64::new(0));
    let existing = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (target, created, existing, next) =
            (target.clone(), created.clone(), existing.clone(), next.clone());
        let namespace = namespace.to_string();
        tasks.spawn(async move {
            let path = format!("/api/v1/namespaces/{namespace}/{}", kind.resource());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= count {
                    return Ok::<(), anyhow::Error>(());
                }
                let body = serde_json::to_vec(&object(kind, &namespace, i, nodes, size))?;
                let (status, text) = target.fetch(Method::POST, &path, &[], Some(body)).await?;
                match status {
                    s if s.is_success() => created.fetch_add(1, Ordering::Relaxed),
                    StatusCode::CONFLICT => existing.fetch_add(1, Ordering::Relaxed),
                    s => bail!("creating object {i}: {s} {}", String::from_utf8_lossy(&text)),
                };
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(SeedReport {
        kind,
        namespace: namespace.to_string(),
        created: created.load(Ordering::Relaxed),
        existing: existing.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Deletes the seeded objects (by label) in one collection delete.
pub async fn cleanup(target: &Target, kind: Kind, namespace: &str) -> anyhow::Result<()> {
    let path =
        format!("/api/v1/namespaces/{namespace}/{}?labelSelector={LABEL}%3Dtrue", kind.resource());
    let (status, body) = target.fetch(Method::DELETE, &path, &[], None).await?;
    if !status.is_success() && status != StatusCode::NOT_FOUND {
        bail!("deleting {}: {status} {}", kind.resource(), String::from_utf8_lossy(&body));
    }
    Ok(())
}
