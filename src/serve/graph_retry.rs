//! Node mode: a node's read sent again after the Node authorizer refused it for a pod just
//! bound (`auth::graph_lag`: when, and for how long) — which reads qualify, a copy of the
//! request to send again, telling the graph's refusal from others, and the retries themselves
//! ([`until_granted`]).

use futures_util::StreamExt;
use http::{Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower::Service;

use super::body::{self, Body};
use super::cache_read::{self, Attempt};
use super::request::{Class, Classified, Verb};
use super::state::ProxyState;
use crate::auth::graph_lag::{is_graph_refusal, window_until, Backoff, GraphRead};
use crate::auth::Identity;
use crate::wire::request::ApiPath;

/// Node mode: the read `req` is, if the Node authorizer may refuse it for a moment after a
/// binding (`auth::graph_lag`) and it can be sent again (a GET without a body) — and sending
/// it again is faster for the client than the refusal (not a WatchList: [`is_watch_list`]).
pub fn graph_read(state: &ProxyState, classified: &Classified) -> Option<GraphRead> {
    let node = state.node.as_deref()?;
    let Classified { req, class, identity } = classified;
    let ApiPath::Resource(rp) = &class.path else { return None };
    // Only a GET of a namespaced core resource can be: the rest is not looked at further.
    if req.method() != http::Method::GET
        || !rp.group.is_empty()
        || rp.namespace.is_none()
        || !req.body().is_end_stream()
        || is_watch_list(class)
    {
        return None;
    }
    let attributes = class.read_attributes()?.clone();
    node.graph_read(identity.user().as_ref(), req.headers(), attributes)
}

/// A WatchList (`watch=true&sendInitialEvents=true`): refused, it goes to the client at once,
/// as directly. client-go's reflector answers a failed WatchList by listing at once at
/// `resourceVersion=0` (`tools/cache/reflector.go`, `ListAndWatchWithContext`: "Falling back
/// to regular list"), which the apiserver answers from its watch cache, and then watches from
/// that list's RV; the list is a read retried here if the graph still refuses it. Sending the
/// WatchList again instead kept the kubelet on the consistent read it asked for first, which
/// the apiserver answers only once its watch cache has caught up with etcd: measured with real
/// 1.36 kubelets on 10 nodes, their named ConfigMap and Secret watches took 0.35 s through node
/// tiers against 0.12 s directly, where ~2/3 of them met the refusal and fell back. The
/// requests the apiserver serves are then the kubelet's own, as directly.
fn is_watch_list(class: &Class) -> bool {
    class.verb == Verb::Watch
        && class.options.as_ref().is_some_and(|o| o.send_initial_events == Some(true))
}

/// What is needed to send a body-less request again: its head and what the layers above
/// found out about it.
pub struct Replay {
    head: http::request::Parts,
    class: Class,
    identity: Identity,
}

impl Replay {
    pub fn of(classified: &Classified) -> Self {
        let req = &classified.req;
        let mut head = Request::new(()).into_parts().0;
        head.method = req.method().clone();
        head.uri = req.uri().clone();
        head.version = req.version();
        head.headers = req.headers().clone();
        head.extensions = req.extensions().clone();
        Replay { head, class: classified.class.clone(), identity: classified.identity.clone() }
    }

    pub fn request(&self) -> Classified {
        let mut req = Request::new(body::full(bytes::Bytes::new()));
        *req.method_mut() = self.head.method.clone();
        *req.uri_mut() = self.head.uri.clone();
        *req.version_mut() = self.head.version;
        *req.headers_mut() = self.head.headers.clone();
        *req.extensions_mut() = self.head.extensions.clone();
        Classified { req, class: self.class.clone(), identity: self.identity.clone() }
    }
}

/// The largest refusal body read to see whether it is the graph's; a longer one (never the
/// apiserver's: its Status is a few hundred bytes) is passed on as it came.
const MAX_REFUSAL: usize = 64 * 1024;

/// `resp`, and whether it is the Node authorizer's refusal for want of a binding in its graph
/// (a 403 with that reason: `auth::graph_lag::is_graph_refusal`). A 403's body is read to tell
/// (up to [`MAX_REFUSAL`]), and the response rebuilt with the same bytes — and, past that
/// length or after a failed read, with the rest of the body as it comes.
pub async fn graph_refusal(resp: Response<Body>) -> (Response<Body>, bool) {
    if resp.status() != http::StatusCode::FORBIDDEN {
        return (resp, false);
    }
    let (parts, mut rest) = resp.into_parts();
    let mut frames = Vec::new();
    let mut bytes = Vec::new();
    let ended = loop {
        if bytes.len() > MAX_REFUSAL {
            break false;
        }
        match rest.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
                frames.push(Ok(frame));
            }
            Some(Err(e)) => {
                frames.push(Err(e));
                break true;
            }
            None => break true,
        }
    };
    let refused = ended && frames.iter().all(Result::is_ok) && is_graph_refusal(&bytes);
    let read = futures_util::stream::iter(frames);
    let body = if ended {
        BodyExt::boxed(http_body_util::StreamBody::new(read))
    } else {
        let rest = http_body_util::BodyStream::new(rest);
        BodyExt::boxed(http_body_util::StreamBody::new(read.chain(rest)))
    };
    (Response::from_parts(parts, body), refused)
}

/// `first`, the answer to a node's read: refused by the Node authorizer for want of a binding in
/// its graph, while a
/// cache of pods shows a binding it may depend on received less than `nodeGraphLag` ago, is
/// sent again after short, growing back-offs until granted or that window ends, and the
/// upstream's last answer is the client's (`auth::graph_lag`). It is not delayed before a
/// refusal: the first send is at once. A retry asks the review afresh (a remembered denial
/// would outlive the apiserver's), so that a read the cache can answer is answered from it
/// once granted; a retry that review refuses sends nothing more upstream — except the
/// window's last, which goes on as any read does, so that the client's answer is the
/// upstream's at that moment.
pub async fn until_granted<P>(
    state: &Arc<ProxyState>,
    first: Response<Body>,
    read: GraphRead,
    replay: Replay,
    passthrough: P,
) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone,
{
    let (mut last, refused) = graph_refusal(first).await;
    let refused_at = Instant::now();
    let lag = state.node.as_deref().map_or(Duration::ZERO, |n| n.graph_lag);
    let window = refused.then(|| window_until(&state.caches, lag, &read, refused_at)).flatten();
    let Some(until) = window else { return last };
    let metrics = &state.metrics.reviews;
    let mut backoff = Backoff::new(until);
    let result = loop {
        let Some(retry) = backoff.next(Instant::now()) else { break "refused" };
        tokio::time::sleep_until(retry.at.into()).await;
        metrics.graph_retry_requests.inc();
        let attempt = Attempt::retry();
        let req = replay.request();
        if let Some(answer) = cache_read::answer(state, &req, &attempt).await {
            last = answer;
            break "granted";
        }
        if attempt.denied() && !retry.last {
            // Refused again by the upstream's review: the refusal the read would get.
            continue;
        }
        let sent = cache_read::pass(passthrough.clone(), req, &attempt).await;
        let refused;
        (last, refused) = graph_refusal(sent).await;
        if !refused {
            break if last.status().is_success() { "granted" } else { "other" };
        }
    };
    metrics.graph_retries.with_label_values(&[result]).observe(refused_at.elapsed().as_secs_f64());
    last
}

#[cfg(test)]
mod tests;
