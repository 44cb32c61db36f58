//! The test helpers that need no kubeplex: a raw HTTP/1.1 client over loopback (exact bytes, no
//! decompression), watch stream readers with timeouts, and the captured kube-apiserver fixtures
//! (`../shared/fixtures`, the one locator of the integration tests). The fake apiserver's own
//! tests (`crates/kubeplex-sim/tests/`) use it directly; `kubeplex-test-support` re-exports it for
//! kubeplex's tests.
#![forbid(unsafe_code)]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

/// Every await in a test is bounded by this.
pub const STEP: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body))
        })
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

async fn send(
    addr: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> http::Response<Incoming> {
    let stream = tokio::time::timeout(STEP, TcpStream::connect(addr))
        .await
        .expect("connect timed out")
        .expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder().method(method).uri(path).header("Host", addr);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).expect("request");
    tokio::time::timeout(STEP, sender.send_request(req))
        .await
        .expect("response timed out")
        .expect("response")
}

/// One request; the whole body, as sent.
pub async fn request(
    addr: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Resp {
    let resp = send(addr, method, path, headers, body).await;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = tokio::time::timeout(STEP, resp.into_body().collect())
        .await
        .expect("body timed out")
        .expect("body")
        .to_bytes();
    Resp { status, headers, body }
}

pub async fn get(addr: &str, path: &str) -> Resp {
    request(addr, Method::GET, path, &[("Accept", "application/json")], None).await
}

pub async fn get_accept(addr: &str, path: &str, accept: &str) -> Resp {
    request(addr, Method::GET, path, &[("Accept", accept)], None).await
}

pub async fn send_json(addr: &str, method: Method, path: &str, body: &Value) -> Resp {
    request(
        addr,
        method,
        path,
        &[("Accept", "application/json"), ("Content-Type", "application/json")],
        Some(serde_json::to_vec(body).expect("json")),
    )
    .await
}

/// An open watch response, read line by line (JSON) or frame by frame (protobuf).
pub struct Watch {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    buf: BytesMut,
    ended: bool,
    broken: bool,
}

pub async fn watch(addr: &str, path: &str, accept: &str) -> Watch {
    watch_with(addr, path, &[("Accept", accept)]).await
}

/// [`watch`] with any request headers.
pub async fn watch_with(addr: &str, path: &str, headers: &[(&str, &str)]) -> Watch {
    let resp = send(addr, Method::GET, path, headers, None).await;
    Watch {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.into_body(),
        buf: BytesMut::new(),
        ended: false,
        broken: false,
    }
}

impl Watch {
    async fn fill(&mut self, timeout: Duration) -> bool {
        if self.ended {
            return false;
        }
        match tokio::time::timeout(timeout, self.body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    self.buf.extend_from_slice(&data);
                }
                true
            }
            Ok(end) => {
                self.ended = true;
                self.broken = matches!(end, Some(Err(_)));
                false
            }
            Err(_) => false,
        }
    }

    /// Whether the stream ended with an error (a connection cut mid-response) rather than at
    /// its end (the chunked terminator, or HTTP/2's end of stream).
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// The next JSON line, raw; `None` at end of stream or after `timeout` without one.
    pub async fn next_line_within(&mut self, timeout: Duration) -> Option<Bytes> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                return Some(self.buf.split_to(pos + 1).freeze());
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() || !self.fill(left).await {
                return None;
            }
        }
    }

    /// The next JSON event, failing the test if none comes within STEP.
    pub async fn next(&mut self) -> Value {
        let line =
            self.next_line_within(STEP).await.expect("no watch event within the step timeout");
        serde_json::from_slice(&line).expect("watch line is JSON")
    }

    pub async fn next_within(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.next_line_within(timeout).await?;
        Some(serde_json::from_slice(&line).expect("watch line is JSON"))
    }

    /// The next length-prefixed protobuf frame.
    pub async fn next_frame(&mut self) -> Option<Bytes> {
        self.next_frame_within(STEP).await
    }

    /// The next length-prefixed protobuf frame; `None` at end of stream or after `timeout`.
    pub async fn next_frame_within(&mut self, timeout: Duration) -> Option<Bytes> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if self.buf.len() >= 4 + len {
                    let mut frame = self.buf.split_to(4 + len);
                    return Some(frame.split_off(4).freeze());
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() || !self.fill(left).await {
                return None;
            }
        }
    }

    /// The next `n` events, raw: protobuf frames when `accept` asks for protobuf, else JSON
    /// lines; fails the test if one does not come within STEP.
    pub async fn next_raw(&mut self, accept: &str, n: usize) -> Vec<Bytes> {
        let protobuf = accept.starts_with("application/vnd.kubernetes.protobuf");
        let mut got = Vec::with_capacity(n);
        for _ in 0..n {
            let next =
                if protobuf { self.next_frame().await } else { self.next_line_within(STEP).await };
            got.push(next.expect("an event within the step timeout"));
        }
        got
    }

    /// Whether the server ended the stream within `timeout` (draining anything left).
    pub async fn ends_within(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.ended {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.fill(left).await;
        }
        true
    }
}

/// Short summary of a watch event: (type, name, resourceVersion).
pub fn ev(e: &Value) -> (String, String, String) {
    let s = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/type"), s("/object/metadata/name"), s("/object/metadata/resourceVersion"))
}

pub fn rv_of(v: &Value) -> u64 {
    v.pointer("/metadata/resourceVersion")
        .or_else(|| v.pointer("/object/metadata/resourceVersion"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {v}"))
}

// ---- fixtures ----

pub struct Fixture {
    pub method: String,
    pub path: String,
    pub request_headers: Vec<(String, String)>,
    pub status: u16,
    pub response_headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Fixture {
    pub fn request_header(&self, name: &str) -> Option<&str> {
        self.request_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn response_header(&self, name: &str) -> Option<&str> {
        self.response_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("fixture body is JSON")
    }

    /// The body's JSON lines (watch fixtures).
    pub fn events(&self) -> Vec<Value> {
        self.body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("fixture event is JSON"))
            .collect()
    }
}

pub fn fixture(name: &str) -> Fixture {
    // `shared/` sits beside the repository (this crate is `crates/kubeplex-test-client`).
    let dir = format!("{}/../../../shared/fixtures", env!("CARGO_MANIFEST_DIR"));
    let http = std::fs::read_to_string(format!("{dir}/{name}.http")).expect("fixture .http");
    let body = std::fs::read(format!("{dir}/{name}.body")).expect("fixture .body");
    let mut lines = http.lines();
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut request_headers = Vec::new();
    for l in lines.by_ref() {
        if l.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            request_headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let status_line = lines.by_ref().find(|l| l.starts_with("HTTP/")).unwrap_or("");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut response_headers = Vec::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            response_headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Fixture { method, path, request_headers, status, response_headers, body }
}

/// Replaces what legitimately differs between two servers' answers (uids, timestamps,
/// resourceVersions, continue tokens' RVs, Table ages) with placeholders, keeping structure,
/// key order and everything else byte for byte.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let nv = match (k.as_str(), v) {
                        ("uid", Value::String(_)) => Value::String("<uid>".into()),
                        ("resourceVersion", Value::String(_)) => Value::String("<rv>".into()),
                        (
                            "creationTimestamp" | "time" | "lastTransitionTime" | "startTime",
                            Value::String(_),
                        ) => Value::String("<ts>".into()),
                        ("continue", Value::String(s)) => Value::String(normalize_continue(s)),
                        _ => normalize(v),
                    };
                    (k.clone(), nv)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

fn normalize_continue(token: &str) -> String {
    match kubeplex_wire::continue_token::decode(token) {
        Ok(t) => format!("<continue rv> {:?}", t.start),
        Err(_) => token.to_string(),
    }
}

/// Serialized normalized JSON: comparing these compares structure and key order.
pub fn norm_bytes(v: &Value) -> String {
    serde_json::to_string(&normalize(v)).expect("json")
}

/// Sends `parts` raw on one connection (waiting `gap` after each) and reads until the server
/// closes it.
pub async fn raw_exchange(addr: std::net::SocketAddr, parts: &[&[u8]], gap: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    for p in parts {
        s.write_all(p).await.expect("write");
        tokio::time::sleep(gap).await;
    }
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

/// Raw HTTP/1.1 responses with each `date` and `audit-id` (a fresh UUID per response) value
/// blanked, for comparing two servers' bytes.
pub fn undated(text: &str) -> String {
    text.split("\r\n")
        .map(|line| match line.split_once(": ") {
            Some((name @ ("date" | "audit-id"), _)) => format!("{name}: -"),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}
