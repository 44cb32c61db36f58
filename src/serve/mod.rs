//! `serve`: the proxy's downstream side — accepts clients (HTTP/1.1 and HTTP/2), answers the
//! reads the cache can answer exactly, passes everything else through, and exposes admin
//! endpoints.
//!
//! The request path, top to bottom (docs/style.md rule 1):
//! 1. [`handle`] times the request and counts it by resource, verb, code and source;
//! 2. [`route`] classifies it: a GET of a resource collection or object (not a watch, not a
//!    subresource) whose resource supports list+watch is offered to the cache;
//! 3. [`cached::try_answer`] (gets, lists) or [`watch::try_watch`] (watches) answers it when
//!    the cache can do so exactly, or declines;
//! 4. [`passthrough::forward`] streams everything else to the upstream and back.

pub mod body;
mod cached;
mod fresh;
pub mod metrics;
pub mod passthrough;
pub mod resources;
mod table;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, Request, Response};
use hyper::body::Incoming;

use crate::net::h1::ReqBody;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use self::body::Body;
use self::metrics::{Metrics, Source};
use self::resources::Resources;
use crate::upstream::caches::{Caches, CachesConfig};
use crate::upstream::Upstream;
use crate::wire::request::{parse_path, ApiPath, ListOptions};

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
            resources: Resources::new(upstream.clone()),
            caches: Caches::new(upstream, metrics.cache.clone(), metrics.upstream.clone(), caches),
            metrics,
            pages: cached::page_cache(PAGE_CACHE_BYTES),
        });
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let mut tasks = JoinSet::new();
        let st = state.clone();
        match http1 {
            Http1Server::Lean => {
                let counters = state.metrics.lean.clone();
                tasks.spawn(crate::net::serve_lean(
                    listener,
                    move |req| handle(st.clone(), req),
                    counters,
                ));
            }
            Http1Server::Hyper => {
                tasks.spawn(crate::net::serve(listener, move |req| {
                    handle(st.clone(), crate::net::h1::boxed(req))
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

fn handle(
    state: Arc<ProxyState>,
    req: Request<ReqBody>,
) -> futures_util::future::BoxFuture<'static, Response<Body>> {
    Box::pin(async move {
        let started = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let query = req.uri().query().map(str::to_string);
        let (resp, source) = route(&state, req).await;
        // Labelled after routing: discovery for this resource is known by now if it exists.
        let (resource, verb) = describe(&state, &method, &path, query.as_deref());
        state.metrics.observe(
            &resource,
            verb,
            resp.status().as_u16(),
            source,
            started.elapsed().as_secs_f64(),
        );
        resp
    })
}

async fn route(state: &Arc<ProxyState>, req: Request<ReqBody>) -> (Response<Body>, Source) {
    if req.method() == Method::GET {
        if let Some(resp) = from_cache(state, &req).await {
            return (resp, Source::Cache);
        }
    }
    (passthrough::forward(&state.upstream, req).await, Source::Upstream)
}

async fn from_cache(state: &Arc<ProxyState>, req: &Request<ReqBody>) -> Option<Response<Body>> {
    // A client with credentials of its own is authorized by the apiserver, request by request;
    // the cache (filled with kubeplex's identity) must not answer for it.
    if passthrough::has_credentials(req.headers()) {
        return None;
    }
    let ApiPath::Resource(rp) = parse_path(req.uri().path()) else { return None };
    if rp.subresource.is_some() {
        return None;
    }
    // Malformed options get the upstream's own 400/422.
    let opts = ListOptions::parse(req.uri().query()).ok()?;
    let info = state.resources.lookup(&rp.group, &rp.version, &rp.resource).await?;
    if !(info.supports("list") && info.supports("watch"))
        || (rp.namespace.is_some() && !info.namespaced)
    {
        return None;
    }
    if opts.watch {
        return watch::try_watch(state, &info, &rp, &opts, req.headers(), req.uri().query()).await;
    }
    cached::try_answer(state, &info, &rp, &opts, req.headers(), req.uri().query()).await
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

/// (resource label, verb) of a request for metrics. The resource label is only ever a
/// resource discovery already knows (without fetching anything), so its values are bounded.
fn describe(
    state: &ProxyState,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (String, &'static str) {
    let ApiPath::Resource(rp) = parse_path(path) else {
        return (String::new(), "OTHER");
    };
    let watch = query.is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "watch" && v != "0" && v != "false")
    });
    let verb = match (method.clone(), rp.name.is_some(), watch) {
        (Method::GET, _, true) => "WATCH",
        (Method::GET, true, _) => "GET",
        (Method::GET, false, _) => "LIST",
        (Method::POST, _, _) => "POST",
        (Method::PUT, _, _) => "PUT",
        (Method::PATCH, _, _) => "PATCH",
        (Method::DELETE, _, _) => "DELETE",
        _ => "OTHER",
    };
    let Some(info) = state.resources.known(&rp.group, &rp.version, &rp.resource) else {
        return ("other".to_string(), verb);
    };
    let mut label = info.label();
    if let Some(sub) = rp.subresource {
        let sub =
            if LABELLED_SUBRESOURCES.contains(&sub.as_str()) { sub.as_str() } else { "other" };
        label = format!("{label}/{sub}");
    }
    (label, verb)
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
