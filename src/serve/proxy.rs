//! The running proxy: [`Proxy::builder`] binds the listeners and starts serving; dropping the
//! [`Proxy`] stops everything, [`Proxy::shutdown`] does it gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::cache_read::pages;
use super::guardrails::{self, Guardrails};
use super::metrics::Metrics;
use super::state::ProxyState;
use super::{admin, stack};
use crate::auth::service_account::TokenVerifier;
use crate::auth::{NodeAuth, ReviewConfig, Reviews};
use crate::live::caches::{CacheSpec, Caches, CachesConfig};
use crate::live::discovery::Resources;
use crate::live::disk::{DiskError, DiskStates};
use crate::upstream::Upstream;

/// How long a shutdown waits, once the caches' reflectors are aborted, for an event being
/// applied to finish before the states are written.
const FREEZE_SETTLE: Duration = Duration::from_millis(20);

/// Bytes of compressed list pages kept for reuse.
const PAGE_CACHE_BYTES: u64 = 256 * 1024 * 1024;

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

impl Proxy {
    /// A proxy in front of `upstream` with `caches`' settings, the rest defaulted (see
    /// [`ProxyBuilder`]): `Proxy::builder(upstream, caches).listen(addr).start().await`.
    pub fn builder(upstream: Upstream, caches: CachesConfig) -> ProxyBuilder {
        ProxyBuilder {
            upstream,
            caches,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            listen_when_ready: false,
            admin_listen: None,
            mode: Mode::Sidecar(Http1Server::default()),
            guardrails: Guardrails::default(),
            registry: prometheus::Registry::new(),
        }
    }

    /// Graceful shutdown (SIGTERM): readiness fails at once; the client listener stops
    /// accepting; every open watch ends cleanly (its client resumes from its last RV, against
    /// the next kubeplex); connections finish the requests under way and close; what is still
    /// open after `grace` is cut. Returns whether everything ended within `grace`.
    pub async fn shutdown(mut self, grace: Duration) -> bool {
        self.state.draining.store(true, std::sync::atomic::Ordering::Release);
        tracing::info!(grace = ?grace, "shutting down: draining connections");
        self.drain.drain();
        // The caches stop following the upstream: the state each leaves on disk is the one at
        // the RV of the last bookmark its watchers get (`Caches::stop_all`), from which both
        // resume after the restart (`live::disk`). An event being applied as its reflector is
        // aborted completes first.
        self.state.caches.freeze_all();
        tokio::time::sleep(FREEZE_SETTLE).await;
        // The caches' last states, for the next start (resumed from, or served during an
        // outage): bounded, so that the exit stays within the grace period.
        if let Some(disk) = self.state.caches.disk().cloned() {
            let running = self.state.caches.running();
            let to_disk = disk.clone();
            let write = tokio::task::spawn_blocking(move || to_disk.write_all(&running));
            if tokio::time::timeout(grace / 2, write).await.is_err() {
                tracing::warn!("cache states not all written within half the grace period");
            }
            if let Some(node) = &self.state.node {
                let _ = tokio::time::timeout(grace / 4, node.reviews.save(&disk)).await;
            }
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
    /// How long a node's reads that depend on a pod just bound to it are held
    /// (`auth::graph_lag`); zero: never.
    pub graph_lag: std::time::Duration,
    /// The upstream runs the Node authorizer: a node's reads it grants by rule are taken
    /// without a review (`auth::node_rules`).
    pub node_authorizer: bool,
    /// The upstream's authorizers refuse no part of what they grant whole: a narrowed read is
    /// granted by a review of the whole (`NodeAuth::authorizers_grant_whole`).
    pub authorizers_grant_whole: bool,
    /// `nodeImpersonation: associated-node`: the node this kubeplex's credential is bound to,
    /// the only one it acts as (`NodeAuth::bound_node`).
    pub bound_node: Option<String>,
    /// Bound ServiceAccount tokens verified here (`auth::service_account`).
    pub verify_service_account_tokens: bool,
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

/// Why a proxy did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The node mode's serving certificate, key or client CA.
    #[error("TLS listener: {0}")]
    Tls(String),
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Guardrails(#[from] guardrails::Error),
    /// A configured cache the upstream does not serve, or whose spec does not parse.
    #[error("cache {spec:?}: {why}")]
    Cache { spec: String, why: String },
}

/// A proxy's settings, before it starts ([`Proxy::builder`]).
pub struct ProxyBuilder {
    upstream: Upstream,
    caches: CachesConfig,
    listen: SocketAddr,
    listen_when_ready: bool,
    admin_listen: Option<SocketAddr>,
    mode: Mode,
    guardrails: Guardrails,
    registry: prometheus::Registry,
}

impl ProxyBuilder {
    /// Where clients connect (default `127.0.0.1:0`, an ephemeral port: [`Proxy::addr`]).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Whether clients may connect only once the proxy is ready (the configured caches synced,
    /// as `/readyz` says): the port is held from the start, and listened on then; until then a
    /// connection is refused, so that a client with another upstream (a node tier in front of
    /// pool replicas) goes to one that answers from its caches. Default: at once.
    pub fn listen_when_ready(mut self, when_ready: bool) -> Self {
        self.listen_when_ready = when_ready;
        self
    }

    /// The admin endpoints' listener (`/metrics`, `/healthz`, `/readyz`, `/debug/caches`);
    /// none by default.
    pub fn admin(mut self, addr: SocketAddr) -> Self {
        self.admin_listen = Some(addr);
        self
    }

    /// Who the clients are (default: the sidecar mode with the lean HTTP/1.1 server).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The sidecar mode with this HTTP/1.1 server.
    pub fn http1(self, http1: Http1Server) -> Self {
        self.mode(Mode::Sidecar(http1))
    }

    /// Passthrough and listener limits (default: the apiserver's).
    pub fn guardrails(mut self, guardrails: Guardrails) -> Self {
        self.guardrails = guardrails;
        self
    }

    /// The registry every layer registers its metrics into (the caches', the upstream
    /// side's, the serving side's), the one the process built; `/metrics` exposes all of it.
    /// Default: a registry of its own.
    pub fn registry(mut self, registry: prometheus::Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Binds the listeners and starts serving.
    pub async fn start(self) -> Result<Proxy, StartError> {
        let ProxyBuilder {
            upstream,
            caches,
            listen,
            listen_when_ready,
            admin_listen,
            mode,
            guardrails,
            registry,
        } = self;
        let guard = guardrails::Limiter::new(guardrails, &registry)?;
        let limits = guardrails.limits(&registry)?;
        upstream.register_metrics(&registry)?;
        let preload = caches.preload.clone();
        let upstream = Arc::new(upstream);
        let metrics = Metrics::new(registry.clone())?;
        // Node mode: the TLS listener's files are read before anything binds, so a missing
        // certificate is one clear error at start.
        let (node, tls) = match &mode {
            Mode::Sidecar(_) => (None, None),
            Mode::Node(config) => {
                let tls = kubeplex_net::TlsAcceptor::new(config.tls.clone())
                    .map_err(|e| StartError::Tls(e.to_string()))?;
                let reviews =
                    Reviews::new(upstream.clone(), config.reviews, metrics.reviews.clone());
                let node = NodeAuth {
                    reviews,
                    anonymous: config.anonymous,
                    graph_lag: config.graph_lag,
                    node_authorizer: config.node_authorizer,
                    authorizers_grant_whole: config.authorizers_grant_whole,
                    bound_node: config.bound_node.clone(),
                    tokens: config
                        .verify_service_account_tokens
                        .then(|| TokenVerifier::new(upstream.clone())),
                };
                let mut entries = node.reviews.entry_counts();
                entries.extend(node.tokens.iter().flat_map(|t| t.entry_counts()));
                crate::auth::review::CacheEntries::new(entries)?.register(&metrics.registry);
                (Some(Arc::new(node)), Some(tls))
            }
        };
        // Caches' states on disk (when configured) are read before anything serves: their
        // resources are known to discovery before it answers, and each waits for its cache's
        // first load (`live::disk`).
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
        caches.follow(resources.clone());
        if let Some(name) = node.as_ref().and_then(|n| n.bound_node.as_deref()) {
            caches.act_as_node(name);
        }
        if let Some(tokens) = node.as_ref().and_then(|n| n.tokens.as_ref()) {
            tokens.attach(&caches);
        }
        let pages = pages::page_cache(PAGE_CACHE_BYTES, pages::PAGE_IDLE);
        pages::register(&pages, &registry)?;
        let state = Arc::new(ProxyState {
            preload_specs: preload.clone(),
            upstream,
            resources,
            caches,
            metrics,
            pages,
            node,
            draining: std::sync::atomic::AtomicBool::new(false),
            accepting: std::sync::atomic::AtomicBool::new(!listen_when_ready),
            guard,
        });
        check_preload(&state.resources, &preload).await?;
        // What was cached before the restart starts again, with its disk state standing by.
        for (info, encoding, scope) in restarted {
            let _ = state.caches.get_or_start(&info, encoding, scope);
        }
        let (listener, addr) = if listen_when_ready {
            let (socket, addr) = hold(listen, "listen")?;
            (ClientListener::Held { socket, state: state.clone() }, addr)
        } else {
            let (listener, addr) = bind(listen, "listen").await?;
            (ClientListener::Listening(listener), addr)
        };
        let listener = listener.accepting();
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
                tokio::spawn(async move {
                    let Some(listener) = listener.await else { return };
                    kubeplex_net::serve_tls_limited(
                        listener,
                        tls,
                        move |req| handle(crate::net::h1::boxed(req)),
                        drain,
                        limits,
                    )
                    .await
                })
            }
            (Mode::Sidecar(Http1Server::Lean), _) => {
                let counters = state.metrics.lean.clone();
                tokio::spawn(async move {
                    let Some(listener) = listener.await else { return };
                    crate::net::serve_lean_until(listener, handle, counters, drain, limits).await
                })
            }
            _ => tokio::spawn(async move {
                let Some(listener) = listener.await else { return };
                crate::net::serve_until(
                    listener,
                    move |req| handle(crate::net::h1::boxed(req)),
                    drain,
                    limits,
                )
                .await
            }),
        };
        let admin_addr = match admin_listen {
            Some(a) => {
                let (l, admin_addr) = bind(a, "adminListen").await?;
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
        state.caches.maintain(&mut tasks);
        if let (Some(node), Some(disk)) = (&state.node, state.caches.disk()) {
            node.maintain(disk, &mut tasks);
        }
        if let Some(tokens) = state.node.as_ref().and_then(|n| n.tokens.as_ref()) {
            tokens.maintain(&mut tasks);
        }
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

/// The listener on `addr` (set by `setting`) and the address it got.
async fn bind(
    addr: SocketAddr,
    setting: &'static str,
) -> Result<(TcpListener, SocketAddr), BindError> {
    let bound = TcpListener::bind(addr).await.and_then(|l| Ok((l.local_addr()?, l)));
    let (local, listener) = bound.map_err(|error| BindError { setting, addr, error })?;
    Ok((listener, local))
}

/// The clients' listener: listening, or its port held until the proxy is ready.
enum ClientListener {
    Listening(TcpListener),
    Held { socket: tokio::net::TcpSocket, state: Arc<ProxyState> },
}

/// How often a held port checks whether the proxy is ready.
const READY_CHECK_EVERY: Duration = Duration::from_millis(250);
/// The backlog of a port listened on late (what `TcpListener::bind` asks).
const BACKLOG: u32 = 1024;

impl ClientListener {
    /// The listener, once clients may connect; `None` if the proxy shuts down first, or the
    /// held port cannot be listened on (logged).
    async fn accepting(self) -> Option<TcpListener> {
        let (socket, state) = match self {
            ClientListener::Listening(l) => return Some(l),
            ClientListener::Held { socket, state } => (socket, state),
        };
        loop {
            if state.draining.load(std::sync::atomic::Ordering::Acquire) {
                return None;
            }
            if super::admin::is_ready(&state).await {
                break;
            }
            tokio::time::sleep(READY_CHECK_EVERY).await;
        }
        match socket.listen(BACKLOG) {
            Ok(l) => {
                state.accepting.store(true, std::sync::atomic::Ordering::Release);
                tracing::info!("ready: listening for clients");
                Some(l)
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen on the held port");
                None
            }
        }
    }
}

/// The port `addr` (set by `setting`) bound but not listened on: connections are refused until
/// it is.
fn hold(
    addr: SocketAddr,
    setting: &'static str,
) -> Result<(tokio::net::TcpSocket, SocketAddr), BindError> {
    let err = |error| BindError { setting, addr, error };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(err)?;
    // As `TcpListener::bind` does: a port in TIME_WAIT after a restart can be bound again.
    socket.set_reuseaddr(true).map_err(err)?;
    socket.bind(addr).map_err(err)?;
    let local = socket.local_addr().map_err(err)?;
    Ok((socket, local))
}

/// How long start-up asks discovery about the configured caches before it binds anyway (an
/// upstream that does not answer is an outage, not a configuration error).
const PRELOAD_CHECK_WAIT: Duration = Duration::from_secs(3);

/// Refuses to start with a configured cache the upstream does not serve (`--cache podz`),
/// rather than stay unready forever. When discovery cannot be asked (the upstream is down at
/// start-up), the caches are started as configured and wait for it.
async fn check_preload(resources: &Resources, specs: &[String]) -> Result<(), StartError> {
    let refused = |spec: &str, why: String| StartError::Cache { spec: spec.to_string(), why };
    let check = async {
        for spec in specs {
            let s = CacheSpec::parse(spec).map_err(|e| refused(spec, e.to_string()))?;
            if resources.serves(&s.group, &s.version, &s.resource).await == Some(false) {
                let gv = if s.group.is_empty() {
                    s.version.clone()
                } else {
                    format!("{}/{}", s.group, s.version)
                };
                return Err(refused(spec, format!(
                    "the upstream serves no resource {:?} in {gv} (`kubectl api-resources` lists what it serves)",
                    s.resource
                )));
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
