//! Routing: the cache when it can answer a read exactly (and, in node mode, the client may read
//! it from the cache: [`cache_read`]), the passthrough stack otherwise; in node mode, a node's
//! read the Node authorizer refuses for want of a pod just bound is sent again
//! ([`graph_retry`]).

use std::convert::Infallible;
use std::sync::Arc;

use http::Response;
use tower::Service;

use super::body::Body;
use super::cache_read::{self, Attempt};
use super::graph_retry::{self, Replay};
use super::request::Classified;
use super::state::ProxyState;

/// The cache's answer when it has one, else `passthrough`'s. In node mode, a node's read the
/// Node authorizer refuses for want of a pod just bound in its graph is sent again until it
/// caught up ([`graph_retry::until_granted`]).
pub async fn route<P>(state: &Arc<ProxyState>, req: Classified, passthrough: P) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone,
{
    let Some(read) = graph_retry::graph_read(state, &req) else {
        return answer(state, req, passthrough, &Attempt::default()).await;
    };
    let replay = Replay::of(&req);
    let first = answer(state, req, passthrough.clone(), &Attempt::default()).await;
    graph_retry::until_granted(state, first, read, replay, passthrough).await
}

/// The cache's answer to `req`, else the passthrough's.
async fn answer<P>(
    state: &Arc<ProxyState>,
    req: Classified,
    passthrough: P,
    attempt: &Attempt,
) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible>,
{
    match cache_read::answer(state, &req, attempt).await {
        Some(answer) => answer,
        None => cache_read::pass(passthrough, req, attempt).await,
    }
}
