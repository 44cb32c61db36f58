//! [`Upstream`]: the HTTP client toward the kube-apiserver. Requests and responses stream
//! through unbuffered; the caller gives an origin-form request, `Upstream` supplies where it
//! goes and (unless asked not to) who sends it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use http::header::{AUTHORIZATION, HOST, UPGRADE};
use http::uri::{Authority, Scheme};
use http::{Request, Response, StatusCode, Uri, Version};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use http_body_util::{BodyExt, Empty, Full};

use super::cert_files::{CertFileError, ReloadingCert};
use super::config::{ClientCertPem, UpstreamConfig};
use super::credentials::{AuthError, Credentials, Current};
pub use super::failover::ServedBy;
use super::failover::{self, Failover};
use super::streams::{ResponseBody, Spread};
use super::tls::{self, TlsError};

/// The header that names whom a request acts as.
const IMPERSONATE_USER: http::HeaderName = http::HeaderName::from_static("impersonate-user");

/// A streaming request body, as the server hands them over.
pub type UpstreamBody = kubeplex_net::Body;

/// HTTP/2 keepalive, as client-go's transport does it (`ReadIdleTimeout` 30 s, `PingTimeout`
/// 15 s): a watch on a dead connection otherwise waits forever for the next event.
const H2_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
const H2_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
/// Idle connections kept per upstream, as client-go's transport keeps them
/// (`transport/cache.go`: `MaxIdleConnsPerHost: idleConnsPerHost`, 25). Over HTTP/1.1 each
/// request in flight has a connection of its own, and hyper keeps every one that comes back
/// idle (for its 90 s idle timeout) with its 8 KiB read buffer: after a burst of a thousand
/// passthrough requests, a thousand idle connections on both sides. Over HTTP/2 there is one.
const MAX_IDLE_PER_UPSTREAM: usize = 25;

type HttpClient = Client<HttpsConnector<HttpConnector>, UpstreamBody>;

/// Why a request could not be sent (an upstream answer, of any status, is not an error).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    CertFile(#[from] CertFileError),
    #[error("invalid upstream server url: {0}")]
    ServerUrl(String),
    #[error("request target {0:?} is not a path")]
    NotOriginForm(String),
    #[error("building the upstream request uri: {0}")]
    Uri(#[from] http::Error),
    #[error("reading the request body: {0}")]
    Body(String),
    /// `detail` is the whole cause chain (e.g. a certificate rejection), which the hyper
    /// error's own message leaves out.
    #[error("request to {url} failed: {detail}")]
    Request {
        url: String,
        detail: String,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
}

impl ClientError {
    /// No connection could be made: the upstream is not there (refused, unroutable, timed
    /// out). An upstream that answered, with any status, was there.
    pub fn unreachable(&self) -> bool {
        matches!(self, ClientError::Request { source, .. } if source.is_connect())
    }
}

/// The connection to the upstream apiserver. Cloning is cheap and shares connections.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
    /// The user every request of [`Upstream::send`] acts as (`Impersonate-User`), if any
    /// ([`Upstream::acting_as`]).
    acting_as: Option<http::HeaderValue>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").field("base_url", &self.base_url()).finish_non_exhaustive()
    }
}

struct Inner {
    config: UpstreamConfig,
    credentials: Credentials,
    /// The kubeconfig's own client certificate (exclusive with an exec plugin's).
    static_cert: Option<Arc<ClientCertPem>>,
    /// `send` replaces the caller's `Authorization` only when kubeplex has credentials of its
    /// own; without any, the caller's are the only ones there are.
    has_credentials: bool,
    /// Where requests go, in order of preference: `config.preferred` (a pool tier), then
    /// `config.server` (the apiserver). One unless upstreams are configured.
    endpoints: Vec<Endpoint>,
    failover: Arc<Failover>,
    /// When the upstream last answered a request (see [`Upstream::last_answered`]).
    answered: Mutex<Option<Instant>>,
}

/// One upstream server and its connections.
struct Endpoint {
    /// The configuration with this server's URL and TLS settings.
    config: UpstreamConfig,
    base_url: String,
    scheme: Scheme,
    authority: Authority,
    /// Connections that present no client certificate, for `send_as_is`.
    as_is: Pools,
    /// Connections that present kubeplex's client certificate, for `send`. Swapped when an
    /// exec plugin returns a new certificate: a TLS identity is fixed per connection.
    own: Mutex<Transport>,
    /// This server's own client certificate (a pool tier's), instead of the kubeconfig's.
    cert_files: Option<ReloadingCert>,
}

#[derive(Clone)]
struct Transport {
    cert: Option<Arc<ClientCertPem>>,
    pools: Pools,
}

/// Two pools toward the same server. `multiplexed` offers h2 so that many long watches share
/// one HTTP/2 connection when the apiserver agrees; `http1` is for protocol upgrades (exec,
/// attach, port-forward), which exist only in HTTP/1.1.
#[derive(Clone)]
struct Pools {
    /// Each of its clients one HTTP/2 connection (or HTTP/1.1 ones), under the apiserver's
    /// stream limit ([`Spread`]).
    multiplexed: Arc<Spread<HttpClient>>,
    http1: HttpClient,
}

impl Upstream {
    /// Builds the client; no connection is made until the first request.
    pub fn new(config: UpstreamConfig) -> Result<Self, ClientError> {
        let credentials = Credentials::new(&config.auth, config.token_reload_interval)?;
        let static_cert = config.tls.client_cert.clone().map(Arc::new);
        let has_credentials = static_cert.is_some() || credentials.is_some();
        // Each preferred server's own client certificate, if it has one; the apiserver last.
        let own_certs = config.preferred.iter().map(|p| p.client_cert.clone()).chain([None]);
        let endpoints = config
            .servers()
            .into_iter()
            .zip(own_certs)
            .map(|(server, files)| {
                let files = files.map(ReloadingCert::new).transpose()?;
                let cert = match &files {
                    Some(files) => Some(files.current()),
                    None => static_cert.clone(),
                };
                Endpoint::new(server, cert, files)
            })
            .collect::<Result<Vec<_>, ClientError>>()?;
        let failover = Arc::new(Failover::new(
            endpoints
                .iter()
                .map(|e| {
                    let address = failover::address(&e.authority, e.config.server.https);
                    (e.base_url.clone(), address)
                })
                .collect(),
        ));
        let inner = Inner {
            config,
            credentials,
            static_cert,
            has_credentials,
            endpoints,
            failover,
            answered: Mutex::new(None),
        };
        Ok(Self { inner: Arc::new(inner), acting_as: None })
    }

    /// The apiserver's base URL, e.g. `https://10.0.0.1:6443` (with its path prefix, if any):
    /// the last of the upstreams.
    pub fn base_url(&self) -> &str {
        self.inner.endpoints.last().map_or("", |e| e.base_url.as_str())
    }

    /// Whether the upstream at `position` (a response's [`ServedBy`]) is the apiserver itself,
    /// the last of the upstreams, rather than a tier in front of it.
    pub fn is_apiserver(&self, position: usize) -> bool {
        position + 1 >= self.inner.endpoints.len()
    }

    /// Every upstream's URL, in order of preference (the apiserver last).
    pub fn urls(&self) -> Vec<&str> {
        self.inner.endpoints.iter().map(|e| e.base_url.as_str()).collect()
    }

    /// The URL of the upstream requests go to now.
    pub fn active_url(&self) -> &str {
        self.inner.failover.url(self.inner.failover.active())
    }

    /// The position of the upstream requests go to now (0: the most preferred), as it
    /// changes: a watch on a later one ([`ServedBy`]) moves back when an earlier one returns.
    pub fn active(&self) -> tokio::sync::watch::Receiver<usize> {
        self.inner.failover.subscribe()
    }

    /// Registers the upstreams' series (which is active, switches between them).
    pub fn register_metrics(
        &self,
        registry: &prometheus::Registry,
    ) -> Result<(), prometheus::Error> {
        self.inner.failover.register(registry)
    }

    /// The configuration this client was built from.
    pub fn config(&self) -> &UpstreamConfig {
        &self.inner.config
    }

    /// When the upstream last answered a request with a status other than 502, 503 or 504
    /// (which a load balancer with no apiserver behind it, or an apiserver that cannot serve,
    /// answers): the latest moment it is known to have been there. `None` before its first
    /// answer.
    pub fn last_answered(&self) -> Option<Instant> {
        *self.inner.answered.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The same upstream and connections, whose [`Upstream::send`] acts as `user` by name alone
    /// (`Impersonate-User`, no groups): the form kube-apiserver 1.36's constrained
    /// impersonation grants a ServiceAccount bound to node NAME for `system:node:NAME`
    /// (associated-node mode). A node tier loads the caches of its own node's pods and Node
    /// so: its credential needs no read of every pod or Node (`auth::node`).
    pub fn acting_as(&self, user: &str) -> Option<Upstream> {
        let value = http::HeaderValue::from_str(user).ok()?;
        Some(Upstream { inner: self.inner.clone(), acting_as: Some(value) })
    }

    /// Sends `req` as kubeplex: with kubeplex's client certificate and `Authorization`
    /// (replacing the caller's whenever kubeplex has credentials of its own). Other headers,
    /// including any `Impersonate-*`, are sent unchanged — the caller decides what to forward.
    ///
    /// The request URI is taken as origin form (its path and query; a scheme or authority,
    /// as HTTP/2 requests carry, is ignored) and prefixed with the server's URL.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, ClientError> {
        let current = self.inner.credentials.current().await?;
        let response = self
            .inner
            .with_failover(req, |endpoint, mut req| {
                let pools = endpoint.own_pools(&self.inner, &current)?;
                if self.inner.has_credentials {
                    match &current.authorization {
                        Some(value) => req.headers_mut().insert(AUTHORIZATION, value.clone()),
                        None => req.headers_mut().remove(AUTHORIZATION),
                    };
                }
                if let Some(user) = &self.acting_as {
                    req.headers_mut().insert(IMPERSONATE_USER, user.clone());
                }
                Ok((pools, req))
            })
            .await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            self.inner.credentials.unauthorized(&current).await;
        }
        Ok(response)
    }

    /// Sends `req` on behalf of the caller: its own `Authorization` is kept, nothing is added,
    /// and the connection presents no client certificate — the apiserver tries a certificate
    /// before a bearer token, so presenting kubeplex's would make the request kubeplex's.
    pub async fn send_as_is(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, ClientError> {
        self.inner.with_failover(req, |endpoint, req| Ok((endpoint.as_is.clone(), req))).await
    }
}

impl Inner {
    /// Sends `req` to the active upstream, with the pools and headers `prepare` gives for it.
    /// When that upstream cannot be reached, the next one becomes active (`failover`), and a
    /// request without a body — every read — is sent there at once; one with a body (which
    /// is gone) fails, as a dropped connection fails it for any client.
    async fn with_failover(
        &self,
        req: Request<UpstreamBody>,
        prepare: impl Fn(
            &Endpoint,
            Request<UpstreamBody>,
        ) -> Result<(Pools, Request<UpstreamBody>), ClientError>,
    ) -> Result<Response<ResponseBody>, ClientError> {
        // Kept only where there is a next upstream to send it to.
        let (mut req, again) =
            if self.endpoints.len() > 1 { replayable(req).await? } else { (req, None) };
        let mut at = self.failover.active();
        loop {
            let endpoint = &self.endpoints[at];
            let (pools, this) = prepare(endpoint, endpoint.retarget(req)?)?;
            match self.dispatch(&pools, this).await {
                Ok(mut response) => {
                    response.extensions_mut().insert(ServedBy(at));
                    return Ok(response);
                }
                Err(e) if e.unreachable() && at + 1 < self.endpoints.len() => {
                    let next = self.failover.unreachable(at, &e);
                    match &again {
                        Some(again) if next != at => {
                            at = next;
                            req = again();
                        }
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn dispatch(
        &self,
        pools: &Pools,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, ClientError> {
        let (client, slot) = if req.headers().contains_key(UPGRADE) {
            (pools.http1.clone(), None)
        } else {
            let (client, slot) = pools.multiplexed.pick();
            (client, Some(slot))
        };
        let url = req.uri().to_string();
        let response = client.request(req).await.map_err(|source| ClientError::Request {
            url,
            detail: error_chain(&source),
            source,
        })?;
        let response = response.map(|body| ResponseBody::new(body, slot));
        if !matches!(response.status().as_u16(), 502..=504) {
            *self.answered.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
        Ok(response)
    }
}

impl Endpoint {
    fn new(
        config: UpstreamConfig,
        cert: Option<Arc<ClientCertPem>>,
        cert_files: Option<ReloadingCert>,
    ) -> Result<Self, ClientError> {
        let base_url = config.base_url();
        let scheme = if config.server.https { Scheme::HTTPS } else { Scheme::HTTP };
        let authority: Authority = config
            .server
            .authority
            .parse()
            .map_err(|_| ClientError::ServerUrl(base_url.clone()))?;
        let as_is = build_pools(&config, None)?;
        let own_pools = match &cert {
            Some(cert) => build_pools(&config, Some(cert))?,
            None => as_is.clone(),
        };
        let own = Mutex::new(Transport { cert, pools: own_pools });
        Ok(Endpoint { config, base_url, scheme, authority, as_is, own, cert_files })
    }

    /// Points an origin-form request at the server.
    fn retarget(
        &self,
        mut req: Request<UpstreamBody>,
    ) -> Result<Request<UpstreamBody>, ClientError> {
        let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        if !target.starts_with('/') {
            return Err(ClientError::NotOriginForm(target.to_owned()));
        }
        let prefix = &self.config.server.path_prefix;
        let uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{prefix}{target}"))
            .build()?;
        *req.uri_mut() = uri;
        // The caller's Host names kubeplex; hyper writes the upstream's (Host on HTTP/1.1,
        // :authority on HTTP/2) from the URI.
        req.headers_mut().remove(HOST);
        // A downstream HTTP/2 request would make hyper demand HTTP/2 with prior knowledge;
        // the protocol toward the upstream is chosen by ALPN instead.
        *req.version_mut() = Version::HTTP_11;
        Ok(req)
    }

    /// The pools for kubeplex's own identity, rebuilt when an exec plugin changed it (or this
    /// server's own certificate files did).
    fn own_pools(&self, inner: &Inner, current: &Current) -> Result<Pools, ClientError> {
        let cert = match &self.cert_files {
            Some(files) => Some(files.current()),
            None => {
                let exec_cert = current.exec.as_ref().and_then(|creds| creds.client_cert.clone());
                exec_cert.or_else(|| inner.static_cert.clone())
            }
        };
        let mut own = self.own.lock().unwrap_or_else(PoisonError::into_inner);
        // Compared by content: a plugin re-run for a new token often returns the same cert.
        if own.cert != cert {
            // Connections with the old certificate finish their requests and close; new
            // requests get a new pool (client-go closes them all on rotation).
            let pools = match &cert {
                Some(cert) => build_pools(&self.config, Some(cert))?,
                None => self.as_is.clone(),
            };
            *own = Transport { cert, pools };
        }
        Ok(own.pools.clone())
    }
}

/// The largest request body kept to send a request again to the next upstream: the
/// apiserver's own limit on a request body (3 MiB, `MaxRequestBodyBytes`).
const MAX_REPLAYED_BODY: u64 = 3 * 1024 * 1024;

/// `req`, and a way to build it again to send it to the next upstream when the active one
/// cannot be reached (`ClientError::unreachable`: no connection was made, so nothing of it was
/// sent, and a write is as safe to send again as a read). A body of known length up to
/// [`MAX_REPLAYED_BODY`] is read first (the passthrough has bounded it already: a body of
/// unknown length was read whole there); a longer one is not kept, and the request fails with
/// its upstream, as a dropped connection fails it for any client.
async fn replayable(
    req: Request<UpstreamBody>,
) -> Result<(Request<UpstreamBody>, Option<impl Fn() -> Request<UpstreamBody>>), ClientError> {
    use http_body::Body as _;
    let body = if req.body().is_end_stream() {
        bytes::Bytes::new()
    } else if req.body().size_hint().exact().is_some_and(|n| n <= MAX_REPLAYED_BODY) {
        let (parts, body) = req.into_parts();
        let read = body.collect().await.map_err(|e| ClientError::Body(e.to_string()))?;
        return Ok(replay(Request::from_parts(parts, read.to_bytes())));
    } else {
        return Ok((req, None));
    };
    let (parts, _) = req.into_parts();
    Ok(replay(Request::from_parts(parts, body)))
}

/// A request with its whole body, and a way to build it again.
fn replay(
    req: Request<bytes::Bytes>,
) -> (Request<UpstreamBody>, Option<impl Fn() -> Request<UpstreamBody>>) {
    let build = move || {
        let body = match req.body().is_empty() {
            true => Empty::new().map_err(|never| match never {}).boxed(),
            false => Full::new(req.body().clone()).map_err(|never| match never {}).boxed(),
        };
        let mut again = Request::new(body);
        *again.method_mut() = req.method().clone();
        *again.uri_mut() = req.uri().clone();
        *again.version_mut() = req.version();
        *again.headers_mut() = req.headers().clone();
        again
    };
    (build(), Some(build))
}

impl Credentials {
    fn is_some(&self) -> bool {
        !matches!(self, Credentials::None)
    }
}

fn build_pools(
    config: &UpstreamConfig,
    cert: Option<&ClientCertPem>,
) -> Result<Pools, ClientError> {
    // Built once here to report a bad configuration; more alike as requests need them. One
    // that cannot be built then (a CA file gone meanwhile) shares the first's connection.
    let first = build_client(config, cert, true)?;
    let (settings, own_cert) = (config.clone(), cert.cloned());
    let shared = first.clone();
    let make = move || {
        build_client(&settings, own_cert.as_ref(), true).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot open another upstream connection; sharing one");
            shared.clone()
        })
    };
    Ok(Pools {
        multiplexed: Arc::new(Spread::with_first(first, make)),
        http1: build_client(config, cert, false)?,
    })
}

/// A client whose TLS offers `h2, http/1.1` (`multiplexed`) or no ALPN at all, which servers
/// take as HTTP/1.1.
fn build_client(
    config: &UpstreamConfig,
    cert: Option<&ClientCertPem>,
    multiplexed: bool,
) -> Result<HttpClient, ClientError> {
    let base_url = config.base_url();
    let tls_config = tls::client_config(&config.tls, config.server.https, &base_url, cert)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(config.connect_timeout));
    http.set_nodelay(true);
    let builder =
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls_config).https_or_http();
    let builder = match &config.tls.server_name {
        Some(name) => {
            builder.with_server_name_resolver(FixedServerNameResolver::new(tls::server_name(name)?))
        }
        None => builder,
    };
    let connector = if multiplexed {
        builder.enable_http1().enable_http2().wrap_connector(http)
    } else {
        builder.enable_http1().wrap_connector(http)
    };
    let client = Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(H2_PING_INTERVAL)
        .http2_keep_alive_timeout(H2_PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .pool_max_idle_per_host(MAX_IDLE_PER_UPSTREAM)
        .build(connector);
    Ok(client)
}

/// "a: b: c" from an error and its sources, skipping repeats.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(err) = next {
        let part = err.to_string();
        if !parts.iter().any(|p| p.contains(&part)) {
            parts.push(part);
        }
        next = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests;
