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

mod admin;
pub mod body;
mod cached;
mod fresh;
pub mod guardrails;
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
use http::Response;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::ServiceExt;

use self::body::Body;
use self::metrics::{Metrics, Source};
use self::resources::Resources;
use self::stack::{Class, Classified, Verb};
use crate::auth::authorize::read_attributes;
use crate::auth::{Identity, NodeAuth, ReviewConfig, Reviews, UserInfo};
use crate::cache::Encoding;
use crate::cache::Scope;
pub use crate::upstream::caches::CacheSpec;
use crate::upstream::caches::{Caches, CachesConfig, Live};
use crate::upstream::disk::DiskStates;
use crate::upstream::Upstream;
use crate::wire::request::{ApiPath, ListOptions, ResourcePath};
use crate::wire::resource::ResourceInfo;

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
    /// The node-local mode's authentication and authorization; `None` in the sidecar mode.
    pub node: Option<Arc<NodeAuth>>,
    /// Set when a graceful shutdown begins: readiness fails from then on.
    pub draining: std::sync::atomic::AtomicBool,
    /// In-flight and body limits on passthrough (see [`guardrails`]).
    pub guard: guardrails::Limiter,
}

/// Bytes of compressed list pages kept for reuse.
const PAGE_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// How often idle caches are looked for, at most (more often for short idle timeouts).
const REAP_EVERY: Duration = Duration::from_secs(30);

/// A running proxy. Dropping it stops the listeners, the connections and the caches at once;
/// [`Proxy::shutdown`] does it gracefully.
pub struct Proxy {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub state: Arc<ProxyState>,
    tasks: JoinSet<()>,
    /// The client listener: it returns once drained (see `shutdown`).
    client: Option<tokio::task::JoinHandle<()>>,
    drain: kubeplex_net::DrainSignal,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            client.abort();
        }
        self.tasks.abort_all();
        self.state.caches.stop_all();
    }
}

/// Who the clients are.
#[derive(Debug, Clone)]
pub enum Mode {
    /// A loopback listener in one pod: every client shares kubeplex's identity (clients with
    /// credentials of their own are passed through with them), plain HTTP.
    Sidecar(Http1Server),
    /// Many agents on a node, each with its own identity: TLS, authentication, and every read
    /// from the cache authorized for the client (`crate::auth`).
    Node(Box<NodeConfig>),
}

/// The node-local mode's listener and identity checks.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Serving certificate and key, and the client CA (`--client-ca-file`).
    pub tls: kubeplex_net::TlsConfig,
    /// Requests without credentials are `system:anonymous` (else 401), as with the
    /// apiserver's `--anonymous-auth`.
    pub anonymous: bool,
    pub reviews: ReviewConfig,
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
    /// Graceful shutdown (SIGTERM): readiness fails at once; the client listener stops
    /// accepting; every open watch ends cleanly (its client resumes from its last RV, against
    /// the next kubeplex); connections finish the requests under way and close; what is still
    /// open after `grace` is cut. Returns whether everything ended within `grace`.
    pub async fn shutdown(mut self, grace: Duration) -> bool {
        self.state.draining.store(true, std::sync::atomic::Ordering::Release);
        tracing::info!(grace = ?grace, "shutting down: draining connections");
        self.drain.drain();
        // The caches' last states, for a restart during an outage: bounded, so that the exit
        // stays within the grace period.
        if let Some(disk) = self.state.caches.disk().cloned() {
            let running = self.state.caches.running();
            let write = tokio::task::spawn_blocking(move || disk.write_all(&running));
            if tokio::time::timeout(grace / 2, write).await.is_err() {
                tracing::warn!("cache states not all written within half the grace period");
            }
            let _ = tokio::time::timeout(grace / 4, save_decisions(&self.state)).await;
        }
        // Watches are streams without an end of their own: ending them is what lets their
        // connections drain.
        self.state.caches.stop_all();
        let drained = match self.client.take() {
            Some(client) => {
                let cut = client.abort_handle();
                let drained = tokio::time::timeout(grace, client).await.is_ok();
                cut.abort();
                drained
            }
            None => true,
        };
        if !drained {
            tracing::warn!(grace = ?grace, "connections still open after the grace period; closing them");
        }
        drained
    }

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
        Proxy::start_mode(upstream, listen, admin_listen, caches, Mode::Sidecar(http1)).await
    }

    /// Binds the listeners and starts serving in `mode`.
    pub async fn start_mode(
        upstream: Upstream,
        listen: SocketAddr,
        admin_listen: Option<SocketAddr>,
        caches: CachesConfig,
        mode: Mode,
    ) -> anyhow::Result<Proxy> {
        let registry = prometheus::Registry::new();
        Proxy::start_in(registry, upstream, listen, admin_listen, caches, mode).await
    }

    /// [`Proxy::start_mode`], registering every layer's metrics (the caches', the upstream
    /// side's, the serving side's) into `registry`, the one the process built; `/metrics`
    /// exposes all of it.
    pub async fn start_in(
        registry: prometheus::Registry,
        upstream: Upstream,
        listen: SocketAddr,
        admin_listen: Option<SocketAddr>,
        caches: CachesConfig,
        mode: Mode,
    ) -> anyhow::Result<Proxy> {
        let guardrails = guardrails::Guardrails::default();
        Proxy::start_guarded(registry, upstream, listen, admin_listen, caches, mode, guardrails)
            .await
    }

    /// [`Proxy::start_in`] with the passthrough `guardrails`.
    pub async fn start_guarded(
        registry: prometheus::Registry,
        upstream: Upstream,
        listen: SocketAddr,
        admin_listen: Option<SocketAddr>,
        caches: CachesConfig,
        mode: Mode,
        guardrails: guardrails::Guardrails,
    ) -> anyhow::Result<Proxy> {
        let guard = guardrails::Limiter::new(guardrails, &registry)?;
        let limits = guardrails.limits(&registry)?;
        let preload = caches.preload.clone();
        let reap_every = REAP_EVERY.min(caches.idle_timeout / 2).max(Duration::from_millis(100));
        let upstream = Arc::new(upstream);
        let metrics = Metrics::new(registry)?;
        // Node mode: the TLS listener's files are read before anything binds, so a missing
        // certificate is one clear error at start.
        let (node, tls) = match &mode {
            Mode::Sidecar(_) => (None, None),
            Mode::Node(config) => {
                let tls = kubeplex_net::TlsAcceptor::new(config.tls.clone())
                    .map_err(|e| anyhow::anyhow!("TLS listener: {e}"))?;
                let reviews =
                    Reviews::new(upstream.clone(), config.reviews, metrics.reviews.clone());
                (Some(Arc::new(NodeAuth { reviews, anonymous: config.anonymous })), Some(tls))
            }
        };
        // Caches' states on disk (when configured) are read before anything serves: their
        // resources are known to discovery before it answers, and each waits for its cache's
        // first load (`upstream::disk`).
        let disk = DiskStates::new(&caches.disk, caches.namespace.as_deref(), &metrics.registry)?;
        let from_disk = match &disk {
            Some(d) => {
                let d = d.clone();
                tokio::task::spawn_blocking(move || d.load_all()).await.unwrap_or_default()
            }
            None => Vec::new(),
        };
        if let (Some(node), Some(disk)) = (&node, &disk) {
            node.reviews.restore(disk).await;
        }
        let resources =
            Resources::new(upstream.clone(), caches.discovery_ttl, metrics.discovery.clone());
        resources.seed(from_disk.iter().map(|s| s.info.clone()));
        let restarted: Vec<_> = from_disk
            .iter()
            .map(|s| (Arc::new(s.info.clone()), s.encoding, s.scope.clone()))
            .collect();
        let caches = Caches::with_disk(
            upstream.clone(),
            metrics.cache.clone(),
            metrics.upstream.clone(),
            caches,
            disk,
        );
        caches.stash(from_disk);
        let state = Arc::new(ProxyState {
            preload_specs: preload.clone(),
            upstream,
            resources,
            caches,
            metrics,
            pages: cached::page_cache(PAGE_CACHE_BYTES),
            node,
            draining: std::sync::atomic::AtomicBool::new(false),
            guard,
        });
        check_preload(&state.resources, &preload).await?;
        // What was cached before the restart starts again, with its disk state standing by.
        for (info, encoding, scope) in restarted {
            let _ = state.caches.get_or_start(&info, encoding, scope);
        }
        let listener = bind(listen, "listen").await?;
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
        let (drain_signal, drain) = kubeplex_net::Drain::new();
        let client = match (mode, tls) {
            (Mode::Node(_), Some(tls)) => {
                // TLS by hyper (HTTP/2 or HTTP/1.1 by ALPN); each request carries the client
                // certificate's identity in its extensions.
                tokio::spawn(kubeplex_net::serve_tls_limited(
                    listener,
                    tls,
                    move |req| handle(crate::net::h1::boxed(req)),
                    drain,
                    limits,
                ))
            }
            (Mode::Sidecar(Http1Server::Lean), _) => {
                let counters = state.metrics.lean.clone();
                tokio::spawn(crate::net::serve_lean_until(
                    listener, handle, counters, drain, limits,
                ))
            }
            _ => tokio::spawn(crate::net::serve_until(
                listener,
                move |req| handle(crate::net::h1::boxed(req)),
                drain,
                limits,
            )),
        };
        let admin_addr = match admin_listen {
            Some(a) => {
                let l = bind(a, "adminListen").await?;
                let admin_addr = l.local_addr()?;
                let st = state.clone();
                tasks.spawn(crate::net::serve(l, move |req| admin::admin(st.clone(), req)));
                Some(admin_addr)
            }
            None => None,
        };
        for spec in preload {
            let state = state.clone();
            tasks.spawn(async move { preload_cache(&state, &spec).await });
        }
        if let Some(disk) = state.caches.disk().cloned() {
            let caches = state.caches.clone();
            let saver = state.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(disk.interval());
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let (disk, running) = (disk.clone(), caches.running());
                    let _ = tokio::task::spawn_blocking(move || disk.write_all(&running)).await;
                    save_decisions(&saver).await;
                }
            });
        }
        if state.caches.has_budget() {
            let budget = state.caches.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(crate::upstream::caches::BUDGET_CHECK_EVERY);
                loop {
                    tick.tick().await;
                    budget.enforce_budget();
                }
            });
        }
        let reaper = state.caches.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(reap_every);
            loop {
                tick.tick().await;
                reaper.reap_idle();
                reaper.retry_refused();
            }
        });
        Ok(Proxy { addr, admin_addr, state, tasks, client: Some(client), drain: drain_signal })
    }
}

/// A listener that could not be bound: which one (its setting's key), where, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} (`{setting}`): {error}")]
pub struct BindError {
    /// The setting that names the address: `listen` or `adminListen`.
    pub setting: &'static str,
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

async fn bind(addr: SocketAddr, setting: &'static str) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr).await.map_err(|error| BindError { setting, addr, error })
}

/// Writes node mode's last review answers to the state directory (when both exist).
async fn save_decisions(state: &Arc<ProxyState>) {
    if let (Some(node), Some(disk)) = (&state.node, state.caches.disk()) {
        node.reviews.save(disk).await;
    }
}

/// The cache when it can answer, the upstream otherwise; and which one answered.
async fn route(state: &Arc<ProxyState>, req: Classified) -> (Response<Body>, Source) {
    if let Some(answer) = from_cache(state, &req).await {
        return answer;
    }
    let Classified { req, identity, class } = req;
    // Node mode: a read the cache was not granted, which the upstream then answers with
    // success, shows a remembered denial out of date.
    let reader = matches!(class.verb, Verb::Get | Verb::List | Verb::Watch)
        .then(|| identity.user())
        .flatten()
        .filter(|_| state.node.is_some());
    let how = match identity {
        // The sidecar mode: kubeplex's identity, or the client's own credentials if it has
        // some (`passthrough::forward` decides).
        Identity::Shared => None,
        // Its own token (and impersonation headers) go as they are; anonymous goes without
        // credentials, so the upstream sees system:anonymous too.
        Identity::Token(_) | Identity::Unreviewed | Identity::Anonymous => {
            Some(passthrough::As::Client)
        }
        // Only kubeplex can prove a client certificate's identity to the upstream: by
        // impersonating it, or whom it asks to impersonate once it may.
        Identity::Certificate(user) => {
            let Some(node) = &state.node else {
                return (body::refused(&crate::auth::Refusal::Unauthorized), Source::Denied);
            };
            match node.impersonation(&user, req.headers()).await {
                Ok(target) => Some(passthrough::As::Impersonating(target.unwrap_or(user))),
                Err(refusal) => return (body::refused(&refusal), Source::Denied),
            }
        }
    };
    // After authentication and authorization, as the apiserver's maxinflight filter.
    let slot = match state.guard.admit(req.method(), &class, req.headers()) {
        Ok(slot) => slot,
        Err(refused) => return (*refused, Source::Denied),
    };
    let req = match state.guard.bounded_body(req).await {
        Ok(req) => req,
        Err(refused) => return (*refused, Source::Denied),
    };
    let resp = match how {
        None => passthrough::forward(&state.upstream, req).await,
        Some(how) => passthrough::forward_as(&state.upstream, req, how).await,
    };
    if let (Some(node), Some(user), ApiPath::Resource(rp)) = (&state.node, &reader, &class.path) {
        if resp.status().is_success() {
            let watch = class.verb == Verb::Watch;
            let attributes = read_attributes(rp, class.options.as_ref(), watch);
            node.upstream_allowed(user, &attributes).await;
        }
    }
    let resp = match slot {
        Some(slot) => slot.hold_until_sent(resp),
        None => resp,
    };
    (resp, Source::Upstream)
}

async fn from_cache(
    state: &Arc<ProxyState>,
    classified: &Classified,
) -> Option<(Response<Body>, Source)> {
    let Classified { req, class, identity } = classified;
    match identity {
        // A client with credentials of its own is authorized by the apiserver, request by
        // request; the cache (filled with kubeplex's identity) must not answer for it.
        Identity::Shared if class.credentials => return None,
        Identity::Unreviewed => return None,
        // Reads as someone else are the upstream's to authorize.
        Identity::Certificate(_) | Identity::Token(_) | Identity::Anonymous
            if passthrough::impersonates(req.headers()) =>
        {
            return None
        }
        _ => {}
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
    // Caches limited to one namespace hold nothing of the others: what reaches past it (another
    // namespace, every namespace) is the upstream's to answer.
    if let Some(scope) = state.caches.namespace().filter(|_| info.namespaced) {
        if rp.namespace.as_deref() != Some(scope) {
            return None;
        }
    }
    // The part of the resource the read can see: a cache whose scope contains it answers.
    let scope = Scope::parse(
        &rp.group,
        &rp.resource,
        rp.namespace.as_deref(),
        opts.label_selector.as_deref(),
        opts.field_selector.as_deref(),
    )
    .ok()?;
    let scope = match &rp.name {
        Some(name) => scope.named(name),
        None => scope,
    };
    // Node mode: nothing from the cache reaches a client the upstream would refuse; asked once
    // the cache could answer, before any cache is read or started.
    let gate = Gate { node: state.node.as_deref().zip(identity.user()), class, rp };
    let read = CachedRead { info: &info, rp, opts, scope: &scope, gate: &gate };
    let answer = if opts.watch {
        watch::try_watch(state, &read, req.headers(), req.uri().query()).await
    } else {
        cached::try_answer(state, &read, req.headers(), req.uri().query()).await
    };
    answer.map(|resp| (resp, Source::Cache))
}

/// A read the cache may answer, as the cache paths (`cached`, `watch`) take it.
pub(crate) struct CachedRead<'a> {
    pub info: &'a Arc<ResourceInfo>,
    pub rp: &'a ResourcePath,
    pub opts: &'a ListOptions,
    /// What it can see: the cache that answers must contain it.
    pub scope: &'a Scope,
    pub gate: &'a Gate<'a>,
}

impl CachedRead<'_> {
    /// The cache that answers this read in `encoding` (`Caches::for_read`: a running one whose
    /// scope contains it, or one started for it), once the client may read it (node mode).
    /// `None`: the read passes through — and no review is asked for a read that would pass
    /// through anyway (a named object no running cache holds).
    pub async fn cache(&self, state: &ProxyState, encoding: Encoding) -> Option<Arc<Live>> {
        let caches = &state.caches;
        if self.scope.name().is_some() && !caches.holds_named(self.info, encoding, self.scope) {
            return None;
        }
        if !self.gate.open().await {
            return None;
        }
        caches.for_read(self.info, encoding, self.scope, !self.opts.watch)
    }
}

/// Node mode's authorization of a read from the cache (`NodeAuth::may_read_cached`): only a
/// grant opens it; a denial or a failed review sends the read upstream, where the apiserver
/// answers it — a refusal included — as it would without kubeplex.
pub(crate) struct Gate<'a> {
    node: Option<(&'a NodeAuth, UserInfo)>,
    class: &'a Class,
    rp: &'a ResourcePath,
}

impl Gate<'_> {
    pub async fn open(&self) -> bool {
        match &self.node {
            None => true,
            Some((node, user)) => {
                let watch = self.class.verb == Verb::Watch;
                let attributes = read_attributes(self.rp, self.class.options.as_ref(), watch);
                node.may_read_cached(user, &attributes).await
            }
        }
    }
}

/// How long start-up asks discovery about the configured caches before it binds anyway (an
/// upstream that does not answer is an outage, not a configuration error).
const PRELOAD_CHECK_WAIT: Duration = Duration::from_secs(3);

/// Refuses to start with a configured cache the upstream does not serve (`--cache podz`),
/// rather than stay unready forever. When discovery cannot be asked (the upstream is down at
/// start-up), the caches are started as configured and wait for it.
async fn check_preload(resources: &Resources, specs: &[String]) -> anyhow::Result<()> {
    let check = async {
        for spec in specs {
            let s = CacheSpec::parse(spec).map_err(|e| anyhow::anyhow!("cache {spec:?}: {e}"))?;
            if resources.serves(&s.group, &s.version, &s.resource).await == Some(false) {
                let gv = if s.group.is_empty() {
                    s.version.clone()
                } else {
                    format!("{}/{}", s.group, s.version)
                };
                anyhow::bail!(
                    "cache {spec:?}: the upstream serves no resource {:?} in {gv} (`kubectl api-resources` lists what it serves)",
                    s.resource
                );
            }
        }
        Ok(())
    };
    match tokio::time::timeout(PRELOAD_CHECK_WAIT, check).await {
        Ok(checked) => checked,
        Err(_) => {
            tracing::warn!(
                "discovery did not answer at start-up; configured caches start when it does"
            );
            Ok(())
        }
    }
}

/// Starts a cache named in the configuration ([`CacheSpec`]). Retries until the upstream's
/// discovery answers.
async fn preload_cache(state: &Arc<ProxyState>, spec: &str) {
    let parsed = match CacheSpec::parse(spec) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::error!(spec, "cache spec: {e}");
            return;
        }
    };
    let CacheSpec { group, version, resource, encoding, .. } = &parsed;
    let mut delay = Duration::from_millis(200);
    loop {
        if let Some(info) = state.resources.lookup(group, version, resource).await {
            let scope = parsed.scope(&info, state.caches.namespace());
            // Refused by the memory budget: started again by `retry_refused`, pinned.
            if let Some(cache) = state.caches.get_or_start(&info, *encoding, scope) {
                cache.pin();
            }
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
