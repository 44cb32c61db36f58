//! `list`: C clients repeating one list for a duration or a number of requests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;
use serde::Serialize;

use super::hist::{Histogram, Summary};
use super::target::Target;

/// Which resourceVersion rule the list uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rv {
    /// `resourceVersion=0`: any state (the watch cache's, or kubeplex's).
    Zero,
    /// No resourceVersion: the most recent state.
    Unset,
    /// Pages of `--limit` followed to the end with continue tokens (one request = all pages).
    Paged,
}

#[derive(Debug, Clone)]
pub struct ListSpec {
    /// The collection path, e.g. `/api/v1/namespaces/bench/pods`.
    pub collection: String,
    pub rv: Rv,
    pub limit: usize,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub protobuf: bool,
    pub gzip: bool,
    pub clients: usize,
    pub duration: Duration,
    /// Stop after this many lists in all (whichever comes first with `duration`).
    pub requests: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ListReport {
    pub target: String,
    pub collection: String,
    pub rv: Rv,
    pub protobuf: bool,
    pub gzip: bool,
    pub clients: usize,
    pub lists: u64,
    pub errors: u64,
    pub seconds: f64,
    pub lists_per_second: f64,
    pub bytes_per_list: u64,
    pub mib_per_second: f64,
    pub latency: Summary,
}

impl std::fmt::Display for ListReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "list {} rv={:?} {}{} x{} clients against {}: {} lists ({} errors) in {:.1} s = {:.2} lists/s, {:.1} MiB/s, {} bytes/list; latency {}",
            self.collection,
            self.rv,
            if self.protobuf { "protobuf" } else { "json" },
            if self.gzip { "+gzip" } else { "" },
            self.clients,
            self.target,
            self.lists,
            self.errors,
            self.seconds,
            self.lists_per_second,
            self.mib_per_second,
            self.bytes_per_list,
            self.latency
        )
    }
}

pub async fn run(target: Arc<Target>, spec: ListSpec) -> anyhow::Result<ListReport> {
    let started = Instant::now();
    let deadline = started + spec.duration;
    let issued = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..spec.clients.max(1) {
        let (target, spec, issued) = (target.clone(), spec.clone(), issued.clone());
        tasks.spawn(async move {
            let mut hist = Histogram::default();
            let (mut bytes, mut errors) = (0u64, 0u64);
            while Instant::now() < deadline {
                if spec.requests.is_some_and(|max| issued.fetch_add(1, Ordering::Relaxed) >= max) {
                    break;
                }
                let t = Instant::now();
                match one_list(&target, &spec).await {
                    Ok(n) => {
                        hist.record(t.elapsed());
                        bytes += n;
                    }
                    Err(e) => {
                        errors += 1;
                        tracing::debug!(error = %e, "list failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            (hist, bytes, errors)
        });
    }
    let mut hist = Histogram::default();
    let (mut bytes, mut errors) = (0u64, 0u64);
    while let Some(done) = tasks.join_next().await {
        let (h, b, e) = done?;
        hist.merge(&h);
        bytes += b;
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    let lists = hist.count();
    Ok(ListReport {
        target: target.url.clone(),
        collection: spec.collection,
        rv: spec.rv,
        protobuf: spec.protobuf,
        gzip: spec.gzip,
        clients: spec.clients,
        lists,
        errors,
        seconds,
        lists_per_second: lists as f64 / seconds,
        bytes_per_list: bytes.checked_div(lists).unwrap_or(0),
        mib_per_second: bytes as f64 / seconds / (1024.0 * 1024.0),
        latency: hist.summary(),
    })
}

/// One list (all its pages for `Rv::Paged`); returns the bytes received.
async fn one_list(target: &Target, spec: &ListSpec) -> anyhow::Result<u64> {
    let accept = if spec.protobuf {
        "application/vnd.kubernetes.protobuf, application/json"
    } else {
        "application/json"
    };
    let mut headers = vec![("Accept", accept)];
    if spec.gzip {
        headers.push(("Accept-Encoding", "gzip"));
    }
    let mut token: Option<String> = None;
    let mut total = 0u64;
    loop {
        let path = list_path(spec, token.as_deref());
        let resp = target.send(Method::GET, &path, &headers, None).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            anyhow::bail!("{path}: {status}");
        }
        total += body.len() as u64;
        if spec.rv != Rv::Paged {
            return Ok(total);
        }
        token = next_token(&body, spec.protobuf);
        if token.is_none() {
            return Ok(total);
        }
    }
}

fn list_path(spec: &ListSpec, token: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    match spec.rv {
        Rv::Zero => {
            query.append_pair("resourceVersion", "0");
        }
        Rv::Unset => {}
        Rv::Paged => {
            query.append_pair("limit", &spec.limit.max(1).to_string());
            if let Some(t) = token {
                query.append_pair("continue", t);
            }
        }
    }
    if let Some(s) = &spec.label_selector {
        query.append_pair("labelSelector", s);
    }
    if let Some(s) = &spec.field_selector {
        query.append_pair("fieldSelector", s);
    }
    let query = query.finish();
    if query.is_empty() {
        spec.collection.clone()
    } else {
        format!("{}?{query}", spec.collection)
    }
}

/// The continue token of a list page (JSON or protobuf).
fn next_token(body: &[u8], protobuf: bool) -> Option<String> {
    let token = if protobuf {
        let list = kubeplex_wire::proto::decode_list(body).ok()?;
        list.meta.continue_token.to_string()
    } else {
        #[derive(serde::Deserialize)]
        struct Page {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "continue", default)]
            token: String,
        }
        serde_json::from_slice::<Page>(body).ok()?.metadata.token
    };
    (!token.is_empty()).then_some(token)
}
