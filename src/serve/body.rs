//! Response bodies and the headers every kube-apiserver response carries.

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::auth::Refusal;
use crate::wire::negotiate::{self, MediaType};
use crate::wire::status::Status;

pub use kubeplex_net::{Body, BoxError};

pub const JSON: &str = "application/json";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed()
}

/// A response answered by kubeplex itself, with the apiserver's common headers; the request id
/// in `Audit-Id` is kubeplex's own.
pub fn respond(status: u16, content_type: &str, bytes: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("Audit-Id", uuid::Uuid::new_v4().to_string())
        .header(header::CACHE_CONTROL, "no-cache, private")
        .header(header::CONTENT_TYPE, content_type)
        .body(full(bytes))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// Like [`respond`], for bytes already shared (a cached page).
pub fn respond_bytes(status: u16, content_type: &str, bytes: Bytes) -> Response<Body> {
    let mut resp = respond(status, content_type, Vec::new());
    *resp.body_mut() = full(bytes);
    resp
}

/// Like [`respond`], for a body written as the given parts one after the other (a large list
/// from the cached items' own buffers), with its length announced.
pub fn respond_parts(status: u16, content_type: &str, parts: Vec<Bytes>) -> Response<Body> {
    let len: usize = parts.iter().map(Bytes::len).sum();
    let mut resp = respond(status, content_type, Vec::new());
    let frames = futures_util::stream::iter(
        parts.into_iter().map(|p| Ok::<_, BoxError>(http_body::Frame::data(p))),
    );
    *resp.body_mut() = http_body_util::StreamBody::new(frames).boxed();
    if let Ok(v) = len.to_string().parse() {
        resp.headers_mut().insert(header::CONTENT_LENGTH, v);
    }
    resp
}

/// A Status error as JSON (kubeplex's own errors; upstream errors pass through as they are).
pub fn status(s: &Status) -> Response<Body> {
    let mut bytes = s.to_json();
    bytes.push(b'\n');
    let mut resp = respond(s.code, JSON, bytes);
    if let Some(reason) = crate::wire::status::go_reason_phrase(s.code) {
        resp.extensions_mut().insert(hyper::ext::ReasonPhrase::from_static(reason.as_bytes()));
    }
    if let Some(secs) = s.retry_after() {
        if let Ok(v) = secs.to_string().parse() {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

/// The answer to a request the identity checks refused ([`Refusal`]), as the apiserver writes
/// it.
pub fn refused(refusal: &Refusal) -> Response<Body> {
    match refusal {
        Refusal::Unauthorized => status(&Status::unauthorized()),
        Refusal::Forbidden { status: s, accept } => {
            let mut resp = match negotiate::negotiate_error(accept.as_deref()) {
                Some(MediaType::Protobuf) => respond(s.code, PROTOBUF, s.to_protobuf()),
                _ => status(s),
            };
            resp.headers_mut()
                .insert("x-content-type-options", http::HeaderValue::from_static("nosniff"));
            resp
        }
        Refusal::Status(s) => status(s),
        Refusal::Throttled => too_many_requests(),
    }
}

/// The maxinflight filter's `tooManyRequests`: `Retry-After: 1`, then Go's `http.Error`
/// (plain text, `nosniff`, the message and a newline) — not a Status.
pub fn too_many_requests() -> Response<Body> {
    Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .header(header::RETRY_AFTER, "1")
        .body(full(Bytes::from_static(b"Too many requests, please try again later.\n")))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

#[cfg(test)]
mod tests;
