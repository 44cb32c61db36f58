//! Passing a request through to the upstream: what the cache does not answer goes to the
//! apiserver unchanged, as the client sent it or as kubeplex vouches for it. One stack, built in
//! one function ([`stack`]), one layer per line, outermost first; [`forward`] streams the
//! request up and the answer back.

mod forward;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http::{Request, Response};
use tower::{Service, ServiceBuilder, ServiceExt};

pub use self::forward::{forward, forward_as, As};
use super::around::around;
use super::body::{self, Body};
use super::metrics::Source;
use super::request::{Class, Classified, Verb};
use super::state::ProxyState;
use crate::auth::{Identity, Refusal};
use crate::net::h1::ReqBody;

/// The passthrough stack, outermost first. Each layer answers what it refuses itself, with the
/// apiserver's own Status, marked [`Source::Denied`].
pub fn stack(
    state: Arc<ProxyState>,
) -> impl Service<
    Classified,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    let (forget, impersonate, admit, limit) =
        (state.clone(), state.clone(), state.clone(), state.clone());
    ServiceBuilder::new()
        // 1. Node mode: a client's read that kubeplex did not answer from the cache, and which
        //    the upstream then answers with success, shows a denial remembered for it out of
        //    date (the Node authorizer's graph caught up, a RoleBinding was added): forgotten,
        //    so that the next such read is reviewed again.
        .layer(around(move |req: Classified, next| forget_denial(forget.clone(), req, next)))
        // 2. Whose identity goes upstream (`As`): the client's own credentials, kubeplex's, or
        //    kubeplex's impersonating a certificate's user — once the upstream agrees the user
        //    may impersonate whom its own `Impersonate-*` headers ask for.
        .layer(around(move |req: Classified, next| identify(impersonate.clone(), req, next)))
        // 3. Admission: in-flight limits, after authentication and authorization, as the
        //    apiserver's maxinflight filter; its slot is held until the answer is sent.
        .layer(around(move |req: Outbound, next| self::admit(admit.clone(), req, next)))
        // 4. The request body's limit, as the apiserver reads bodies.
        .layer(around(move |req: Outbound, next| limit_body(limit.clone(), req, next)))
        // 5. Up and back, streamed.
        .service(Forward { state })
}

/// A request on its way upstream, with whose identity it carries (`None`: the sidecar mode's
/// rule, `forward` decides).
pub struct Outbound {
    req: Request<ReqBody>,
    class: Class,
    how: Option<As>,
}

/// The answer of `next` to `req`.
async fn call<R, S>(next: S, req: R) -> Response<Body>
where
    S: Service<R, Response = Response<Body>, Error = Infallible>,
{
    match next.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

/// A refusal's answer, marked as such for the metrics.
fn denied(mut resp: Response<Body>) -> Response<Body> {
    resp.extensions_mut().insert(Source::Denied);
    resp
}

async fn forget_denial<S>(state: Arc<ProxyState>, req: Classified, next: S) -> Response<Body>
where
    S: Service<Classified, Response = Response<Body>, Error = Infallible>,
{
    let reader = matches!(req.class.verb, Verb::Get | Verb::List | Verb::Watch)
        .then(|| req.identity.user())
        .flatten()
        .filter(|_| state.node.is_some());
    let read = reader.zip(req.class.read_attributes().cloned());
    let resp = call(next, req).await;
    if let (Some(node), Some((user, attributes))) = (&state.node, read) {
        if resp.status().is_success() {
            node.upstream_allowed(&user, &attributes).await;
        }
    }
    resp
}

async fn identify<S>(state: Arc<ProxyState>, req: Classified, next: S) -> Response<Body>
where
    S: Service<Outbound, Response = Response<Body>, Error = Infallible>,
{
    let Classified { req, identity, class } = req;
    let how = match identity {
        // The sidecar mode: kubeplex's identity, or the client's own credentials if it has
        // some (`forward` decides).
        Identity::Shared => None,
        // Its own token (and impersonation headers) go as they are; anonymous goes without
        // credentials, so the upstream sees system:anonymous too.
        Identity::Token(_) | Identity::Unreviewed | Identity::Anonymous => Some(As::Client),
        // Only kubeplex can prove a client certificate's identity to the upstream: by
        // impersonating it, or whom it asks to impersonate once it may.
        Identity::Certificate(user) => {
            let Some(node) = &state.node else {
                return denied(body::refused(&Refusal::Unauthorized));
            };
            match node.impersonation(&user, req.headers(), None).await {
                Ok(Some(target)) => Some(As::Impersonating(target)),
                Ok(None) => Some(As::Impersonating(node.vouched(user))),
                // A review that could not reach the upstream: answered to a watch as the
                // passthrough's own unreachable upstream is (`forward::for_watch`).
                Err(Refusal::Status(s)) => {
                    let s = forward::for_watch(s, class.verb == Verb::Watch);
                    return denied(body::status(&s));
                }
                Err(refusal) => return denied(body::refused(&refusal)),
            }
        }
    };
    call(next, Outbound { req, class, how }).await
}

async fn admit<S>(state: Arc<ProxyState>, out: Outbound, next: S) -> Response<Body>
where
    S: Service<Outbound, Response = Response<Body>, Error = Infallible>,
{
    let slot = match state.guard.admit(out.req.method(), &out.class, out.req.headers()).await {
        Ok(slot) => slot,
        Err(refused) => return denied(*refused),
    };
    let resp = call(next, out).await;
    match slot {
        Some(slot) => slot.hold_until_sent(resp),
        None => resp,
    }
}

async fn limit_body<S>(state: Arc<ProxyState>, out: Outbound, next: S) -> Response<Body>
where
    S: Service<Outbound, Response = Response<Body>, Error = Infallible>,
{
    let Outbound { req, class, how } = out;
    match state.guard.bounded_body(req).await {
        Ok(req) => call(next, Outbound { req, class, how }).await,
        Err(refused) => denied(*refused),
    }
}

/// The innermost service: [`forward`] or [`forward_as`], answered by the upstream.
#[derive(Clone)]
struct Forward {
    state: Arc<ProxyState>,
}

impl Service<Outbound> for Forward {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, out: Outbound) -> Self::Future {
        let state = self.state.clone();
        Box::pin(async move {
            let watch = out.class.verb == Verb::Watch;
            let mut resp = match out.how {
                None => forward(&state.upstream, out.req, watch).await,
                Some(how) => forward_as(&state.upstream, out.req, how, watch).await,
            };
            resp.extensions_mut().insert(Source::Upstream);
            Ok(resp)
        })
    }
}
