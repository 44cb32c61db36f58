#![forbid(unsafe_code)]
//! `sim`: an in-process fake kube-apiserver, faithful on the wire, for tests and the demo.
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! use kubeplex_sim::SimBuilder;
//! let sim = SimBuilder::new().start().await?;
//! sim.create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}}))?;
//! let url = sim.url(); // point a client at it
//! sim.drop_watches();  // fault injection
//! # Ok(()) }
//! ```
//!
//! Identities: by default every request is allowed whatever its credentials (the sidecar
//! model: kubeplex's own identity is privileged). A test of identities sets a policy —
//! `SimBuilder::new().auth(auth::Auth::new().service_account_token("t", "ns", "sa").grant(..))`
//! or [`Sim::set_auth`] — and the sim then authenticates, impersonates and authorizes like
//! kube-apiserver 1.36 (Node and RBAC authorizers) and serves TokenReview and
//! SubjectAccessReview; see [`auth`].
//!
//! Where the sim simplifies kube-apiserver (no admission, no managedFields bookkeeping,
//! immediate deletion without graceful periods or finalizers) is said in the module that
//! does it; everything a reading client can observe aims to be byte-identical.

pub mod auth;
mod codec;
mod crd;
pub mod discovery;
mod encode;
mod filter;
pub mod kinds;
pub mod metrics;
mod object;
mod openapi;
pub mod patch;
mod read;
mod repr;
mod respond;
pub mod seed;
mod server;
pub mod store;
mod watch;
mod workloads;
mod write;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use object::{FUTURE_FIELD_ANNOTATION, FUTURE_FIELD_NUMBER};
pub use server::{pod_graph_lag, GraphLag, SimConfig, MEASURED_GRAPH_LAG};
use server::{spawn_server, Faults, SimState};
pub use store::Retention;

use crate::wire::status::Status;

/// The wire rules the fake apiserver follows are the proxy's own (`crates/kubeplex-wire`).
use kubeplex_wire as wire;

/// Namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-node-lease", "kube-public", "kube-system"];

/// Builds and starts a fake apiserver.
#[derive(Debug, Clone)]
pub struct SimBuilder {
    listen: SocketAddr,
    config: SimConfig,
    retention: Retention,
    seed: Vec<Value>,
    auth: Option<auth::Auth>,
}

impl Default for SimBuilder {
    fn default() -> Self {
        SimBuilder {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            config: SimConfig::default(),
            retention: Retention::default(),
            seed: Vec::new(),
            auth: None,
        }
    }
}

impl SimBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    pub fn config(mut self, config: SimConfig) -> Self {
        self.config = config;
        self
    }

    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.config.bookmark_interval = d;
        self
    }

    /// Streaming lists compressed as kube-apiserver 1.37's `WatchListCompression` does
    /// (`SimConfig::watch_list_compression`).
    pub fn watch_list_compression(mut self, on: bool) -> Self {
        self.config.watch_list_compression = on;
        self
    }

    /// How far the Node authorizer's graph lags the store (`SimConfig::node_graph_lag`), for
    /// every pod alike.
    pub fn node_graph_lag(mut self, d: Duration) -> Self {
        self.config.node_graph_lag = d;
        self.config.node_graph_lag_spread = GraphLag::Fixed;
        self
    }

    /// The Node authorizer's graph lags each pod by a lag drawn as on a real apiserver under
    /// load, at most `max` (`GraphLag::Measured`).
    pub fn node_graph_lag_measured(mut self, max: Duration) -> Self {
        self.config.node_graph_lag = max;
        self.config.node_graph_lag_spread = GraphLag::Measured;
        self
    }

    pub fn retention(mut self, r: Retention) -> Self {
        self.retention = r;
        self
    }

    /// Objects created before the server accepts connections (namespaces they need are
    /// created too).
    pub fn seed(mut self, objects: impl IntoIterator<Item = Value>) -> Self {
        self.seed.extend(objects);
        self
    }

    /// Authenticates and authorizes every request with `policy` (see [`auth`]); without one
    /// the sim lets everything through, as a sidecar's privileged identity would see it.
    pub fn auth(mut self, policy: auth::Auth) -> Self {
        self.auth = Some(policy);
        self
    }

    pub async fn start(self) -> anyhow::Result<Sim> {
        let listener = TcpListener::bind(self.listen).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(SimState {
            store: store::Store::new(self.retention),
            registry: kinds::Registry::builtin(),
            served: std::sync::RwLock::new(discovery::Served::initial()),
            metrics: metrics::SimMetrics::new(),
            config: self.config.clone(),
            faults: Faults::default(),
            addr,
            started: tokio::time::Instant::now(),
            auth: std::sync::RwLock::new(self.auth.map(Arc::new)),
            serving: std::sync::atomic::AtomicBool::new(true),
        });
        let sim =
            Sim { state: state.clone(), server: Mutex::new(None), progress: Mutex::new(None) };
        for ns in INITIAL_NAMESPACES {
            sim.ensure_namespace(ns)?;
        }
        for obj in self.seed {
            if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
                sim.ensure_namespace(ns)?;
            }
            sim.create(obj)?;
        }
        // The seeded cluster existed before the server started: its writes are long past.
        state.store.settle();
        *sim.server.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(spawn_server(state.clone(), listener));
        let progress_state = state.clone();
        let every = self.config.progress_interval;
        *sim.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                progress_state.store.publish_progress();
            }
        }));
        Ok(sim)
    }
}

/// A running fake apiserver. Dropping it stops the server and ends every connection.
pub struct Sim {
    state: Arc<SimState>,
    server: Mutex<Option<JoinHandle<()>>>,
    progress: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        for slot in [&self.server, &self.progress] {
            if let Some(h) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                h.abort();
            }
        }
    }
}

impl Sim {
    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    /// A kubeconfig (JSON is valid YAML) pointing at this server.
    pub fn kubeconfig(&self) -> String {
        kubeconfig_for(&self.url(), "kubeplex-sim")
    }

    /// A kubeconfig pointing at this server that authenticates with bearer `token`.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        kubeconfig_with_user(&self.url(), "kubeplex-sim", json!({"token": token}))
    }

    /// Replaces the identity policy (`None`: every request allowed again). Requests already
    /// under way (open watches) keep the decision they started with, as the apiserver's do.
    pub fn set_auth(&self, policy: Option<auth::Auth>) {
        *self.state.auth.write().unwrap_or_else(|p| p.into_inner()) = policy.map(Arc::new);
    }

    /// The decision the sim's policy makes for `attrs` (the same a SubjectAccessReview
    /// answers), or allowed when no policy is set.
    pub fn authorize(&self, attrs: &auth::Attributes) -> auth::Decision {
        match self.state.auth() {
            Some(policy) => policy.authorize(attrs, self.state.as_ref()),
            None => auth::Decision { allowed: true, denied: false, reason: String::new() },
        }
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    pub fn current_rv(&self) -> u64 {
        self.state.store.current_rv()
    }

    fn kind_of(&self, v: &Value) -> Result<Arc<kinds::Kind>, Status> {
        let av = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let k = v.get("kind").and_then(Value::as_str).unwrap_or("");
        let kind = self.state.registry.by_kind(av, k).filter(|k| self.state.serves(k));
        kind.cloned().ok_or_else(|| {
            Status::bad_request(format!("no kind {k:?} is registered for version {av:?}"))
        })
    }

    fn resource(&self, group: &str, resource: &str) -> Result<Arc<kinds::Kind>, Status> {
        self.state.kind(group, resource).cloned().ok_or_else(Status::path_not_found)
    }

    /// Creates an object as a POST would; returns its stored JSON.
    pub fn create(&self, v: Value) -> Result<Value, Status> {
        let kind = self.kind_of(&v)?;
        let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string);
        let ns = if kind.namespaced { Some(ns.unwrap_or_else(|| "default".into())) } else { None };
        write::store_create(&self.state, &kind, v, ns.as_deref(), false).map(|o| o.value.clone())
    }

    /// Replaces an object (as a PUT without resourceVersion precondition), creating it when
    /// missing; returns its stored JSON.
    pub fn upsert(&self, mut v: Value) -> Result<Value, Status> {
        let kind = self.kind_of(&v)?;
        let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string();
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        if self.state.store.get(&kind, &ns, &name).is_none() {
            return self.create(v);
        }
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.shift_remove("resourceVersion");
        }
        self.modify(&kind.group, &kind.resource, &ns, &name, |cur| *cur = v)
    }

    /// Changes an object in place through `f` (like a read-modify-write PUT).
    pub fn modify(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, Status> {
        let kind = self.resource(group, resource)?;
        let key = store::object_key(namespace, name);
        let event = self.state.store.write(&kind, &key, |prev, rv| match prev {
            None => Err(Status::not_found(group, resource, name)),
            Some(prev) => {
                let mut v = prev.value.clone();
                f(&mut v);
                if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.shift_remove("resourceVersion");
                }
                write::updated_for_sim(&kind, prev, v, rv).map(Some)
            }
        })?;
        event.map(|e| e.obj.value.clone()).ok_or_else(|| Status::internal("nothing stored"))
    }

    pub fn delete(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), Status> {
        let kind = self.resource(group, resource)?;
        write::store_delete(&self.state, &kind, namespace, name, None).map(|_| ())
    }

    pub fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let kind = self.resource(group, resource).ok()?;
        self.state.store.get(&kind, namespace, name).map(|o| o.value.clone())
    }

    /// Every object of a resource, as stored now (key order).
    pub fn list(&self, group: &str, resource: &str) -> Vec<Value> {
        let Ok(kind) = self.resource(group, resource) else { return Vec::new() };
        match self.state.store.snapshot(&kind, None) {
            Ok((_, items)) => items.values().map(|o| o.value.clone()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The objects a list would return now — `namespace` (`None`: all) and a list's query
    /// (`fieldSelector=...&labelSelector=...`) — read from the store without a request, so a
    /// test or the load tool can compare a client's view without counting a LIST.
    pub fn select(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        query: &str,
    ) -> Result<Vec<Value>, Status> {
        let kind = self.resource(group, resource)?;
        let opts = wire::request::ListOptions::parse(Some(query))?;
        let filter = filter::Filter::new(&kind, &opts, namespace)?;
        let (_, items) =
            self.state.store.snapshot(&kind, None).map_err(|_| Status::internal("no snapshot"))?;
        Ok(items.values().filter(|o| filter.matches(&kind, o)).map(|o| o.value.clone()).collect())
    }

    pub fn count(&self, group: &str, resource: &str) -> usize {
        self.resource(group, resource).map_or(0, |k| self.state.store.count(&k))
    }

    fn ensure_namespace(&self, ns: &str) -> Result<(), Status> {
        if self.get("", "namespaces", "", ns).is_none() {
            self.create(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        Ok(())
    }

    // ---- fault injection ----

    /// Ends every open watch stream (clients see the connection's response end).
    pub fn drop_watches(&self) {
        self.state.store.drop_watchers();
    }

    /// Compacts history: watches and continue tokens from before now get 410 Expired.
    pub fn compact(&self) -> u64 {
        self.state.store.compact()
    }

    /// Refuses the next `count` resource requests with 429 Too Many Requests and
    /// `Retry-After: retry_after_seconds`.
    pub fn throttle(&self, count: u32, retry_after_seconds: u32) {
        *self.state.faults.throttle.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((count, retry_after_seconds));
    }

    /// Refuses the next `count` reviews (TokenReview, SubjectAccessReview) with 429 Too Many
    /// Requests and `Retry-After: 1`.
    pub fn throttle_reviews(&self, count: u32) {
        self.state.faults.throttle_reviews.store(count, std::sync::atomic::Ordering::Release);
    }

    /// Holds every list and watch of `group`/`resource` not pinned to one name (a
    /// `metadata.name=` field selector) for `delay` before it is handled, as a large resource's
    /// lists take the real apiserver seconds; `None` ends the fault.
    pub fn slow_wide_reads(&self, group: &str, resource: &str, delay: Option<Duration>) {
        *self.state.faults.slow_wide_reads.lock().unwrap_or_else(|p| p.into_inner()) =
            delay.map(|d| (group.to_string(), resource.to_string(), d));
    }

    /// A token of the ServiceAccount `namespace/service_account` bound to the pod
    /// `namespace/pod` (and so to its node), as the kubelet projects one into the pod: signed
    /// with the sim's key, valid for an hour and while the pod and the ServiceAccount exist
    /// with the uids it names (`auth::tokens`). Needs a policy, the pod and the ServiceAccount.
    pub fn issue_bound_token(
        &self,
        namespace: &str,
        service_account: &str,
        pod: &str,
    ) -> anyhow::Result<String> {
        use anyhow::Context;
        let policy = self.state.auth().context("no policy: tokens mean nothing")?;
        let pod = self.get("", "pods", namespace, pod).context("no such pod")?;
        let sa = self
            .get("", "serviceaccounts", namespace, service_account)
            .context("no such ServiceAccount")?;
        let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
        let node = self.get("", "nodes", "", node_name);
        let now = chrono::Utc::now().timestamp();
        let claims = auth::tokens::claims(&pod, &sa, node.as_ref(), now, 3600);
        let token = policy.signer().sign(&claims);
        let private = &claims["kubernetes.io"];
        let s = |p: &str| private.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        let mut user = auth::UserInfo::service_account(namespace, service_account)
            .with_uid(s("/serviceaccount/uid"))
            .with_extra("authentication.kubernetes.io/pod-name", &[&s("/pod/name")])
            .with_extra("authentication.kubernetes.io/pod-uid", &[&s("/pod/uid")]);
        if let Some(jti) = claims["jti"].as_str() {
            user = user.with_extra(auth::CREDENTIAL_ID, &[&format!("JTI={jti}")]);
        }
        if !node_name.is_empty() {
            user = user.with_extra(auth::NODE_NAME_KEY, &[node_name]);
            let node_uid = s("/node/uid");
            if !node_uid.is_empty() {
                user = user.with_extra("authentication.kubernetes.io/node-uid", &[&node_uid]);
            }
        }
        let updated = (*policy).clone().bound_token(&token, user, auth::tokens::bound(&claims));
        self.set_auth(Some(updated));
        Ok(token)
    }

    /// While `on`, the watch cache of `group`/`resource` is (re)initializing, as the apiserver's
    /// is after its own watch on etcd broke: watches of it, and lists at a resourceVersion, are
    /// answered 429 `storage is (re)initializing` (`Retry-After: 1`); consistent lists and gets
    /// are served. Switching it on ends the open watches of that resource.
    pub fn reinitializing(&self, group: &str, resource: &str, on: bool) {
        let mut unready =
            self.state.faults.reinitializing.lock().unwrap_or_else(|p| p.into_inner());
        unready.retain(|(g, r)| (g.as_str(), r.as_str()) != (group, resource));
        if on {
            unready.push((group.to_string(), resource.to_string()));
        }
        drop(unready);
        if on {
            if let Some(kind) = self.state.registry.get(group, resource) {
                self.state.store.drop_watchers_of(kind);
            }
        }
    }

    /// Holds every TokenReview and SubjectAccessReview for `delay` before it is answered (an
    /// apiserver too busy to answer them in time); `None` ends the fault.
    pub fn slow_reviews(&self, delay: Option<Duration>) {
        *self.state.faults.slow_reviews.lock().unwrap_or_else(|p| p.into_inner()) = delay;
    }

    /// While `true`, every request is held before it is handled.
    pub fn stall(&self, stalled: bool) {
        self.state.faults.stalled.send_replace(stalled);
    }

    /// Stops listening and ends every connection: new connections are refused until
    /// `restart`. State is kept.
    pub fn stop_serving(&self) {
        self.state.serving.store(false, std::sync::atomic::Ordering::Release);
        if let Some(h) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            h.abort();
        }
        self.state.store.drop_watchers();
    }

    /// Starts serving again on the same address with the state kept (an apiserver restart).
    pub async fn restart(&self) -> anyhow::Result<()> {
        self.stop_serving();
        // The aborted accept loop releases the socket asynchronously; retry the bind briefly.
        let mut last_err = None;
        for _ in 0..50 {
            match TcpListener::bind(self.state.addr).await {
                Ok(l) => {
                    self.state.serving.store(true, std::sync::atomic::Ordering::Release);
                    *self.server.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(spawn_server(self.state.clone(), l));
                    return Ok(());
                }
                Err(e) => {
                    last_err = Some(e);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        Err(last_err.map_or_else(|| anyhow::anyhow!("rebind failed"), Into::into))
    }

    /// The sim's `/metrics` text.
    pub fn metrics_text(&self) -> String {
        String::from_utf8_lossy(&self.state.metrics.render()).into_owned()
    }
}

/// A kubeconfig for a plain-HTTP server (JSON, which kubectl and client libraries read as YAML).
pub fn kubeconfig_for(url: &str, name: &str) -> String {
    kubeconfig_with_user(url, name, json!({}))
}

/// A kubeconfig for a plain-HTTP server with the given `user` entry (e.g. `{"token": T}`).
pub fn kubeconfig_with_user(url: &str, name: &str, user: Value) -> String {
    let v = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}
