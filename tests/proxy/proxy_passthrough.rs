//! Passthrough details against a scripted upstream: whose identity goes upstream, and
//! upgraded connections (exec, attach, port-forward) tunnelled both ways.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kubeplex::cache::store::StoreLimits;
use kubeplex::live::caches::CachesConfig;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_test_support::stack::default_caches;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Answers every request with the Authorization it received; `/upgrade` switches protocols and
/// echoes bytes; `/slow` answers after 300 ms. HTTP/1.1 only. Counts its open connections.
async fn scripted_upstream() -> std::net::SocketAddr {
    scripted_upstream_counted().await.0
}

/// The upstream's connections: open now, and the most open at once.
#[derive(Default)]
struct Conns {
    open: AtomicUsize,
    most: AtomicUsize,
}

async fn scripted_upstream_counted() -> (std::net::SocketAddr, Arc<Conns>) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let conns = Arc::new(Conns::default());
    let counted = conns.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let conns = counted.clone();
            let now = conns.open.fetch_add(1, Ordering::SeqCst) + 1;
            conns.most.fetch_max(now, Ordering::SeqCst);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|mut req: Request<Incoming>| async move {
                    if req.uri().path() == "/slow" {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    if req.uri().path() == "/upgrade" {
                        let on = hyper::upgrade::on(&mut req);
                        tokio::spawn(async move {
                            if let Ok(up) = on.await {
                                let mut io = TokioIo::new(up);
                                let mut buf = [0u8; 64];
                                while let Ok(n) = io.read(&mut buf).await {
                                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        });
                        return Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .status(StatusCode::SWITCHING_PROTOCOLS)
                                .header("Connection", "Upgrade")
                                .header("Upgrade", "echo")
                                .body(Full::new(Bytes::new()))
                                .expect("response"),
                        );
                    }
                    let auth = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    Ok(Response::new(Full::new(Bytes::from(auth))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .with_upgrades()
                    .await;
                conns.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, conns)
}

async fn proxy_for(upstream: std::net::SocketAddr) -> (Proxy, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "kubeplex-pt-{}-{}",
        std::process::id(),
        upstream.port()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let kc = dir.join("kubeconfig");
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{upstream}\nusers:\n- name: u\n  user:\n    token: kubeplex-token\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
    );
    std::fs::write(&kc, cfg).expect("kubeconfig");
    let up =
        Upstream::new(UpstreamConfig::resolve(Some(&kc), None).expect("config")).expect("client");
    let caches = CachesConfig {
        limits: StoreLimits { max_snapshots: 10, max_snapshot_age: Duration::from_secs(60) },
        idle_timeout: Duration::from_secs(60),
        ..default_caches(&[])
    };
    let proxy = Proxy::builder(up, caches).start().await.expect("proxy");
    (proxy, dir)
}

async fn auth_seen(proxy: &Proxy, auth: Option<&str>) -> String {
    let stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::get("/version").header("Host", "kubeplex");
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::new())).expect("req"))
        .await
        .expect("response");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test]
async fn clients_with_credentials_go_upstream_as_themselves() {
    let (proxy, dir) = proxy_for(scripted_upstream().await).await;
    assert_eq!(
        auth_seen(&proxy, None).await,
        "Bearer kubeplex-token",
        "anonymous clients borrow kubeplex's identity"
    );
    assert_eq!(
        auth_seen(&proxy, Some("Bearer client-token")).await,
        "Bearer client-token",
        "clients with credentials keep theirs"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn upgraded_connections_are_tunnelled() {
    let (proxy, dir) = proxy_for(scripted_upstream().await).await;
    let mut s = TcpStream::connect(proxy.addr).await.expect("connect");
    s.write_all(
        b"GET /upgrade HTTP/1.1\r\nHost: kubeplex\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte))
            .await
            .expect("101 in time")
            .expect("read");
        assert_eq!(n, 1, "connection closed before the 101");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.to_ascii_lowercase().contains("upgrade: echo"), "{head}");
    for msg in [&b"ping"[..], b"second message"] {
        s.write_all(msg).await.expect("write");
        let mut buf = vec![0u8; msg.len()];
        tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut buf))
            .await
            .expect("echo in time")
            .expect("read");
        assert_eq!(buf, msg);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A burst of requests passed on to an HTTP/1.1 upstream opens a connection per request in
/// flight; once answered, kubeplex keeps 25 of them idle (client-go's `MaxIdleConnsPerHost`)
/// and closes the rest, rather than holding every one — and the upstream's side of each — for
/// the idle timeout.
#[tokio::test]
async fn a_burst_of_passed_on_requests_leaves_at_most_25_idle_upstream_connections() {
    let (upstream, conns) = scripted_upstream_counted().await;
    let (proxy, dir) = proxy_for(upstream).await;
    let addr = proxy.addr.to_string();
    let gets = (0..60).map(|_| kubeplex_test_support::get(&addr, "/slow"));
    for resp in futures_util::future::join_all(gets).await {
        assert_eq!(resp.status, 200);
    }
    let most = conns.most.load(Ordering::SeqCst);
    assert!(most > 25, "the burst had {most} connections in flight at once");
    let open = || conns.open.load(Ordering::SeqCst);
    // Connections beyond the idle limit are closed as they come back.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while open() > 25 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(open() <= 25, "{} upstream connections still open", open());
    let _ = std::fs::remove_dir_all(dir);
}
