//! Response building for the fake apiserver: the apiserver's common headers, gzip for large
//! bodies, streamed watch bodies and `Status` errors.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;

use crate::wire::gzip;
use crate::wire::status::Status;

pub type Body = BoxBody<Bytes, Infallible>;

/// Content types as the apiserver writes them.
pub const JSON: &str = "application/json";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

// Priority-and-fairness identifiers: every apiserver response carries them; fixed per sim.
const FLOWSCHEMA_UID: &str = "7c5d3a1e-2b64-4c0f-9d8e-5f1a2b3c4d5e";
const PRIORITY_LEVEL_UID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn base(status: u16, content_type: &str) -> http::response::Builder {
    with_flow_schema(base_unclassified(status, content_type))
}

/// The headers every response has, before priority-and-fairness has classified the request.
fn base_unclassified(status: u16, content_type: &str) -> http::response::Builder {
    let mut b = Response::builder();
    // Go's status line where it differs from hyper's (413 "Request Entity Too Large").
    if let Some(reason) = crate::wire::status::go_reason_phrase(status) {
        b = b.extension(hyper::ext::ReasonPhrase::from_static(reason.as_bytes()));
    }
    b.status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("Audit-Id", uuid::Uuid::new_v4().to_string())
        .header(header::CACHE_CONTROL, "no-cache, private")
        .header(header::CONTENT_TYPE, content_type)
}

fn with_flow_schema(b: http::response::Builder) -> http::response::Builder {
    b.header("X-Kubernetes-Pf-Flowschema-Uid", FLOWSCHEMA_UID)
        .header("X-Kubernetes-Pf-Prioritylevel-Uid", PRIORITY_LEVEL_UID)
}

/// A complete (non-streamed) response; compressed like the apiserver when the client allows
/// gzip and the body is large enough.
pub fn body(
    status: u16,
    content_type: &str,
    mut bytes: Vec<u8>,
    req: &HeaderMap,
) -> Response<Body> {
    // Go's JSON encoder ends every document with a newline; clients see it in the bytes.
    if content_type == JSON && bytes.last() != Some(&b'\n') {
        bytes.push(b'\n');
    }
    let mut builder = base(status, content_type);
    let bytes = if gzip::should_compress(gzip::accepts_gzip(req), bytes.len()) {
        builder = builder
            .header(header::CONTENT_ENCODING, "gzip")
            .header(header::VARY, "Accept-Encoding");
        gzip::gzip(&bytes)
    } else {
        bytes
    };
    builder.body(full(bytes)).unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

fn status_bytes(status: &Status, protobuf: bool) -> (&'static str, Vec<u8>) {
    if protobuf {
        (PROTOBUF, super::encode::protobuf::status(status))
    } else {
        let mut b = status.to_json();
        b.push(b'\n');
        (JSON, b)
    }
}

/// 401 as the authentication filter writes it (fixture `err-unauthorized`): the request is
/// refused before priority-and-fairness classifies it, so without its headers.
pub fn unauthorized(status: &Status, protobuf: bool) -> Response<Body> {
    let (content_type, bytes) = status_bytes(status, protobuf);
    base_unclassified(status.code, content_type)
        .body(full(bytes))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// 403 as `responsewriters.Forbidden` writes it (fixtures `err-forbidden-*`): after
/// priority-and-fairness, and with `X-Content-Type-Options: nosniff`.
pub fn forbidden(status: &Status, protobuf: bool) -> Response<Body> {
    let (content_type, bytes) = status_bytes(status, protobuf);
    with_flow_schema(
        base_unclassified(status.code, content_type).header("X-Content-Type-Options", "nosniff"),
    )
    .body(full(bytes))
    .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// A request shed by priority-and-fairness (or the max-in-flight filter): k8s.io/apiserver
/// `filters.tooManyRequests` sets `Retry-After` and answers with Go's `http.Error` — plain
/// text, not a Status. The outer filters' headers (audit id, cache control) and the flow
/// schema it was classified into are already set.
pub fn too_many_requests(retry_after_seconds: u32) -> Response<Body> {
    base(429, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .header(header::RETRY_AFTER, retry_after_seconds.to_string())
        .body(full("Too many requests, please try again later.\n"))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// `http.NotFound`, the apiserver's answer to a path no handler serves — a group-version it
/// does not serve, such as a custom resource's once its CRD is deleted or its version no
/// longer served (tests/fixtures/realcluster/custom/lifecycle.deleted.get.json): plain text,
/// where a served group-version's unknown resource gets a `Status`.
pub fn page_not_found() -> Response<Body> {
    base(404, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .body(full("404 page not found\n"))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// net/http's own answer to a request target `url.ParseRequestURI` refuses (a malformed `%`
/// escape in the path): written by Go's server before any apiserver code runs, so none of
/// the apiserver's headers, and the connection is closed after it (`wire::request::go_url`).
pub fn go_bad_request() -> Response<Body> {
    use crate::wire::request::go_url::bad_request as go;
    Response::builder()
        .status(go::STATUS)
        .header(header::CONTENT_TYPE, go::CONTENT_TYPE)
        .header(header::CONNECTION, go::CONNECTION)
        .body(full(go::BODY))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// A Status error, in protobuf for clients that negotiate it, else JSON.
pub fn error(status: &Status, protobuf: bool) -> Response<Body> {
    let (content_type, bytes) = status_bytes(status, protobuf);
    let mut builder = base(status.code, content_type);
    if let Some(secs) = status.retry_after() {
        builder = builder.header(header::RETRY_AFTER, secs.to_string());
    }
    builder.body(full(bytes)).unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// A streamed watch body fed by a bounded channel: the writer task blocks (and so stops
/// pulling events) when the client reads slowly, and ends when the client goes away.
pub fn stream(content_type: &str) -> (mpsc::Sender<Bytes>, Response<Body>) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let resp = base(200, content_type)
        .body(StreamBody::new(frames).boxed())
        .unwrap_or_else(|_| Response::new(full(Bytes::new())));
    (tx, resp)
}

/// `Content-Type` header value of a request, without parameters.
pub fn request_content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}
