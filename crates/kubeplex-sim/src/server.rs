//! The fake apiserver's HTTP side: accept loop, routing and fault injection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use super::auth::{self, Auth, Objects, UserInfo};
use super::kinds::{Kind, Registry};
use super::metrics::{RequestLabels, SimMetrics};
use super::repr::{error_is_protobuf, negotiate, Repr};
use super::respond::{self, Body, JSON};
use super::store::Store;
use super::{read, watch as watch_handler, write};
use crate::wire::request::{go_url, parse_path, ApiPath, ListOptions, ResourcePath};
use crate::wire::status::Status;
use admission::node_restriction;
use reviews::{review_kind, review_request};

mod admission;
mod faults;
mod graph_lag;
mod request_log;
mod reviews;

pub use faults::Faults;
pub use graph_lag::{pod_graph_lag, GraphLag, MEASURED_GRAPH_LAG};

/// Tunables of the fake apiserver's behaviour.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// How often a watcher that allowed bookmarks is due one (the cacher's
    /// `bookmarkFrequency`: a minute). Whether it is sent depends on the RV rule in `watch`.
    pub bookmark_interval: Duration,
    /// How often every resource's watch cache learns etcd's current revision without events of
    /// its own (etcd's progress notifications: `--experimental-watch-progress-notify-interval`,
    /// 10 minutes by default). Consistent reads of a resource also make its watch cache catch up
    /// (see `Store::publish_progress_of`), as the real one asks etcd for progress to serve them.
    pub progress_interval: Duration,
    /// How long a "not older than N" read waits for N before 504 (the apiserver: 3 s).
    pub too_large_rv_wait: Duration,
    /// Server-side watch timeout when the client gives none (the apiserver: 30–60 min).
    pub min_request_timeout: Duration,
    /// Streaming lists (`sendInitialEvents`, the WatchList feature, on by default since
    /// 1.34); off behaves like an older apiserver.
    pub watch_list: bool,
    /// How far the Node authorizer's graph lags the store. The apiserver builds the graph from
    /// its own informer on pods (and what they reference), so a pod just bound to a node is not
    /// yet that node's for a moment: its reads of the pod, and of the ConfigMaps and Secrets the
    /// pod uses, are refused with "no relationship found" until the graph catches up. Measured
    /// on kube-apiserver 1.36 right after a binding: median 0.3 s, max 0.9 s. The default is
    /// that max, so the sim is never kinder than the real one; tests may set another.
    pub node_graph_lag: Duration,
    /// How the graph's lag varies from one pod to the next (`GraphLag`): `Fixed` — every pod
    /// lags by `node_graph_lag` (tests: a window of known length) — or `Measured`, drawn per
    /// pod as on a real apiserver, at most `node_graph_lag`.
    pub node_graph_lag_spread: GraphLag,
    /// kube-apiserver 1.37's `WatchListCompression` (alpha there; 1.36 has no such gate, so
    /// off by default): a streaming list (`sendInitialEvents=true`) whose client accepts gzip is
    /// answered `Content-Encoding: gzip`, one gzip member per flush of the stream.
    pub watch_list_compression: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bookmark_interval: Duration::from_secs(60),
            progress_interval: Duration::from_secs(600),
            too_large_rv_wait: Duration::from_secs(3),
            min_request_timeout: Duration::from_secs(1800),
            watch_list: true,
            node_graph_lag: Duration::from_millis(900),
            node_graph_lag_spread: GraphLag::Fixed,
            watch_list_compression: false,
        }
    }
}

pub struct SimState {
    pub store: Store,
    pub registry: Registry,
    /// Which of the registry's custom resources are served now (their CRD installed, their
    /// version served): see [`crate::discovery::Served`].
    pub served: std::sync::RwLock<crate::discovery::Served>,
    pub metrics: SimMetrics,
    pub config: SimConfig,
    pub faults: Faults,
    pub addr: SocketAddr,
    /// The origin of the cacher's 1 s bookmark ticker: bookmarks due at some instant go out at
    /// the first tick after it (`timeBucketWatchers` buckets watchers by the second).
    pub started: tokio::time::Instant,
    /// The identity policy; `None` lets every request through (see `auth`).
    pub auth: std::sync::RwLock<Option<Arc<Auth>>>,
    /// Cleared by `Sim::stop_serving`: the server task is aborted then, which takes effect at
    /// its next await — a request (a client's immediate re-watch) that slips in meanwhile is
    /// refused rather than served by an apiserver that is down.
    pub serving: std::sync::atomic::AtomicBool,
}

impl SimState {
    pub fn auth(&self) -> Option<Arc<Auth>> {
        self.auth.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn served(&self) -> std::sync::RwLockReadGuard<'_, crate::discovery::Served> {
        self.served.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The storage kind of `group`/`resource`, served now at some version: none for a custom
    /// resource withdrawn.
    pub fn kind(&self, group: &str, resource: &str) -> Option<&Arc<Kind>> {
        let kind = self.registry.get(group, resource)?;
        self.served().serves_resource(group, resource).then_some(kind)
    }

    /// The kind at `group`/`version`/`resource` if that version is served now.
    pub fn kind_at(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<Kind>> {
        self.registry.at(group, version, resource).filter(|k| self.serves(k))
    }

    /// Every resource served now (its storage kind).
    pub fn kinds(&self) -> impl Iterator<Item = &Arc<Kind>> {
        let served = self.served().clone();
        self.registry.all().filter(move |k| served.serves_resource(&k.group, &k.resource))
    }

    /// Whether `kind`'s version is served now (a custom resource's CRD installed and that
    /// version served).
    pub fn serves(&self, kind: &Kind) -> bool {
        self.served().serves(&kind.group, &kind.version, &kind.resource)
    }
}

/// Lags are rounded up to this step, so that one authorization reads few snapshots.
const LAG_STEP: Duration = Duration::from_millis(10);

/// The Node authorizer's graph reads each pod of the store as it was its lag ago (the graph
/// follows the store through an informer: see [`SimConfig::node_graph_lag`] and [`GraphLag`]):
/// a pod bound a moment ago is not there yet, one deleted a moment ago still is.
impl Objects for SimState {
    fn object(&self, resource: &str, namespace: &str, name: &str) -> Option<serde_json::Value> {
        let kind = self.registry.get("", resource)?;
        self.store.get(kind, namespace, name).map(|o| o.value.clone())
    }

    fn pods(&self, namespace: &str) -> Vec<serde_json::Value> {
        let Some(kind) = self.registry.get("", "pods") else { return Vec::new() };
        let now = std::time::Instant::now();
        let (max, spread) = (self.config.node_graph_lag, self.config.node_graph_lag_spread);
        let lag_of = |key: &str| {
            let lag = pod_graph_lag(spread, max, key);
            match spread {
                GraphLag::Fixed => lag,
                GraphLag::Measured => {
                    let steps = lag.as_nanos().div_ceil(LAG_STEP.as_nanos()).min(1_000) as u32;
                    (LAG_STEP * steps).min(max)
                }
            }
        };
        let mut snapshots: std::collections::BTreeMap<Duration, crate::store::Items> =
            std::collections::BTreeMap::new();
        let mut snapshot_at = |lag: Duration| {
            snapshots
                .entry(lag)
                .or_insert_with(|| {
                    let at = now.checked_sub(lag).map(|t| self.store.rv_as_of(t));
                    let snapshot =
                        self.store.snapshot(kind, at).or_else(|_| self.store.snapshot(kind, None));
                    snapshot.map(|(_, items)| items).unwrap_or_default()
                })
                .clone()
        };
        let prefix = format!("{namespace}/");
        let in_namespace = |items: &crate::store::Items| -> Vec<String> {
            items
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(k, _)| k.clone())
                .collect()
        };
        // Every pod the graph may hold: those of now and of the longest lag ago (a pod that
        // came and went within it is missed: never the case in a test).
        let mut keys = in_namespace(&snapshot_at(Duration::ZERO));
        keys.extend(in_namespace(&snapshot_at(max)));
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter_map(|key| snapshot_at(lag_of(&key)).get(&key).map(|o| o.value.clone()))
            .collect()
    }
}

/// Serves connections from `listener` until the returned task is aborted; aborting it drops
/// every open connection with it.
/// Serves the fake apiserver with kube-apiserver's listener limits (header and idle timeouts,
/// head size: `Limits::apiserver`), so that it is no kinder to idle or slow clients.
pub fn spawn_server(state: Arc<SimState>, listener: TcpListener) -> tokio::task::JoinHandle<()> {
    let limits = kubeplex_net::Limits::apiserver();
    tokio::spawn(kubeplex_net::serve_limited(
        listener,
        move |req| handle(state.clone(), req),
        limits,
    ))
}

async fn handle(state: Arc<SimState>, req: Request<Incoming>) -> Response<Body> {
    if !state.serving.load(std::sync::atomic::Ordering::Acquire) {
        let mut resp = respond::error(&Status::service_unavailable("stopping"), false);
        resp.headers_mut()
            .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
        return resp;
    }
    request_log::record(&req);
    let mut stalled = state.faults.stalled.subscribe();
    // Wait out a stall fault; a dropped sender means no stall.
    let _ = stalled.wait_for(|s| !*s).await;
    // Go's net/http decodes the path (`URL.Path`) before any handler, and refuses a
    // malformed `%` escape itself; the apiserver routes on the decoded path.
    let Some(path) = go_url::unescape_path(req.uri().path()) else {
        return respond::go_bad_request();
    };
    // With a policy, every request is authenticated (and impersonation applied) first, as
    // the apiserver's filter chain does before routing.
    let policy = state.auth();
    let parsed = parse_path(&path);
    let user = match &policy {
        None => None,
        Some(a) => {
            // What the request asks, as `RequestInfo` has it before authentication: the
            // constrained impersonation modes authorize the requester for it.
            let asked = match &parsed {
                ApiPath::Resource(rp) => auth::request::resource_attributes(
                    Default::default(),
                    req.method(),
                    rp,
                    req.uri().query(),
                ),
                _ => {
                    auth::request::non_resource_attributes(Default::default(), req.method(), &path)
                }
            };
            match auth::request::identify(a, req.headers(), asked, state.as_ref()) {
                Ok(u) => Some(u),
                Err(refusal) => return *refusal,
            }
        }
    };
    if let (Some(a), Some(u)) = (&policy, &user) {
        if !matches!(parsed, ApiPath::Resource(_)) {
            let attrs = auth::request::non_resource_attributes(u.clone(), req.method(), &path);
            if let Err(refusal) = auth::request::authorize(a, &attrs, req.headers(), state.as_ref())
            {
                return *refusal;
            }
        }
    }
    match parsed {
        ApiPath::Resource(rp) => resource_request(state, rp, req, policy.zip(user)).await,
        ApiPath::Other => other(&state, &path, &req),
        p => {
            let resp = super::discovery::serve::respond(&state, &p, req.headers());
            // The apiserver counts non-resource requests too, with empty group, version,
            // resource and scope (`apiserver_request_total{resource=""}`).
            let labels = RequestLabels {
                verb: if req.method() == Method::GET { "GET" } else { "OTHER" },
                group: String::new(),
                version: String::new(),
                resource: String::new(),
                subresource: String::new(),
                scope: "",
            };
            state.metrics.observe(&labels, resp.status().as_u16());
            resp
        }
    }
}

fn other(state: &SimState, path: &str, req: &Request<Incoming>) -> Response<Body> {
    match path {
        "/metrics" => respond::body(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            state.metrics.render(),
            req.headers(),
        ),
        "/healthz" | "/readyz" | "/livez" => respond::body(200, "text/plain", b"ok".to_vec(), req.headers()),
        "/version" => respond::body(
            200,
            JSON,
            br#"{"major":"1","minor":"36","emulationMajor":"1","emulationMinor":"36","minCompatibilityMajor":"1","minCompatibilityMinor":"35","gitVersion":"v1.36.2-kubeplex-sim","gitCommit":"0000000000000000000000000000000000000000","gitTreeState":"clean","buildDate":"2026-11-01T00:00:00Z","goVersion":"go1.25.0","compiler":"gc","platform":"linux/amd64"}"#.to_vec(),
            req.headers(),
        ),
        "/.well-known/openid-configuration" => match state.auth() {
            Some(auth) => respond::body(
                200,
                JSON,
                auth.signer().discovery().to_string().into_bytes(),
                req.headers(),
            ),
            None => respond::error(&Status::path_not_found(), false),
        },
        // The key set comes only as `application/jwk-set+json` (kube-apiserver 1.36 answers an
        // `Accept: application/json` with 406).
        "/openid/v1/jwks" => match state.auth() {
            Some(auth) => {
                const JWKS: &str = "application/jwk-set+json";
                let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
                let acceptable = accept.is_none_or(|a| {
                    a.split(',').any(|m| {
                        let m = m.split(';').next().unwrap_or("").trim();
                        m == JWKS || m == "*/*" || m == "application/*" || m.is_empty()
                    })
                });
                if !acceptable {
                    let message = format!("406: Not Acceptable\n\nAvailable representations: {JWKS}");
                    return respond::error(&Status::new(406, "NotAcceptable", message), false);
                }
                let body = auth.signer().jwks().to_string().into_bytes();
                let mut resp = respond::body(200, JWKS, body, req.headers());
                resp.headers_mut().insert(
                    http::header::CACHE_CONTROL,
                    http::HeaderValue::from_static("public, max-age=3600"),
                );
                resp
            }
            None => respond::error(&Status::path_not_found(), false),
        },
        p if p.starts_with("/openapi/v3") => match super::openapi::handle(state, p) {
            Some(doc) => respond::body(200, JSON, doc, req.headers()),
            None => respond::error(&Status::path_not_found(), false),
        },
        _ => respond::error(&Status::path_not_found(), false),
    }
}

/// What a resource request is about, once routed.
pub struct Target {
    pub kind: Arc<Kind>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

async fn resource_request(
    state: Arc<SimState>,
    rp: ResourcePath,
    req: Request<Incoming>,
    identity: Option<(Arc<Auth>, UserInfo)>,
) -> Response<Body> {
    // Authorization runs before the handler, so a refused request for a resource the server
    // does not serve is a 403 too, not a 404. (The apiserver's priority-and-fairness runs
    // between authentication and authorization; the sim's throttle fault is checked after.)
    if let Some((policy, user)) = &identity {
        let attrs =
            auth::request::resource_attributes(user.clone(), req.method(), &rp, req.uri().query());
        if let Err(refusal) =
            auth::request::authorize(policy, &attrs, req.headers(), state.as_ref())
        {
            let labels = RequestLabels {
                verb: request_verb(req.method(), &rp, req.uri().query()),
                group: rp.group.clone(),
                version: rp.version.clone(),
                resource: rp.resource.clone(),
                subresource: rp.subresource.clone().unwrap_or_default(),
                scope: scope_of(&rp),
            };
            state.metrics.observe(&labels, refusal.status().as_u16());
            return *refusal;
        }
        if let Some(refused) = node_restriction(&state, user, &attrs) {
            return respond::error(&refused, error_is_protobuf(req.headers()));
        }
    }
    if let Some(review) = review_kind(&rp) {
        let throttled = state.faults.throttle_reviews.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |left| left.checked_sub(1),
        );
        if throttled.is_ok() {
            let labels = RequestLabels {
                verb: "THROTTLED",
                group: rp.group.clone(),
                version: rp.version.clone(),
                resource: rp.resource.clone(),
                subresource: String::new(),
                scope: "cluster",
            };
            state.metrics.observe(&labels, 429);
            return respond::too_many_requests(1);
        }
        let slow = *state.faults.slow_reviews.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(delay) = slow {
            tokio::time::sleep(delay).await;
        }
        return review_request(&state, &rp, review, req, identity.map(|(p, _)| p)).await;
    }
    let Some(kind) = state.kind(&rp.group, &rp.resource).cloned() else {
        if !state.served().serves_group_version(&rp.group, &rp.version) {
            return respond::page_not_found();
        }
        return respond::error(&Status::path_not_found(), false);
    };
    // A custom resource at one of its versions: that version's view of the stored objects; a
    // version its CRD does not serve has no handler (lifecycle.unserved.get.json).
    let kind = match state.kind_at(&rp.group, &rp.version, &rp.resource) {
        Some(at) if kind.custom => at.clone(),
        None if kind.custom && !state.served().serves_group_version(&rp.group, &rp.version) => {
            return respond::page_not_found();
        }
        _ => kind,
    };
    if let Some(unready) = state.faults.storage_initializing(&kind) {
        return respond::error(&unready, false);
    }
    if let Some(retry_after) = state.faults.take_throttle() {
        let labels = RequestLabels {
            verb: "THROTTLED",
            group: kind.group.clone(),
            version: kind.version.clone(),
            resource: kind.resource.clone(),
            subresource: String::new(),
            scope: "cluster",
        };
        state.metrics.observe(&labels, 429);
        return respond::too_many_requests(retry_after);
    }
    if kind.version != rp.version
        || (rp.namespace.is_some() && !kind.namespaced)
        || rp.subresource.as_ref().is_some_and(|s| !kind.subresources.contains(s))
    {
        return respond::error(&Status::path_not_found(), false);
    }
    let opts = match options(req.method(), &rp, req.uri().query()) {
        Ok(o) => o,
        Err(s) => return respond::error(&s, error_is_protobuf(req.headers())),
    };
    let target = Target {
        kind: kind.clone(),
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
        subresource: rp.subresource.clone(),
    };
    let verb: &'static str = match (req.method().clone(), &rp.name, opts.watch) {
        (Method::GET, None, true) => "WATCH",
        (Method::GET, None, false) => "LIST",
        (Method::GET, Some(_), false) => "GET",
        (Method::POST, _, _) => "POST",
        (Method::PUT, _, _) => "PUT",
        (Method::PATCH, _, _) => "PATCH",
        (Method::DELETE, None, _) => "DELETECOLLECTION",
        (Method::DELETE, Some(_), _) => "DELETE",
        _ => "UNKNOWN",
    };
    let labels = RequestLabels {
        verb,
        group: kind.group.clone(),
        version: kind.version.clone(),
        resource: kind.resource.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        scope: match (&rp.name, &rp.namespace) {
            (Some(_), _) => "resource",
            (None, Some(_)) => "namespace",
            (None, None) => "cluster",
        },
    };
    if matches!(verb, "LIST" | "WATCH") {
        if let Some(delay) = state.faults.wide_read_delay(&kind, &opts) {
            tokio::time::sleep(delay).await;
        }
        if let Some(unready) = state.faults.unready_cache(&kind, &opts) {
            state.metrics.observe(&labels, 429);
            return respond::error(&unready, error_is_protobuf(req.headers()) && kind.protobuf);
        }
    }
    let protobuf_errors = kind.protobuf && error_is_protobuf(req.headers());
    let repr = match negotiate(req.headers(), kind.protobuf, opts.watch) {
        Ok(r) => r,
        Err(s) => {
            state.metrics.observe(&labels, s.code);
            return respond::error(&s, protobuf_errors);
        }
    };
    let result = dispatch(&state, &target, &opts, repr, verb, &labels, req).await;
    let resp = result.unwrap_or_else(|s| respond::error(&s, protobuf_errors));
    state.metrics.observe(&labels, resp.status().as_u16());
    // A get's or list's size is known now; a watch's is observed when its stream ends.
    if matches!(verb, "GET" | "LIST") {
        if let Some(bytes) = http_body::Body::size_hint(resp.body()).exact() {
            state.metrics.response_size(&labels, bytes);
        }
    }
    resp
}

/// The query options a resource request's handler decodes: a list, watch or deletecollection
/// its `ListOptions` (400 for a conversion error, 422 for a validation one); a get of a named
/// object only `GetOptions` (every list and watch parameter ignored: a named GET with `watch=1`
/// is a get, as the apiserver's `GetResource` route has it). Creates, updates, patches and
/// deletes of one object decode options of their own (dryRun, fieldManager, ...) from the
/// query, none of which the sim reads, so `limit=x` there is ignored as the apiserver does.
fn options(method: &Method, rp: &ResourcePath, query: Option<&str>) -> Result<ListOptions, Status> {
    match (method, &rp.name) {
        (&Method::GET, None) | (&Method::DELETE, None) => ListOptions::parse(query),
        (&Method::GET, Some(_)) => ListOptions::parse_get(query),
        _ => Ok(ListOptions::default()),
    }
}

/// `apiserver_request_total`'s verb of a request refused before it was routed.
fn request_verb(method: &Method, rp: &ResourcePath, query: Option<&str>) -> &'static str {
    let watch = options(method, rp, query).is_ok_and(|o| o.watch);
    match (method.clone(), &rp.name, watch) {
        (Method::GET, None, true) => "WATCH",
        (Method::GET, None, false) => "LIST",
        (Method::GET, Some(_), false) => "GET",
        (Method::POST, _, _) => "POST",
        (Method::PUT, _, _) => "PUT",
        (Method::PATCH, _, _) => "PATCH",
        (Method::DELETE, None, _) => "DELETECOLLECTION",
        (Method::DELETE, Some(_), _) => "DELETE",
        _ => "UNKNOWN",
    }
}

fn scope_of(rp: &ResourcePath) -> &'static str {
    match (&rp.name, &rp.namespace) {
        (Some(_), _) => "resource",
        (None, Some(_)) => "namespace",
        (None, None) => "cluster",
    }
}

async fn dispatch(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    verb: &'static str,
    labels: &RequestLabels,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let need = |v: &str| {
        if t.kind.supports(v) {
            Ok(())
        } else {
            Err(Status::method_not_supported(&t.kind.group, &t.kind.resource, v))
        }
    };
    match verb {
        "GET" => read::get(state, t, opts, repr, req.headers()).await,
        "LIST" => {
            need("list")?;
            read::list(state, t, opts, repr, req.headers()).await
        }
        "WATCH" => {
            need("watch")?;
            let gzip = crate::wire::gzip::accepts_gzip(req.headers());
            watch_handler::watch(state, t, opts, repr, labels, gzip).await
        }
        "POST" => {
            need("create")?;
            write::create(state, t, repr, req).await
        }
        "PUT" => {
            need("update")?;
            write::update(state, t, repr, req).await
        }
        "PATCH" => {
            need("patch")?;
            write::patch(state, t, repr, req).await
        }
        "DELETE" => {
            need("delete")?;
            write::delete(state, t, repr, req).await
        }
        "DELETECOLLECTION" => {
            need("deletecollection")?;
            write::delete_collection(state, t, opts, repr, req).await
        }
        _ => Err(Status::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    }
}
