//! A lean HTTP/1.1 server for the body-less GETs on the proxy listener: lists, gets, and above
//! all watches, which sit open and mostly idle for minutes.
//!
//! hyper keeps two 8 KiB buffers for every HTTP/1.1 connection for as long as it lives (a read
//! buffer and a header write buffer), so an idle watch over HTTP/1.1 costs 16 KiB there, eight
//! times what it costs over HTTP/2. Here a connection that waits holds no buffer: the request
//! head is read into a buffer that is freed once parsed, the response is written from the
//! body's own `Bytes` (frames that are ready together go out in one `writev`), and a client
//! that goes away is noticed through the socket's readiness, without a read buffer.
//!
//! The bytes a client sees are hyper's: the same status line, the user's headers in order, then
//! `content-length` or `transfer-encoding: chunked`, then `date`. Everything else — HTTP/2's
//! preface, HTTP/1.0, a request with a body, an upgrade, `Expect`, a head that does not parse
//! or is over 64 KiB — hands the connection, with the bytes read so far, to hyper for the rest
//! of its life.

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::pin::Pin;

use bytes::{Buf, Bytes};
use futures_util::FutureExt;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body as _;
use http_body_util::{BodyExt, Empty};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

use kubeplex_net::Body;

/// A request body as handlers on the proxy listener see it (hyper's, boxed, or none).
pub type ReqBody = Body;

/// A request as hyper received it, with its body boxed as handlers here take it.
pub fn boxed(req: Request<hyper::body::Incoming>) -> Request<ReqBody> {
    req.map(|b| b.map_err(Into::into).boxed())
}

/// The largest request head read here; a longer one goes to hyper, which answers it.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes read at a time while a head arrives.
const READ_CHUNK: usize = 2048;
/// Headers in a request, at most (hyper's default).
const MAX_HEADERS: usize = 100;
/// Body frames gathered into one write, at most, and their bytes.
const BATCH_FRAMES: usize = 64;
const BATCH_BYTES: usize = 256 * 1024;
/// Slices in one `writev`.
const MAX_IOV: usize = 64;

/// Counts of what the lean server did, for the proxy's metrics.
#[derive(Clone)]
pub struct LeanCounters {
    /// Requests answered here.
    pub requests: prometheus::IntCounter,
    /// Connections handed to hyper.
    pub handovers: prometheus::IntCounter,
}

/// What a request head turned out to be.
#[derive(Debug)]
pub enum Parsed {
    /// A body-less HTTP/1.1 GET, served here; `len` bytes of the buffer were its head.
    Lean { req: Box<Request<ReqBody>>, len: usize, close: bool },
    /// Not all of the head has arrived.
    Partial,
    /// Anything else: hyper's.
    Other,
}

/// Parses a request head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let len = match head.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    if head.version != Some(1) || head.method != Some("GET") {
        return Parsed::Other;
    }
    let Some(uri) = head.path.filter(|p| p.starts_with('/')).and_then(|p| p.parse::<Uri>().ok())
    else {
        return Parsed::Other;
    };
    let mut map = HeaderMap::with_capacity(head.headers.len());
    let mut close = false;
    for h in head.headers.iter() {
        let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(h.name.as_bytes()), HeaderValue::from_bytes(h.value))
        else {
            return Parsed::Other;
        };
        match name {
            header::CONTENT_LENGTH if value.as_bytes().trim_ascii() == b"0" => {}
            header::CONTENT_LENGTH
            | header::TRANSFER_ENCODING
            | header::UPGRADE
            | header::EXPECT => return Parsed::Other,
            header::CONNECTION => {
                for token in value.to_str().unwrap_or("").split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("upgrade") {
                        return Parsed::Other;
                    }
                    close |= token.eq_ignore_ascii_case("close");
                }
            }
            _ => {}
        }
        map.append(name, value);
    }
    let mut req = Request::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = map;
    Parsed::Lean { req: Box::new(req), len, close }
}

/// Serves one connection: body-less GETs here, the rest of the connection by `hyper_conn`
/// once anything else arrives.
pub async fn connection<H, F, G, GF>(
    mut stream: TcpStream,
    handler: H,
    hyper_conn: G,
    counters: &LeanCounters,
    drain: &kubeplex_net::Drain,
    limits: &kubeplex_net::Limits,
) where
    H: Fn(Request<ReqBody>) -> F,
    F: Future<Output = Response<Body>>,
    G: FnOnce(TcpStream, Bytes) -> GF,
    GF: Future<Output = ()>,
{
    // Bytes read and not yet consumed: empty (and unallocated) while the client is quiet.
    let mut pending = Vec::new();
    let mut first = true;
    loop {
        // Draining (graceful shutdown): a connection between requests closes; one with a
        // request under way finishes it first.
        let idle = pending.is_empty();
        if idle && drain.is_draining() {
            return;
        }
        let head = tokio::select! {
            head = read_head_within(&stream, &mut pending, first, limits) => head,
            () = drain.signaled(), if idle => return,
        };
        first = false;
        match head {
            Ok(Some(Parsed::Lean { req, len, close })) => {
                counters.requests.inc();
                pending.drain(..len);
                if pending.is_empty() {
                    pending = Vec::new();
                }
                let resp = tokio::select! {
                    resp = handler(*req) => resp,
                    // Dropping the handler's future is what hyper does too when a client
                    // leaves while its answer is being prepared.
                    () = client_gone(&stream, &mut pending) => return,
                };
                match write_response(&mut stream, resp, close, &mut pending).await {
                    Ok(true) => {}
                    Ok(false) | Err(_) => return,
                }
            }
            Ok(Some(_)) => {
                counters.handovers.inc();
                return hyper_conn(stream, Bytes::from(pending)).await;
            }
            Ok(None) | Err(_) => return,
        }
    }
}

/// [`read_head`] within the listener's timeouts, as Go's `http.Server` (kube-apiserver's): a
/// keep-alive connection waits at most `idle_timeout` for the next request's first byte, then
/// the head must be whole within `header_read_timeout` (a new connection's first head from
/// the start). `None` (close, without an answer, as Go does) when either passes.
async fn read_head_within(
    stream: &TcpStream,
    pending: &mut Vec<u8>,
    first: bool,
    limits: &kubeplex_net::Limits,
) -> io::Result<Option<Parsed>> {
    if !first && pending.is_empty() {
        if let Some(idle) = limits.idle_timeout {
            if tokio::time::timeout(idle, stream.readable()).await.is_err() {
                return Ok(None);
            }
        }
    }
    let head = match limits.header_read_timeout {
        Some(t) => tokio::time::timeout(t, read_head(stream, pending)).await.unwrap_or(Ok(None)),
        None => read_head(stream, pending).await,
    };
    match head {
        // Over the listener's head limit: hyper's, which answers 431 as Go does.
        Ok(Some(Parsed::Lean { len, .. }))
            if limits.max_header_bytes > 0 && len > limits.max_header_bytes =>
        {
            Ok(Some(Parsed::Other))
        }
        head => head,
    }
}

/// Reads until `pending` holds a whole request head (or what is not one of ours); `None` when
/// the client closes first.
async fn read_head(stream: &TcpStream, pending: &mut Vec<u8>) -> io::Result<Option<Parsed>> {
    loop {
        if !pending.is_empty() {
            match parse_head(pending) {
                Parsed::Partial if pending.len() < MAX_HEAD => {}
                Parsed::Partial => return Ok(Some(Parsed::Other)),
                parsed => return Ok(Some(parsed)),
            }
        }
        // Wait without a buffer; allocate once there is something to read.
        stream.readable().await?;
        if pending.capacity() - pending.len() < READ_CHUNK / 2 {
            pending.reserve(READ_CHUNK);
        }
        match stream.try_read_buf(pending) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Resolves when the client has closed its side (or the connection failed). Bytes it sends
/// meanwhile (a pipelined request) are kept in `pending`, up to a head's limit.
async fn client_gone(stream: &TcpStream, pending: &mut Vec<u8>) {
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        let mut buf = [0u8; 512];
        match stream.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) if pending.len() + n <= MAX_HEAD => pending.extend_from_slice(&buf[..n]),
            Ok(_) => return,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Writes `resp` as hyper would; `Ok(true)` when the connection can take another request.
async fn write_response(
    stream: &mut TcpStream,
    resp: Response<Body>,
    close: bool,
    pending: &mut Vec<u8>,
) -> io::Result<bool> {
    let (parts, mut body) = resp.into_parts();
    let (head, framing, close) = encode_head(parts.status, &parts.headers, &body, close);
    let mut out = Batch::default();
    out.push(Bytes::from(head));
    let mut sent = 0u64;
    if framing == Framing::None {
        drop(body);
        return finish(stream, out, framing, sent, close).await;
    }
    loop {
        let next = match body.frame().now_or_never() {
            Some(next) => next,
            None => {
                // Nothing more ready: what has gathered goes out in one write, then wait for
                // the next frame or the client leaving.
                out.write_to(stream).await?;
                tokio::select! {
                    biased;
                    next = body.frame() => next,
                    () = client_gone(stream, pending) => return Ok(false),
                }
            }
        };
        let Some(frame) = next else { return finish(stream, out, framing, sent, close).await };
        out.frame(frame.map_err(io::Error::other)?, framing, &mut sent);
        if matches!(framing, Framing::Length(n) if sent > n) {
            return Err(io::Error::other("body longer than its content-length"));
        }
        if out.frames >= BATCH_FRAMES || out.bytes >= BATCH_BYTES {
            out.write_to(stream).await?;
        }
    }
}

async fn finish(
    stream: &mut TcpStream,
    mut out: Batch,
    framing: Framing,
    sent: u64,
    close: bool,
) -> io::Result<bool> {
    if framing == Framing::Chunked {
        out.push(Bytes::from_static(b"0\r\n\r\n"));
    }
    out.write_to(stream).await?;
    // After a body shorter than announced the client would read the next response from the
    // middle of this one, so the connection ends (as hyper does).
    Ok(!close && !matches!(framing, Framing::Length(n) if n != sent))
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304, 1xx).
    None,
    Length(u64),
    Chunked,
}

/// The status line and headers, as hyper writes them: the response's headers in order (its
/// own `transfer-encoding` dropped: the framing is the server's), `connection: close` when
/// the connection ends after this response, then `content-length` (from the body's exact size)
/// or `transfer-encoding: chunked`, then `date` unless the response has one.
pub fn encode_head(
    status: StatusCode,
    headers: &HeaderMap,
    body: &Body,
    mut close: bool,
) -> (Vec<u8>, Framing, bool) {
    let mut head = Vec::with_capacity(64 + headers.len() * 32);
    if status == StatusCode::OK {
        head.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        head.extend_from_slice(b"HTTP/1.1 ");
        head.extend_from_slice(status.as_str().as_bytes());
        head.push(b' ');
        head.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    let has_body = !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED);
    let mut length = None;
    let mut wrote_date = false;
    for (name, value) in headers {
        match *name {
            header::TRANSFER_ENCODING => continue,
            header::CONTENT_LENGTH => {
                let n = value.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok());
                match (has_body, n, length) {
                    (true, Some(n), None) => length = Some(n),
                    _ => continue,
                }
            }
            header::DATE => wrote_date = true,
            header::CONNECTION => {
                close |= value
                    .to_str()
                    .unwrap_or("")
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("close"));
            }
            _ => {}
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if close && !headers.contains_key(header::CONNECTION) {
        head.extend_from_slice(b"connection: close\r\n");
    }
    let framing = match (has_body, length, body.size_hint().exact()) {
        (false, _, _) => Framing::None,
        (true, Some(n), _) => Framing::Length(n),
        (true, None, Some(n)) => {
            head.extend_from_slice(b"content-length: ");
            head.extend_from_slice(n.to_string().as_bytes());
            head.extend_from_slice(b"\r\n");
            Framing::Length(n)
        }
        (true, None, None) => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n");
            Framing::Chunked
        }
    };
    if !wrote_date {
        head.extend_from_slice(b"date: ");
        head.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    (head, framing, close)
}

/// Bytes to write, in order, by one `writev` where they fit.
#[derive(Default)]
struct Batch {
    parts: Vec<Bytes>,
    frames: usize,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, b: Bytes) {
        self.bytes += b.len();
        self.parts.push(b);
    }

    /// Adds a body frame (trailers are dropped, as hyper drops them without a `Trailer`
    /// header); an empty data frame is skipped — as a chunk it would end the body.
    fn frame(&mut self, frame: http_body::Frame<Bytes>, framing: Framing, sent: &mut u64) {
        let Ok(data) = frame.into_data() else { return };
        if data.is_empty() {
            return;
        }
        *sent += data.len() as u64;
        self.frames += 1;
        if framing == Framing::Chunked {
            self.push(Bytes::from(format!("{:X}\r\n", data.len())));
            self.push(data);
            self.push(Bytes::from_static(b"\r\n"));
        } else {
            self.push(data);
        }
    }

    async fn write_to(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        let mut first = 0;
        while first < self.parts.len() {
            let parts = &self.parts[first..];
            let n = poll_fn(|cx| {
                let mut slices = [IoSlice::new(&[]); MAX_IOV];
                let count = parts.len().min(MAX_IOV);
                for (slot, part) in slices.iter_mut().zip(parts) {
                    *slot = IoSlice::new(part);
                }
                Pin::new(&mut *stream).poll_write_vectored(cx, &slices[..count])
            })
            .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            let mut left = n;
            while left > 0 {
                let part = &mut self.parts[first];
                if left >= part.len() {
                    left -= part.len();
                    first += 1;
                } else {
                    part.advance(left);
                    left = 0;
                }
            }
            while first < self.parts.len() && self.parts[first].is_empty() {
                first += 1;
            }
        }
        self.parts = Vec::new();
        self.frames = 0;
        self.bytes = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
