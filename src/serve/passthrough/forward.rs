//! Passing a request through to the upstream unchanged: method, path, query, headers and body
//! go up, status, headers and body come back, both bodies streamed (never buffered whole), so
//! writes, watches and long-running requests behave exactly as against the apiserver.
//! Upgrades (exec, attach, port-forward) are tunnelled once the upstream answers 101.
//!
//! Identity ([`As`]): a client that presents its own credentials is sent upstream as itself
//! ([`Upstream::send_as_is`]), so the apiserver's authentication and RBAC apply to it; in the
//! sidecar mode a client without credentials (a sidecar's app, like `kubectl proxy`'s clients)
//! is sent with kubeplex's own; in the node mode an anonymous client is sent without any, and a
//! client authenticated by its certificate with kubeplex's credentials impersonating it.

use http::header::{self, HeaderMap, HeaderName};

use crate::serve::request::has_credentials;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

use crate::auth::impersonate::impersonation_headers;
use crate::auth::UserInfo;
use crate::serve::body::{self, Body};
use crate::upstream::{Upstream, UpstreamBody};
use crate::wire::status::Status;

/// Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, not the message, and a
/// proxy must not forward them — except `Connection: Upgrade` + `Upgrade` on an upgrade, which
/// the upstream must see to switch protocols.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The answer when the upstream cannot be reached: what an unreachable apiserver behind a proxy
/// gives (the aggregator's `error trying to reach service`), 503 — except to a watch. Directly,
/// a watch's client would have been refused its connection, and client-go's reflector resumes
/// a watch refused its connection, or answered 429, from where it was, backing off
/// (`isWatchErrorRetriable`: `utilnet.IsConnectionRefused(err) ||
/// apierrors.IsTooManyRequests(err)`), but relists after any other error, a 503 too. So a watch
/// gets 429 with `Retry-After: 1`: its client waits and resumes as it would have directly, and
/// the upstream is not sent every client's relist when it is back (864 node watches were
/// answered 503 in a minute's outage of the pool's upstream at N = 500).
pub fn unreachable(e: &dyn std::fmt::Display, watch: bool) -> Status {
    let message = format!("error trying to reach the upstream apiserver: {e}");
    for_watch(Status::service_unavailable(message), watch)
}

/// A 503 kubeplex answers because the upstream could not be reached, as a watch gets it
/// ([`unreachable`]): 429 `Retry-After: 1` with the same message; anything else as it is.
pub fn for_watch(status: Status, watch: bool) -> Status {
    match watch && status.code == 503 {
        true => Status::too_many_requests_because(&status.message, 1),
        false => status,
    }
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")))
}

fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // Headers named in Connection are hop-by-hop too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .filter(|n| !(keep_upgrade && n == header::UPGRADE))
        .collect();
    let upgrade = keep_upgrade.then(|| headers.get(header::UPGRADE).cloned()).flatten();
    for h in HOP_BY_HOP.iter().chain(named.iter()) {
        headers.remove(h);
    }
    headers.remove("keep-alive");
    if let Some(u) = upgrade {
        headers.insert(header::CONNECTION, header::HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, u);
    }
}

/// Whose identity a passed-through request carries upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum As {
    /// kubeplex's own credentials.
    Kubeplex,
    /// The client's request as it is: its own token and impersonation headers, or none
    /// (anonymous).
    Client,
    /// kubeplex's credentials, impersonating this user (a client certificate's identity).
    Impersonating(UserInfo),
}

/// Forwards `req` (a watch when `watch`) to the upstream and streams the answer back: the
/// sidecar mode's rule, with the client's own credentials when it has some, kubeplex's otherwise.
pub async fn forward(
    upstream: &Upstream,
    req: Request<UpstreamBody>,
    watch: bool,
) -> Response<Body> {
    let how = if has_credentials(req.headers()) { As::Client } else { As::Kubeplex };
    forward_as(upstream, req, how, watch).await
}

/// Forwards `req` (a watch when `watch`) to the upstream as `how` says and streams the answer
/// back. A failure to reach the upstream becomes [`unreachable`]'s Status.
pub async fn forward_as(
    upstream: &Upstream,
    mut req: Request<UpstreamBody>,
    how: As,
    watch: bool,
) -> Response<Body> {
    let upgrade = is_upgrade(req.headers());
    // Taken before the request is consumed; resolves once our 101 has been written.
    let downstream_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, incoming) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade);
    let as_client = match how {
        As::Client => true,
        As::Kubeplex => false,
        As::Impersonating(user) => {
            // Only kubeplex's credentials and the identity it vouches for go upstream: the
            // client's own headers of that kind are replaced, never added to.
            parts.headers.remove(header::AUTHORIZATION);
            let theirs: Vec<_> = parts
                .headers
                .keys()
                .filter(|k| k.as_str().starts_with("impersonate-"))
                .cloned()
                .collect();
            for k in theirs {
                parts.headers.remove(k);
            }
            for (name, value) in impersonation_headers(&user) {
                if let Ok(name) = header::HeaderName::from_bytes(name.as_bytes()) {
                    parts.headers.append(name, value);
                }
            }
            false
        }
    };
    // The upstream client decides the protocol (HTTP/2 where offered, HTTP/1.1 for upgrades).
    parts.version = http::Version::HTTP_11;
    let origin_form = parts.uri.path_and_query().map_or("/", |pq| pq.as_str()).to_string();
    let Ok(uri) = origin_form.parse() else {
        return body::status(&Status::bad_request("malformed request URI"));
    };
    parts.uri = uri;
    let up_req = Request::from_parts(parts, incoming);
    let sent =
        if as_client { upstream.send_as_is(up_req).await } else { upstream.send(up_req).await };
    let mut resp = match sent {
        Ok(resp) => resp,
        Err(e) => {
            tracing::warn!(error = %e, watch, "upstream unreachable");
            return body::status(&unreachable(&e, watch));
        }
    };
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        if let Some(down) = downstream_upgrade {
            let up = hyper::upgrade::on(&mut resp);
            tokio::spawn(async move {
                // Both ends switch once the 101s are through; then bytes flow both ways until
                // either side closes.
                match tokio::try_join!(down, up) {
                    Ok((d, u)) => {
                        let (mut d, mut u) = (TokioIo::new(d), TokioIo::new(u));
                        let _ = tokio::io::copy_bidirectional(&mut d, &mut u).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "upgrade failed"),
                }
            });
        }
        let (mut parts, _) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers, true);
        return Response::from_parts(parts, body::full(bytes::Bytes::new()));
    }
    let (mut parts, incoming) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers, false);
    Response::from_parts(parts, incoming.map_err(Into::into).boxed())
}
