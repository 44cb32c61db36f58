//! Passing a request through to the upstream unchanged: method, path, query, headers and body
//! go up, status, headers and body come back, both bodies streamed (never buffered whole), so
//! writes, watches and long-running requests behave exactly as against the apiserver.

use http::header::{self, HeaderMap, HeaderName};
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::body::{self, Body};
use crate::upstream::{Upstream, UpstreamBody};
use crate::wire::status::Status;

/// Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, not the message, and a
/// proxy must not forward them.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers named in Connection are hop-by-hop too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for h in HOP_BY_HOP.iter().chain(named.iter()) {
        headers.remove(h);
    }
    headers.remove("keep-alive");
    // The upstream client sets Host for the upstream's authority.
    headers.remove(header::HOST);
}

/// Forwards `req` to the upstream and streams the answer back. A failure to reach the upstream
/// becomes the Status an unreachable apiserver behind a proxy gives: 503.
pub async fn forward(upstream: &Upstream, req: Request<Incoming>) -> Response<Body> {
    let (mut parts, incoming) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let origin_form = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    let Ok(uri) = origin_form.parse() else {
        return body::status(&Status::bad_request("malformed request URI"));
    };
    parts.uri = uri;
    let up_body: UpstreamBody = incoming.map_err(Into::into).boxed();
    let up_req = Request::from_parts(parts, up_body);
    match upstream.send(up_req).await {
        Ok(resp) => {
            let (mut parts, incoming) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, incoming.map_err(Into::into).boxed())
        }
        Err(e) => {
            tracing::warn!(error = %e, "upstream unreachable");
            body::status(&Status::service_unavailable(format!(
                "error trying to reach the upstream apiserver: {e}"
            )))
        }
    }
}
