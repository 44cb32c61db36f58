//! Node mode: a node's read the Node authorizer refuses for a moment after a pod is bound to
//! the node (its graph has not caught up) is sent again until it is granted, within a window
//! after the binding (`auth::graph_lag`). The read is never delayed before a refusal.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http::{Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt;
use tower::{Service, ServiceExt};

use super::body::{self, Body};
use super::metrics::Source;
use super::read::Review;
use super::request::{Class, Classified, Verb};
use super::route::{answer, from_cache};
use super::state::ProxyState;
use crate::auth::authorize::read_attributes;
use crate::auth::graph_lag::{is_graph_refusal, window_until, Backoff, GraphRead};
use crate::auth::Identity;
use crate::wire::request::ApiPath;

/// Node mode: the read `req` is, if the Node authorizer may refuse it for a moment after a
/// binding (`auth::graph_lag`) and it can be sent again (a GET without a body).
pub fn graph_read(state: &ProxyState, classified: &Classified) -> Option<GraphRead> {
    let node = state.node.as_deref()?;
    let Classified { req, class, identity } = classified;
    let ApiPath::Resource(rp) = &class.path else { return None };
    // Only a GET of a namespaced core resource can be: the rest is not looked at further.
    if req.method() != http::Method::GET
        || !rp.group.is_empty()
        || rp.namespace.is_none()
        || !req.body().is_end_stream()
    {
        return None;
    }
    let attributes = read_attributes(rp, class.options.as_ref(), class.verb == Verb::Watch);
    node.graph_read(identity.user().as_ref(), req.headers(), attributes)
}

/// A node's read refused by the Node authorizer for want of a binding in its graph, while a
/// cache of pods shows a binding it may depend on received less than `nodeGraphLag` ago, is
/// sent again after short, growing back-offs until granted or that window ends, and the
/// upstream's last answer is the client's (`auth::graph_lag`). It is not delayed before a
/// refusal: the first send is at once. A retry asks the review afresh (a remembered denial
/// would outlive the apiserver's), so that a read the cache can answer is answered from it
/// once granted; a retry that review refuses sends nothing more upstream — except the
/// window's last, which goes on as any read does, so that the client's answer is the
/// upstream's at that moment.
pub async fn retry_graph_refusals<P>(
    state: &Arc<ProxyState>,
    req: Classified,
    read: GraphRead,
    passthrough: P,
) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone,
{
    let replay = Replay::of(&req);
    let first = answer(state, req, passthrough.clone(), &Review::default()).await;
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
        let review = Review::retry();
        let req = replay.request();
        if let Some(mut answer) = from_cache(state, &req, &review).await {
            answer.extensions_mut().insert(Source::Cache);
            last = answer;
            break "granted";
        }
        if review.denied() && !retry.last {
            // Refused again by the upstream's review: the refusal the read would get.
            continue;
        }
        let sent = match passthrough.clone().oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        let refused;
        (last, refused) = graph_refusal(sent).await;
        if !refused {
            break if last.status().is_success() { "granted" } else { "other" };
        }
    };
    metrics.graph_retries.with_label_values(&[result]).observe(refused_at.elapsed().as_secs_f64());
    last
}

/// What is needed to send a body-less request again: its head and what the layers above
/// found out about it.
struct Replay {
    head: http::request::Parts,
    class: Class,
    identity: Identity,
}

impl Replay {
    fn of(classified: &Classified) -> Self {
        let req = &classified.req;
        let mut head = Request::new(()).into_parts().0;
        head.method = req.method().clone();
        head.uri = req.uri().clone();
        head.version = req.version();
        head.headers = req.headers().clone();
        head.extensions = req.extensions().clone();
        Replay { head, class: classified.class.clone(), identity: classified.identity.clone() }
    }

    fn request(&self) -> Classified {
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
async fn graph_refusal(resp: Response<Body>) -> (Response<Body>, bool) {
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn bytes_of(resp: Response<Body>) -> Vec<u8> {
        resp.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default()
    }

    fn in_chunks(status: u16, bytes: &[u8], chunk: usize) -> Response<Body> {
        let frames: Vec<Result<http_body::Frame<bytes::Bytes>, body::BoxError>> = bytes
            .chunks(chunk)
            .map(|c| Ok(http_body::Frame::data(bytes::Bytes::copy_from_slice(c))))
            .collect();
        let body =
            BodyExt::boxed(http_body_util::StreamBody::new(futures_util::stream::iter(frames)));
        let mut resp = Response::new(body);
        *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
        resp
    }

    #[tokio::test]
    async fn a_refusal_is_read_to_tell_whose_it_is_and_passed_on_with_its_bytes() {
        let graph = br#"{"kind":"Status","message":"pods \"p\" is forbidden: User \"system:node:n1\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\": no relationship found between node 'n1' and this object","code":403}"#;
        let (resp, refused) = graph_refusal(in_chunks(403, graph, 7)).await;
        assert!(refused);
        assert_eq!(resp.status(), 403);
        assert_eq!(bytes_of(resp).await, graph);
        // The same reason in an answer that is no refusal is not one.
        let (resp, refused) = graph_refusal(in_chunks(200, graph, 7)).await;
        assert!(!refused);
        assert_eq!(bytes_of(resp).await, graph);
        // A 403 longer than the apiserver's Status ever is: not read to its end, passed on whole.
        let mut long = vec![b'x'; MAX_REFUSAL * 2];
        long.extend_from_slice(graph);
        let (resp, refused) = graph_refusal(in_chunks(403, &long, 4096)).await;
        assert!(!refused);
        assert_eq!(bytes_of(resp).await, long);
    }
}
