//! The proxy listener's lean HTTP/1.1 server (src/net/h1.rs) against hyper: the same handler
//! behind both, the same raw bytes sent, the same bytes back (the `date` header's value
//! aside); connections it hands to hyper mid-way; a client that leaves mid-stream.

use kubeplex_test_support as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use kubeplex::net::h1::{LeanCounters, ReqBody};
use kubeplex::serve::body::{self, Body, BoxError};
use kubeplex::wire::status::Status;
use prometheus::IntCounter;
use support::{raw_exchange, undated};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Streams that the client walked away from, counted when their body is dropped.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn stream_of(chunks: Vec<&'static str>, gap: Duration, forever: Option<Dropped>) -> Body {
    let chunks = Arc::new(chunks);
    let frames = futures_util::stream::unfold((0usize, forever), move |(i, guard)| {
        let chunks = chunks.clone();
        async move {
            if i > 0 {
                tokio::time::sleep(gap).await;
            }
            match chunks.get(i) {
                Some(c) => Some((
                    Ok::<_, BoxError>(http_body::Frame::data(Bytes::from(*c))),
                    (i + 1, guard),
                )),
                None if guard.is_some() => {
                    std::future::pending::<()>().await;
                    None
                }
                None => None,
            }
        }
    });
    http_body_util::StreamBody::new(frames).boxed()
}

async fn handler(req: Request<ReqBody>, dropped: Arc<AtomicUsize>) -> Response<Body> {
    match req.uri().path() {
        "/full" => body::respond(200, body::JSON, b"{\"kind\":\"PodList\"}\n".to_vec()),
        "/status" => body::status(&Status::not_found("", "pods", "x")),
        "/empty" => body::respond(200, "text/plain", Vec::new()),
        "/nocontent" => {
            let mut r = body::respond(200, "text/plain", Vec::new());
            *r.status_mut() = http::StatusCode::NO_CONTENT;
            r
        }
        "/parts" => body::respond_parts(
            200,
            body::JSON,
            vec![
                Bytes::from_static(b"{\"items\":["),
                Bytes::from_static(b"1,2"),
                Bytes::from_static(b"]}"),
            ],
        ),
        "/stream" => {
            let mut r = body::respond(200, body::JSON, Vec::new());
            *r.body_mut() = stream_of(
                vec![
                    "{\"type\":\"ADDED\"}\n",
                    "{\"type\":\"MODIFIED\"}\n",
                    "abcdefghijklmnopqrstuvwxy\n",
                ],
                Duration::from_millis(20),
                None,
            );
            r
        }
        "/burst" => {
            // Frames that are all ready at once (the lean server writes them together; the
            // chunks on the wire are the same).
            let mut r = body::respond(200, body::JSON, Vec::new());
            *r.body_mut() = stream_of(vec!["a\n", "", "b\n", "c\n"], Duration::ZERO, None);
            r
        }
        "/forever" => {
            let mut r = body::respond(200, body::JSON, Vec::new());
            *r.body_mut() = stream_of(
                vec!["{\"type\":\"BOOKMARK\"}\n"],
                Duration::ZERO,
                Some(Dropped(dropped)),
            );
            r
        }
        "/echo" => {
            let got = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            body::respond(200, "text/plain", got.to_vec())
        }
        _ => body::respond(404, "text/plain", b"not found".to_vec()),
    }
}

struct Servers {
    hyper: std::net::SocketAddr,
    lean: std::net::SocketAddr,
    dropped: Arc<AtomicUsize>,
    counters: LeanCounters,
}

async fn servers() -> Servers {
    let dropped = Arc::new(AtomicUsize::new(0));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hyper = l.local_addr().unwrap();
    let d = dropped.clone();
    tokio::spawn(kubeplex::net::serve(l, move |req: Request<hyper::body::Incoming>| {
        handler(req.map(|b| b.map_err(Into::into).boxed()), d.clone())
    }));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lean = l.local_addr().unwrap();
    let d = dropped.clone();
    let counters = LeanCounters {
        requests: IntCounter::new("lean", "lean").unwrap(),
        handovers: IntCounter::new("hyper", "hyper").unwrap(),
    };
    tokio::spawn(kubeplex::net::serve_lean(
        l,
        move |req| handler(req, d.clone()),
        counters.clone(),
    ));
    Servers { hyper, lean, dropped, counters }
}

async fn same_bytes(s: &Servers, parts: &[&[u8]], gap: Duration) -> String {
    let want = undated(&raw_exchange(s.hyper, parts, gap).await);
    let got = undated(&raw_exchange(s.lean, parts, gap).await);
    assert_eq!(got, want, "lean server (left) and hyper (right) differ");
    got
}

const CLOSE: &[u8] = b"GET /full HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn keep_alive_requests_get_hypers_bytes() {
    let s = servers().await;
    for path in ["/full", "/status", "/empty", "/nocontent", "/parts", "/stream", "/burst", "/nope"]
    {
        let req =
            format!("GET {path}?watch=1 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n");
        let got = same_bytes(&s, &[req.as_bytes(), CLOSE], Duration::from_millis(100)).await;
        assert_eq!(got.matches("HTTP/1.1 ").count(), 2, "{got}");
        assert!(got.ends_with("{\"kind\":\"PodList\"}\n"), "{got}");
    }
    // Every one of those was the lean server's.
    assert_eq!((s.counters.requests.get(), s.counters.handovers.get()), (16, 0));
    let got = same_bytes(
        &s,
        &[b"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
        Duration::ZERO,
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.contains("connection: close\r\ntransfer-encoding: chunked\r\n"), "{got}");
    assert!(got.ends_with("11\r\n{\"type\":\"ADDED\"}\n\r\n14\r\n{\"type\":\"MODIFIED\"}\n\r\n1A\r\nabcdefghijklmnopqrstuvwxy\n\r\n0\r\n\r\n"), "{got}");
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let s = servers().await;
    let all = [
        "GET /stream HTTP/1.1\r\n\r\n",
        "GET /parts HTTP/1.1\r\n\r\n",
        "GET /status HTTP/1.1\r\n\r\n",
        "GET /burst HTTP/1.1\r\n\r\n",
        "GET /full HTTP/1.1\r\nConnection: close\r\n\r\n",
    ]
    .concat();
    let got = same_bytes(&s, &[all.as_bytes()], Duration::ZERO).await;
    assert_eq!(got.matches("HTTP/1.1 ").count(), 5, "{got}");
    assert_eq!((s.counters.requests.get(), s.counters.handovers.get()), (5, 0));
    // A request split across writes, in the middle of a header.
    same_bytes(
        &s,
        &[b"GET /parts HTTP/1.1\r\nAcc", b"ept: */*\r\n\r\n", CLOSE],
        Duration::from_millis(50),
    )
    .await;
}

#[tokio::test]
async fn a_connection_goes_to_hyper_from_its_first_request_with_a_body() {
    let s = servers().await;
    let got = same_bytes(
        &s,
        &[
            b"GET /full HTTP/1.1\r\n\r\n",
            b"POST /echo HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world",
            b"GET /stream HTTP/1.1\r\n\r\n",
            CLOSE,
        ],
        Duration::from_millis(50),
    )
    .await;
    assert!(got.contains("\r\n\r\nhello world"), "{got}");
    assert_eq!(got.matches("HTTP/1.1 200 OK").count(), 4, "{got}");
    // The first GET here, the rest (from the POST on) by hyper.
    assert_eq!((s.counters.requests.get(), s.counters.handovers.get()), (1, 1));
    // The same when the body-carrying request arrives together with the one before it.
    same_bytes(
        &s,
        &[b"GET /full HTTP/1.1\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", CLOSE],
        Duration::from_millis(50),
    )
    .await;
    // HTTP/1.0, and a head too long for the lean server (hyper still takes it).
    same_bytes(&s, &[b"GET /full HTTP/1.0\r\n\r\n"], Duration::ZERO).await;
    let long = format!(
        "GET /full HTTP/1.1\r\nX-Long: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(70_000)
    );
    let got = same_bytes(&s, &[long.as_bytes()], Duration::ZERO).await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    // Garbage: hyper's own answer.
    same_bytes(&s, &[b"BLAH\x01\r\n\r\n"], Duration::ZERO).await;
}

#[tokio::test]
async fn http2_with_prior_knowledge_still_works() {
    let s = servers().await;
    let stream = TcpStream::connect(s.lean).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake::<_, http_body_util::Empty<Bytes>>(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resp = send
        .send_request(Request::get("http://x/parts").body(http_body_util::Empty::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!((s.counters.requests.get(), s.counters.handovers.get()), (0, 1));
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"{\"items\":[1,2]}");
}

#[tokio::test]
async fn a_client_leaving_mid_stream_ends_its_body() {
    let s = servers().await;
    for addr in [s.lean, s.hyper] {
        let before = s.dropped.load(Ordering::SeqCst);
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("BOOKMARK") {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        drop(c);
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while s.dropped.load(Ordering::SeqCst) == before {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(ended.is_ok(), "the stream on {addr} outlived its client");
    }
}
