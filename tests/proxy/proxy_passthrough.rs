//! Passthrough details against a scripted upstream: whose identity goes upstream, and
//! upgraded connections (exec, attach, port-forward) tunnelled both ways.

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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Answers every request with the Authorization it received; `/upgrade` switches protocols and
/// echoes bytes.
async fn scripted_upstream() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|mut req: Request<Incoming>| async move {
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
            });
        }
    });
    addr
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
        preload: Vec::new(),
        scopes: Vec::new(),
        watch: Default::default(),
        freshness: Default::default(),
        discovery_ttl: kubeplex::live::discovery::DISCOVERY_TTL,
        disk: Default::default(),
        memory_budget: None,
        namespace: None,
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
