//! The admin listener: liveness, readiness, metrics, and what an operator reads of the caches.
//! It never serves the cache.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;

use super::body::{self, Body};
use super::state::ProxyState;

pub(super) fn admin(
    state: Arc<ProxyState>,
    req: Request<Incoming>,
) -> futures_util::future::BoxFuture<'static, Response<Body>> {
    Box::pin(async move {
        match req.uri().path() {
            "/metrics" => body::respond(
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                state.metrics.render(),
            ),
            "/healthz" | "/livez" => body::respond(200, "text/plain", b"ok".to_vec()),
            // Per cache: size, RV, how long since the upstream was heard from, whether it is
            // stale or from disk, watchers, how far back watches can resume; and the caches the
            // memory budget refused.
            "/debug/caches" => {
                let status = serde_json::json!({
                    "caches": state.caches.status(),
                    "refused": state.caches.refused_status(),
                });
                let mut bytes = serde_json::to_vec_pretty(&status).unwrap_or_default();
                bytes.push(b'\n');
                body::respond(200, body::JSON, bytes)
            }
            "/readyz" => readyz(&state, req.uri().query()).await,
            _ => body::respond(404, "text/plain", b"not found".to_vec()),
        }
    })
}

/// What `/readyz` checks.
struct Readiness {
    draining: bool,
    /// The clients' port accepts connections (`listenWhenReady` holds it until the rest is
    /// ready: `/readyz` passes only once it listens).
    accepting: bool,
    /// Discovery answers.
    upstream: bool,
    /// The configured caches not synced yet.
    pending: Vec<String>,
}

async fn readiness(state: &ProxyState) -> Readiness {
    Readiness {
        draining: state.draining.load(std::sync::atomic::Ordering::Acquire),
        accepting: state.accepting.load(std::sync::atomic::Ordering::Acquire),
        upstream: state.resources.lookup("", "v1", "namespaces").await.is_some(),
        pending: state.caches.unsynced_pinned(&state.preload_specs),
    }
}

/// Whether kubeplex is ready to serve: what `/readyz` checks but the clients' port, which
/// `listenWhenReady` listens on once this is true.
pub(super) async fn is_ready(state: &ProxyState) -> bool {
    // The local checks first: discovery is asked only once they pass.
    !state.draining.load(std::sync::atomic::Ordering::Acquire)
        && state.caches.unsynced_pinned(&state.preload_specs).is_empty()
        && state.resources.lookup("", "v1", "namespaces").await.is_some()
}

/// Ready when the upstream answers (passthrough works) and every configured cache has synced
/// (reads it serves are fast from the first request); not ready once a graceful shutdown has
/// begun. A stale cache (its upstream watch down: an outage) does not make kubeplex unready —
/// it goes on serving its last state, which is what nodes need through an outage — but
/// `?verbose` names it, in the apiserver's `/readyz?verbose` form (`[+]name ok`, then
/// `readyz check passed`).
async fn readyz(state: &ProxyState, query: Option<&str>) -> Response<Body> {
    let verbose =
        query.is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    let Readiness { draining, accepting, upstream, pending } = readiness(state).await;
    let ready = !draining && accepting && upstream && pending.is_empty();
    if !verbose {
        return match (draining, upstream, pending.is_empty()) {
            _ if ready => body::respond(200, "text/plain", b"ok".to_vec()),
            (true, _, _) => body::respond(503, "text/plain", b"shutting down".to_vec()),
            (_, false, _) => body::respond(503, "text/plain", b"upstream not reachable".to_vec()),
            (_, _, false) => body::respond(
                503,
                "text/plain",
                format!("caches not synced: {}", pending.join(", ")).into_bytes(),
            ),
            _ => body::respond(503, "text/plain", b"not listening for clients yet".to_vec()),
        };
    }
    let mut out = String::new();
    let mut line = |ok: bool, name: &str, note: &str| {
        let mark = if ok { '+' } else { '-' };
        out.push_str(&format!("[{mark}]{name} {}{note}\n", if ok { "ok" } else { "failed" }));
    };
    line(!draining, "shutdown", if draining { ": shutting down" } else { "" });
    line(upstream, "upstream", if upstream { "" } else { ": not reachable" });
    line(accepting, "listener", if accepting { "" } else { ": not listening for clients yet" });
    for p in &pending {
        line(false, &format!("cache {p}"), ": not synced");
    }
    for c in state.caches.status() {
        let name = format!("cache {} ({})", c.resource, c.encoding);
        if !c.synced {
            continue;
        }
        let note = match (c.state_from, c.stale) {
            ("disk", _) => format!(
                ": stale, serving its state from disk ({}s old) until the upstream answers",
                c.disk_state_age_seconds.unwrap_or(0)
            ),
            (_, true) => format!(
                ": stale, serving its last state; upstream silent for {}s",
                c.seconds_since_upstream
            ),
            _ => String::new(),
        };
        line(true, &name, &note);
    }
    for r in state.caches.refused_status() {
        let note = format!(
            ": refused by the memory budget (passthrough), retried in {}s",
            r.retry_in_seconds
        );
        line(true, &format!("cache {} ({})", r.resource, r.encoding), &note);
    }
    out.push_str(if ready { "readyz check passed\n" } else { "readyz check failed\n" });
    body::respond(if ready { 200 } else { 503 }, "text/plain; charset=utf-8", out.into_bytes())
}
