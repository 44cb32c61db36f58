//! Go's head timing on hyper connections: idle keep-alive connections wait the idle timeout,
//! heads get the header timeout from their first byte, requests being served and upgraded
//! connections are never timed, idle HTTP/2 connections are closed gracefully.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::{Drain, Limits};

const HEADER: Duration = Duration::from_millis(300);
const IDLE: Duration = Duration::from_millis(900);

/// A server with the two timeouts: `/slow` answers after 2 × IDLE, `/upgrade` answers 101 and
/// echoes what follows, anything else 200 "ok".
async fn server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits =
        Limits { header_read_timeout: Some(HEADER), idle_timeout: Some(IDLE), ..Limits::default() };
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let limits = limits.clone();
            tokio::spawn(async move {
                crate::with_hyper_limited(stream, handle, Drain::never(), &limits).await
            });
        }
    });
    addr
}

async fn handle(mut req: Request<Incoming>) -> Response<Full<bytes::Bytes>> {
    match req.uri().path() {
        "/slow" => {
            tokio::time::sleep(IDLE * 2).await;
            Response::new(Full::from("slow"))
        }
        "/upgrade" => {
            let upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let Ok(upgraded) = upgrade.await else { return };
                let mut io = hyper_util::rt::TokioIo::new(upgraded);
                let mut buf = [0u8; 64];
                while let Ok(n) = io.read(&mut buf).await {
                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
            Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Full::default())
                .unwrap()
        }
        _ => Response::new(Full::from("ok")),
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: k\r\n\r\n";

/// Reads until `want` has arrived (bounded), returning everything read.
async fn read_until(conn: &mut TcpStream, want: &str) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&out).contains(want) {
        let n = tokio::time::timeout_at(deadline, conn.read(&mut buf))
            .await
            .expect("answer in time")
            .unwrap();
        assert!(n > 0, "closed before {want:?}: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How long until the server closes `conn` (bounded by 5 s).
async fn closed_after(conn: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 64];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => continue,
            Err(_) => panic!("still open after 5 s"),
        }
    }
}

#[tokio::test]
async fn an_idle_connection_waits_the_idle_timeout_not_the_header_timeout() {
    let addr = server().await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(GET).await.unwrap();
    read_until(&mut conn, "ok").await;
    // Idle for three header timeouts, within the idle timeout: still open, and served.
    tokio::time::sleep(HEADER * 2).await;
    conn.write_all(GET).await.unwrap();
    read_until(&mut conn, "ok").await;
    let idle = closed_after(&mut conn).await;
    assert!(idle >= IDLE - Duration::from_millis(50), "closed after {idle:?}");
    assert!(idle < IDLE * 3, "closed after {idle:?}");
}

#[tokio::test]
async fn a_head_gets_the_header_timeout_from_its_first_byte() {
    let addr = server().await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    // Idle a while first: the header timeout starts at the first byte, not before.
    tokio::time::sleep(HEADER * 2).await;
    conn.write_all(b"GET / HTTP/1.1\r\nHost: k\r\n").await.unwrap();
    let took = closed_after(&mut conn).await;
    assert!(took >= HEADER - Duration::from_millis(50), "closed after {took:?}");
    assert!(took < IDLE, "a head has the header timeout, not the idle one: {took:?}");
}

#[tokio::test]
async fn a_request_being_served_is_not_timed() {
    let addr = server().await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /slow HTTP/1.1\r\nHost: k\r\n\r\n").await.unwrap();
    let answer = read_until(&mut conn, "slow").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
}

#[tokio::test]
async fn an_upgraded_connection_is_never_timed() {
    let addr = server().await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: k\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    read_until(&mut conn, "\r\n\r\n").await;
    tokio::time::sleep(IDLE * 2).await;
    conn.write_all(b"still here").await.unwrap();
    read_until(&mut conn, "still here").await;
}

#[tokio::test]
async fn an_http2_connection_is_closed_gracefully_once_idle_for_the_idle_timeout() {
    let addr = server().await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let get = |path: &str| {
        Request::get(format!("http://k{path}")).body(Full::<bytes::Bytes>::default()).unwrap()
    };
    assert_eq!(send.send_request(get("/")).await.unwrap().status(), 200);
    // No heads to time: idle past the header timeout, the same connection serves.
    tokio::time::sleep(HEADER * 2).await;
    assert_eq!(send.send_request(get("/")).await.unwrap().status(), 200);
    // A stream being served is not idleness: a request longer than the idle timeout completes.
    assert_eq!(send.send_request(get("/slow")).await.unwrap().status(), 200);
    // Idle for the idle timeout: the server says GOAWAY and the connection ends cleanly.
    let idle = Instant::now();
    let ended = tokio::time::timeout(IDLE * 3, conn).await.expect("closed when idle");
    assert!(matches!(ended, Ok(Ok(()))), "a graceful close: {ended:?}");
    assert!(idle.elapsed() >= IDLE - Duration::from_millis(50), "after {:?}", idle.elapsed());
}
