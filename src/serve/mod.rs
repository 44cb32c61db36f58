//! `serve`: the proxy's downstream side — accepts clients (HTTP/1.1 and HTTP/2), answers the
//! reads the cache can answer exactly, passes everything else through, and exposes admin
//! endpoints.
//!
//! The request path, top to bottom (docs/style.md rule 1):
//! 1. [`stack::client`] is the one request stack: span, panic guard, classification of the
//!    request into a typed [`stack::Class`], metrics, then routing — each layer's reason and
//!    order are written there;
//! 2. [`route`] offers a GET of a resource collection or object (not a subresource) whose
//!    resource supports list+watch to the cache;
//! 3. [`cached::try_answer`] (gets, lists) or [`watch::try_watch`] (watches) answers it when
//!    the cache can do so exactly, or declines;
//! 4. [`passthrough::forward`] streams everything else to the upstream and back.

pub mod body;
mod cached;
mod fresh;
pub mod metrics;
pub mod passthrough;
pub mod resources;
pub mod stack;
mod table;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http::{Request, Response};
use hyper::body::Incoming;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::ServiceExt;

use self::body::Body;
use self::metrics::{Metrics, Source};
use self::resources::Resources;
use self::stack::{Class, Classified};
use crate::upstream::caches::{Caches, CachesConfig};
use crate::upstream::Upstream;
use crate::wire::request::ApiPath;

/// Shared by every connection.
pub struct ProxyState {
    /// Caches named in the configuration; readiness waits for them.
    pub preload_specs: Vec<String>,
    pub upstream: Arc<Upstream>,
    pub resources: Resources,
    pub caches: Arc<Caches>,
    pub metrics: Metrics,
    /// Compressed large list bodies (see [`cached::PageCache`]).
    pub pages: cached::PageCache,
}

/// Bytes of compressed list pages kept for reuse.
const PAGE_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// How often idle caches are looked for, at most (more often for short idle timeouts).
const REAP_EVERY: Duration = Duration::from_secs(30);

/// A running proxy. Dropping it stops the listeners, the connections and the caches.
pub struct Proxy {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub state: Arc<ProxyState>,
    tasks: JoinSet<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.tasks.abort_all();
        self.state.caches.stop_all();
    }
}

/// Which server answers HTTP/1.1 on the client listener.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Http1Server {
    /// Body-less GETs by the lean server ([`crate::net::h1`]), the rest by hyper.
    #[default]
    Lean,
    /// Everything by hyper (the lean server switched off).
    Hyper,
}

impl Proxy {
    /// Binds the listeners and starts serving.
    pub async fn start(
        upstream: Upstream,
        listen: SocketAddr,
        admin_listen: Option<SocketAddr>,
        caches: CachesConfig,
    ) -> anyhow::Result<Proxy> {
        Proxy::start_with(upstream, listen, admin_listen, caches, Http1Server::default()).await
    }

    /// [`Proxy::start`], choosing the HTTP/1.1 server.
    pub async fn start_with(
        upstream: Upstream,
        listen: SocketAddr,
        admin_listen: Option<SocketAddr>,
        caches: CachesConfig,
        http1: Http1Server,
    ) -> anyhow::Result<Proxy> {
        let preload = caches.preload.clone();
        let reap_every = REAP_EVERY.min(caches.idle_timeout / 2).max(Duration::from_millis(100));
        let upstream = Arc::new(upstream);
        let metrics = Metrics::new(prometheus::Registry::new())?;
        let state = Arc::new(ProxyState {
            preload_specs: preload.clone(),
            upstream: upstream.clone(),
            resources: Resources::new(
                upstream.clone(),
                caches.discovery_ttl,
                metrics.discovery.clone(),
            ),
            caches: Caches::new(upstream, metrics.cache.clone(), metrics.upstream.clone(), caches),
            metrics,
            pages: cached::page_cache(PAGE_CACHE_BYTES),
        });
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let mut tasks = JoinSet::new();
        // Each request goes through a clone of the stack (reference counts only).
        let client = stack::client(state.clone());
        let handle = move |req| {
            client.clone().oneshot(req).map(|answered| match answered {
                Ok(resp) => resp,
                Err(never) => match never {},
            })
        };
        match http1 {
            Http1Server::Lean => {
                let counters = state.metrics.lean.clone();
                tasks.spawn(crate::net::serve_lean(listener, handle, counters));
            }
            Http1Server::Hyper => {
                tasks.spawn(crate::net::serve(listener, move |req| {
                    handle(crate::net::h1::boxed(req))
                }));
            }
        }
        let admin_addr = match admin_listen {
            Some(a) => {
                let l = TcpListener::bind(a).await?;
                let admin_addr = l.local_addr()?;
                let st = state.clone();
                tasks.spawn(crate::net::serve(l, move |req| admin(st.clone(), req)));
                Some(admin_addr)
            }
            None => None,
        };
        for spec in preload {
            let state = state.clone();
            tasks.spawn(async move { preload_cache(&state, &spec).await });
        }
        let reaper = state.caches.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(reap_every);
            loop {
                tick.tick().await;
                reaper.reap_idle();
            }
        });
        Ok(Proxy { addr, admin_addr, state, tasks })
    }
}

/// The cache when it can answer, the upstream otherwise; and which one answered.
async fn route(state: &Arc<ProxyState>, req: Classified) -> (Response<Body>, Source) {
    if let Some(resp) = from_cache(state, &req).await {
        return (resp, Source::Cache);
    }
    (passthrough::forward(&state.upstream, req.req).await, Source::Upstream)
}

async fn from_cache(state: &Arc<ProxyState>, classified: &Classified) -> Option<Response<Body>> {
    let Classified { req, class } = classified;
    // A client with credentials of its own is authorized by the apiserver, request by request;
    // the cache (filled with kubeplex's identity) must not answer for it.
    if class.credentials {
        return None;
    }
    let ApiPath::Resource(rp) = &class.path else { return None };
    if rp.subresource.is_some() {
        return None;
    }
    // Only GETs have options; malformed ones get the upstream's own 400/422.
    let opts = class.options.as_ref()?;
    let info = state.resources.lookup(&rp.group, &rp.version, &rp.resource).await?;
    if !(info.supports("list") && info.supports("watch"))
        || (rp.namespace.is_some() && !info.namespaced)
    {
        return None;
    }
    if opts.watch {
        return watch::try_watch(state, &info, rp, opts, req.headers(), req.uri().query()).await;
    }
    cached::try_answer(state, &info, rp, opts, req.headers(), req.uri().query()).await
}

/// Starts a cache named in the configuration: `resource` (core/v1), or
/// `group/version/resource`, optionally followed by `:protobuf` (default JSON). Retries until
/// the upstream's discovery answers.
async fn preload_cache(state: &Arc<ProxyState>, spec: &str) {
    let (path, encoding) = match spec.split_once(':') {
        Some((p, "protobuf")) => (p, crate::cache::resource::Encoding::Protobuf),
        Some((p, _)) => (p, crate::cache::resource::Encoding::Json),
        None => (spec, crate::cache::resource::Encoding::Json),
    };
    let (group, version, resource) = match path.split('/').collect::<Vec<_>>().as_slice() {
        [r] => (String::new(), "v1".to_string(), r.to_string()),
        [g, v, r] => (g.to_string(), v.to_string(), r.to_string()),
        _ => {
            tracing::error!(spec, "cache spec must be RESOURCE or GROUP/VERSION/RESOURCE");
            return;
        }
    };
    let mut delay = Duration::from_millis(200);
    loop {
        if let Some(info) = state.resources.lookup(&group, &version, &resource).await {
            let cache = state.caches.get_or_start(&info, encoding);
            cache.pin();
            return;
        }
        tracing::warn!(spec, "resource not found upstream yet; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Subresources kept in metric labels; anything else a path names is `other`, so no request
/// can create label values at will.
const LABELLED_SUBRESOURCES: &[&str] = &[
    "attach",
    "binding",
    "eviction",
    "exec",
    "log",
    "portforward",
    "proxy",
    "scale",
    "status",
    "token",
    "ephemeralcontainers",
    "resize",
    "finalize",
    "approval",
];

/// The resource label of a request for metrics: only ever a resource discovery already knows
/// (without fetching anything), so its values are bounded.
fn resource_label(state: &ProxyState, class: &Class) -> String {
    let ApiPath::Resource(rp) = &class.path else { return String::new() };
    let Some(info) = state.resources.known(&rp.group, &rp.version, &rp.resource) else {
        return "other".to_string();
    };
    let mut label = info.label();
    if let Some(sub) = &rp.subresource {
        let sub =
            if LABELLED_SUBRESOURCES.contains(&sub.as_str()) { sub.as_str() } else { "other" };
        label = format!("{label}/{sub}");
    }
    label
}

/// The admin listener: liveness, readiness, metrics.
fn admin(
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
            // Ready when the upstream answers (passthrough works) and every configured cache
            // has synced (reads it serves are fast from the first request).
            "/readyz" => {
                let upstream = state.resources.lookup("", "v1", "namespaces").await.is_some();
                let pending = state.caches.unsynced_pinned(&state.preload_specs);
                match (upstream, pending.is_empty()) {
                    (true, true) => body::respond(200, "text/plain", b"ok".to_vec()),
                    (false, _) => {
                        body::respond(503, "text/plain", b"upstream not reachable".to_vec())
                    }
                    (true, false) => body::respond(
                        503,
                        "text/plain",
                        format!("caches not synced: {}", pending.join(", ")).into_bytes(),
                    ),
                }
            }
            _ => body::respond(404, "text/plain", b"not found".to_vec()),
        }
    })
}
