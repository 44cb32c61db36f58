//! The client listener's request stack, built in one function ([`client`]), one layer per line,
//! outermost first. Every layer here works on the request and the response head only: bodies
//! (a watch's stream, a list's shared buffers) pass through untouched, so no layer buffers a
//! watch or copies a list.
//!
//! A layer's future is its own concrete type where it can be (the span, the panic guard, the
//! classification) and boxed only where the work after the inner call needs an `async` block
//! (metrics, routing): one allocation per request beyond what the handler did before.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::future::{BoxFuture, Either, FutureExt};
use http::{Method, Request, Response};
use tower::{Layer, Service, ServiceBuilder};
use tracing::instrument::Instrumented;
use tracing::Instrument;

use super::body::{self, Body};
use super::metrics::Source;
use super::request::{Class, Classified};
use super::state::ProxyState;
use crate::auth::{Identity, NodeAuth};
use crate::net::h1::ReqBody;
use crate::wire::status::Status;

/// The client listener's stack, outermost first.
pub fn client(
    state: Arc<ProxyState>,
) -> impl Service<
    Request<ReqBody>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    ServiceBuilder::new()
        // 1. A span per request (method, path): every log line below it, a caught panic's
        //    included, says which request it is about. At debug level: an info span would
        //    format its fields on every request of the hot path (`RUST_LOG=kubeplex=debug`).
        .layer(TraceLayer)
        // 2. A panic anywhere below answers 500 with a Status instead of dropping the
        //    connection and every other request multiplexed on it. Above the metrics, which
        //    cannot observe a response that was never made; panics are counted here.
        .layer(CatchPanicLayer { panics: state.metrics.panics.clone() })
        // 3. Read the request once — verb, API path, list options, credentials — into the
        //    typed `Class` every layer below takes (routing, the cache, metrics labels).
        .layer(ClassifyLayer)
        // 4. Time and count every request by resource, verb, code and source. Below the
        //    classification, whose verb and resource it labels by; above authentication, so
        //    that its 401s are counted too.
        .layer(MetricsLayer { state: state.clone() })
        // 5. Who the client is (node mode: certificate, token review, or anonymous; 401 when
        //    none holds). In the sidecar mode every client shares kubeplex's identity.
        .layer(AuthenticateLayer { node: state.node.clone() })
        // 6. The cache when it can answer exactly (and, in node mode, the client may read it),
        //    the passthrough stack (`passthrough::stack`) otherwise.
        .service(Route { passthrough: super::passthrough::stack(state.clone()), state })
}

// ---- 1. span ----

#[derive(Clone, Copy)]
struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Trace { inner }
    }
}

#[derive(Clone)]
struct Trace<S> {
    inner: S,
}

impl<S: Service<Request<ReqBody>>> Service<Request<ReqBody>> for Trace<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let span =
            tracing::debug_span!("request", method = %req.method(), path = %req.uri().path());
        self.inner.call(req).instrument(span)
    }
}

// ---- 2. panic guard ----

#[derive(Clone)]
struct CatchPanicLayer {
    panics: prometheus::IntCounter,
}

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;
    fn layer(&self, inner: S) -> CatchPanic<S> {
        CatchPanic { inner, panics: self.panics.clone() }
    }
}

#[derive(Clone)]
struct CatchPanic<S> {
    inner: S,
    panics: prometheus::IntCounter,
}

impl<S> Service<Request<ReqBody>> for CatchPanic<S>
where
    S: Service<Request<ReqBody>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let panics = self.panics.clone();
        // A panic while the inner service builds its future is caught as well as one while
        // it runs. (A panic while a response body streams ends that response only.)
        let called = std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req)));
        match called {
            Ok(fut) => AssertUnwindSafe(fut)
                .catch_unwind()
                .map(move |result| match result {
                    Ok(answered) => answered,
                    Err(panic) => Ok(panicked(&panics, panic.as_ref())),
                })
                .boxed(),
            Err(panic) => {
                futures_util::future::ready(Ok(panicked(&panics, panic.as_ref()))).boxed()
            }
        }
    }
}

/// Counts and logs a caught panic; the request's answer.
fn panicked(panics: &prometheus::IntCounter, panic: &(dyn std::any::Any + Send)) -> Response<Body> {
    panics.inc();
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %what, "request handler panicked; answered 500");
    panic_response()
}

/// The answer to a request whose handler panicked: the apiserver's 500 for a handler panic
/// (its `WithPanicRecovery` message), as a Status like kubeplex's other errors.
pub fn panic_response() -> Response<Body> {
    body::status(&Status::internal(
        "this request caused kubeplex to panic; look in the logs for details",
    ))
}

// ---- 3. classification ----

#[derive(Clone, Copy)]
struct ClassifyLayer;

impl<S> Layer<S> for ClassifyLayer {
    type Service = Classify<S>;
    fn layer(&self, inner: S) -> Classify<S> {
        Classify { inner }
    }
}

#[derive(Clone)]
struct Classify<S> {
    inner: S,
}

impl<S: Service<Classified, Response = Response<Body>>> Service<Request<ReqBody>> for Classify<S> {
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<futures_util::future::Ready<Result<Response<Body>, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // A request target Go's net/http refuses (a malformed `%` escape in the path) is
        // answered as net/http answers it, before the apiserver (or kubeplex's metrics,
        // authentication and routing) sees it; never sent upstream.
        let Some(class) = Class::decoded(&req) else {
            return Either::Left(futures_util::future::ready(Ok(go_bad_request())));
        };
        Either::Right(self.inner.call(Classified { req, class, identity: Identity::Shared }))
    }
}

/// net/http's answer to a target `url.ParseRequestURI` refuses: `400 Bad Request`, plain
/// text, `Connection: close` (both HTTP/1.1 servers here close after it). Over HTTP/2 Go
/// resets the stream instead (PROTOCOL_ERROR); kubeplex answers the same 400 there.
pub fn go_bad_request() -> Response<Body> {
    use crate::wire::request::go_url::bad_request as go;
    Response::builder()
        .status(go::STATUS)
        .header(http::header::CONTENT_TYPE, go::CONTENT_TYPE)
        .header(http::header::CONNECTION, go::CONNECTION)
        .body(body::full(go::BODY))
        .unwrap_or_else(|_| Response::new(body::full(bytes::Bytes::new())))
}

// ---- 4. metrics ----

#[derive(Clone)]
struct MetricsLayer {
    state: Arc<ProxyState>,
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Metered<S>;
    fn layer(&self, inner: S) -> Metered<S> {
        Metered { inner, state: self.state.clone() }
    }
}

#[derive(Clone)]
struct Metered<S> {
    inner: S,
    state: Arc<ProxyState>,
}

impl<S> Service<Classified> for Metered<S>
where
    S: Service<Classified, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Classified) -> Self::Future {
        let started = Instant::now();
        let class = req.class.clone();
        let state = self.state.clone();
        // The access log's fields, taken only when it is on (`accessLog`): reference counts.
        let access = access_log_enabled().then(|| AccessFields::of(&req.req));
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            let source = resp.extensions().get::<Source>().copied().unwrap_or(Source::Upstream);
            // Labelled after routing: discovery for this resource is known by now if it exists.
            let resource = super::metrics::resource_label(&state.resources, &class);
            let elapsed = started.elapsed().as_secs_f64();
            let status = resp.status().as_u16();
            state.metrics.observe(&resource, class.verb.as_str(), status, source, elapsed);
            if let Some(a) = access {
                let user = resp.extensions().get::<AccessUser>().map(|u| u.0.as_str());
                tracing::info!(
                    target: ACCESS_LOG_TARGET,
                    method = %a.method,
                    uri = %a.uri,
                    verb = class.verb.as_str(),
                    resource,
                    status,
                    source = source.as_str(),
                    user = user.unwrap_or(""),
                    user_agent = a.user_agent.as_ref().and_then(|v| v.to_str().ok()).unwrap_or(""),
                    seconds = elapsed,
                );
            }
            Ok(resp)
        })
    }
}

/// The access log's target: one line per request (its answer's head: a watch is logged when
/// it starts, with the time to its first byte), on when `accessLog` lets this target through
/// the log filter. Like the apiserver's httplog: verb, URI, status, latency, user, user agent.
pub const ACCESS_LOG_TARGET: &str = "kubeplex::access";

fn access_log_enabled() -> bool {
    tracing::enabled!(target: ACCESS_LOG_TARGET, tracing::Level::INFO)
}

/// What the access log reads from a request before it is handled.
struct AccessFields {
    method: Method,
    uri: http::Uri,
    user_agent: Option<http::HeaderValue>,
}

impl AccessFields {
    fn of<B>(req: &Request<B>) -> AccessFields {
        AccessFields {
            method: req.method().clone(),
            uri: req.uri().clone(),
            user_agent: req.headers().get(http::header::USER_AGENT).cloned(),
        }
    }
}

/// The user a node-mode request was answered for, for the access log (in the response's
/// extensions, set by authentication).
#[derive(Clone)]
struct AccessUser(String);

// ---- 5. authentication ----

#[derive(Clone)]
struct AuthenticateLayer {
    node: Option<Arc<NodeAuth>>,
}

impl<S> Layer<S> for AuthenticateLayer {
    type Service = Authenticate<S>;
    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate { inner, node: self.node.clone() }
    }
}

#[derive(Clone)]
struct Authenticate<S> {
    inner: S,
    node: Option<Arc<NodeAuth>>,
}

impl<S> Service<Classified> for Authenticate<S>
where
    S: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    /// The sidecar mode adds nothing to the request's future.
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Classified) -> Self::Future {
        let Some(node) = self.node.clone() else { return Either::Left(self.inner.call(req)) };
        // The ready service is taken for this request; a clone waits for the next one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Either::Right(Box::pin(async move {
            match node.authenticate(req.req.extensions(), req.req.headers()).await {
                Ok(identity) => {
                    let user = access_log_enabled().then(|| AccessUser(identity.user_name()));
                    req.identity = identity;
                    let mut resp = inner.call(req).await?;
                    if let Some(user) = user {
                        resp.extensions_mut().insert(user);
                    }
                    Ok(resp)
                }
                Err(refusal) => {
                    let mut resp = body::refused(&refusal);
                    resp.extensions_mut().insert(Source::Denied);
                    Ok(resp)
                }
            }
        }))
    }
}

// ---- 6. routing ----

/// The cache's answer or the passthrough stack's (`route`).
#[derive(Clone)]
struct Route<P> {
    state: Arc<ProxyState>,
    passthrough: P,
}

impl<P> Service<Classified> for Route<P>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    P::Future: Send,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Classified) -> Self::Future {
        let (state, passthrough) = (self.state.clone(), self.passthrough.clone());
        Box::pin(async move { Ok(super::route::route(&state, req, passthrough).await) })
    }
}

#[cfg(test)]
mod tests;
