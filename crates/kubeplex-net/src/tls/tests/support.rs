//! A server's files on disk from the throwaway PKI ([`crate::scratch`]), a TLS server running
//! [`serve_tls_limited`](crate::serve_tls_limited) on loopback that answers with what it saw of
//! each request, and a real TLS client (tokio-rustls + hyper) to talk to it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::identity::{ClientCert, RejectedClientCert};
use crate::scratch::{Issued, Pki, TempDir};
use crate::tls::{serve_tls_limited, TlsAcceptor, TlsConfig};

/// Every await of a test is bounded by this: a missing answer fails fast.
pub const WAIT: Duration = Duration::from_secs(5);

/// A CA named `kubeplex-net-test-ca-N` (N counts the calls), so another CA's certificates have
/// an unknown issuer rather than a known issuer with a bad signature.
pub fn test_ca() -> Pki {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Pki::new(&format!("kubeplex-net-test-ca-{n}"))
}

/// The files of a server: `tls.crt`, `tls.key`, `ca.crt` (the client CA) in a temp dir.
pub struct Files {
    pub dir: TempDir,
    pub config: TlsConfig,
}

impl Files {
    pub fn new(name: &str, server: &Issued, client_ca: &Pki) -> Self {
        let dir = TempDir::new(name);
        let cert = dir.write("tls.crt", &server.cert_pem);
        let key = dir.write("tls.key", &server.key_pem);
        let ca = dir.write("ca.crt", &client_ca.ca_pem);
        let mut config = TlsConfig::new(cert, key).with_client_ca(ca);
        config.reload_interval = Duration::from_millis(100);
        Self { dir, config }
    }
}

/// `serve_tls_limited` on a loopback port, answering every request with a line describing it:
/// `<version> user=<CN> groups=<O,O> uid=<uid> rejected=<bool> body=<request body>`.
pub struct Server {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub async fn start(config: TlsConfig) -> Self {
        let acceptor = TlsAcceptor::new(config).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (drain, limits) = (crate::Drain::never(), crate::Limits::none());
        let task = tokio::spawn(serve_tls_limited(listener, acceptor, describe, drain, limits));
        Self { addr, task }
    }
}

async fn describe(mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.headers().contains_key(http::header::UPGRADE) {
        // exec/attach/port-forward's shape: 101, then the raw stream (here: echo one read).
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut io = TokioIo::new(upgraded);
            let mut buf = [0u8; 64];
            if let Ok(n) = io.read(&mut buf).await {
                let _ = io.write_all(&buf[..n]).await;
            }
        });
        return Response::builder()
            .status(http::StatusCode::SWITCHING_PROTOCOLS)
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "echo")
            .body(Full::default())
            .unwrap();
    }
    let version = req.version();
    let (user, groups, uid) = match req.extensions().get::<ClientCert>() {
        Some(c) => (c.user.clone(), c.groups.join(","), c.uid.clone().unwrap_or_default()),
        None => Default::default(),
    };
    let rejected = req.extensions().get::<RejectedClientCert>().is_some();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    Response::new(Full::new(Bytes::from(format!(
        "{version:?} user={user} groups={groups} uid={uid} rejected={rejected} body={body}"
    ))))
}

/// A TLS client trusting `ca`, offering `alpn`, with an optional client certificate.
pub fn client_config(ca: &Pki, alpn: &[&[u8]], cert: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in crate::tls::pem::certs(ca.ca_pem.as_bytes()).unwrap() {
        roots.add(c).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match cert {
        None => builder.with_no_client_auth(),
        Some(c) => {
            let chain = vec![c.der.clone()];
            let key = PrivateKeyDer::try_from(pem_der(&c.key_pem)).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn pem_der(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap()
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One client connection (HTTP/2 if the server chose `h2` by ALPN, HTTP/1.1 otherwise).
pub struct Conn {
    sender: Sender,
    /// The leaf certificate the server presented.
    pub server_cert: CertificateDer<'static>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    pub async fn open(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> std::io::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let name = ServerName::IpAddress(addr.ip().into());
        let tls = tokio::time::timeout(WAIT, connector.connect(name, tcp)).await??;
        let server_cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned();
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        let (sender, driver) = if h2 {
            let (s, c) = http2::handshake(TokioExecutor::new(), io).await.map_err(io_err)?;
            (Sender::H2(s), tokio::spawn(async move { drop(c.await) }))
        } else {
            let (s, c) = http1::handshake(io).await.map_err(io_err)?;
            (Sender::H1(s), tokio::spawn(async move { drop(c.with_upgrades().await) }))
        };
        Ok(Self { sender, server_cert, driver })
    }

    /// Sends a request with `body` and returns the server's description of it.
    pub async fn send(&mut self, body: &str) -> std::io::Result<String> {
        let req = Request::post("/echo").body(Full::new(Bytes::from(body.to_owned()))).unwrap();
        let resp = tokio::time::timeout(WAIT, async {
            match &mut self.sender {
                Sender::H1(s) => s.send_request(req).await,
                Sender::H2(s) => s.send_request(req).await,
            }
        })
        .await?
        .map_err(io_err)?;
        let body = tokio::time::timeout(WAIT, resp.into_body().collect()).await?.map_err(io_err)?;
        Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
    }
}

impl Conn {
    /// Upgrades an HTTP/1.1 connection, writes `data` on the raw stream and reads the echo.
    pub async fn upgrade_and_echo(&mut self, data: &[u8]) -> std::io::Result<Vec<u8>> {
        let Sender::H1(sender) = &mut self.sender else {
            return Err(std::io::Error::other("upgrades are HTTP/1.1"));
        };
        let req = Request::get("/exec")
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "echo")
            .body(Full::default())
            .unwrap();
        let resp = tokio::time::timeout(WAIT, sender.send_request(req)).await?.map_err(io_err)?;
        if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
            return Err(std::io::Error::other(format!("status {}", resp.status())));
        }
        let upgraded =
            tokio::time::timeout(WAIT, hyper::upgrade::on(resp)).await?.map_err(io_err)?;
        let mut io = TokioIo::new(upgraded);
        io.write_all(data).await?;
        let mut buf = vec![0u8; data.len()];
        tokio::time::timeout(WAIT, io.read_exact(&mut buf)).await??;
        Ok(buf)
    }
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::other(e)
}

/// One request on a new connection.
pub async fn get_once(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> String {
    Conn::open(addr, config).await.unwrap().send("").await.unwrap()
}

/// The version the handler saw, as the description starts with it.
pub fn version_of(description: &str) -> Option<Version> {
    match description.split(' ').next()? {
        "HTTP/1.1" => Some(Version::HTTP_11),
        "HTTP/2.0" => Some(Version::HTTP_2),
        _ => None,
    }
}
