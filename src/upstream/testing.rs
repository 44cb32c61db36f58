//! Test fixtures: temporary directories and a throwaway PKI (kubeplex-net's `scratch`, through
//! kubeplex-test-support), and a fake apiserver endpoint over real loopback sockets that records
//! what each request looked like on the wire.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kubeplex_net::tls::pem;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use kubeplex_test_support::TempDir;

/// A CA, a server certificate for 127.0.0.1 and `kubernetes.default.svc`, and a client
/// certificate for CN `kubeplex`, all PEM (issued by the throwaway PKI, kubeplex-net's
/// `scratch`).
pub struct Pki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl Pki {
    pub fn new() -> Self {
        // A unique name, so that another Pki's certificates have an unknown issuer rather
        // than a known issuer with a bad signature.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ca = kubeplex_test_support::tls::Pki::new(&format!("kubeplex-test-ca-{n}"));
        let server = ca.server_for(&["127.0.0.1", "kubernetes.default.svc"]);
        let client = ca.client("kubeplex", &[]);
        Self {
            ca_pem: ca.ca_pem.clone(),
            server_cert_pem: server.cert_pem,
            server_key_pem: server.key_pem,
            client_cert_pem: client.cert_pem,
            client_key_pem: client.key_pem,
        }
    }
}

/// Streams one HTTP/2 connection may carry at once, as the kube-apiserver allows.
pub const APISERVER_MAX_STREAMS: u32 = 100;

/// What the fake endpoint saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub version: Version,
    pub method: String,
    pub target: String,
    pub host: Option<String>,
    pub authorization: Option<String>,
    pub client_cert: bool,
    pub body: Vec<u8>,
    /// Which TCP connection (accept order) carried it.
    pub connection: usize,
}

/// A loopback endpoint answering `200 ok` (`401` to the token `reject-me`, a never-ending
/// `event` stream to `watch=1`, `101` + echo to an upgrade request), plain or
/// TLS offering h2 and http/1.1 with an optional client certificate checked against `ca`.
pub struct FakeServer {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    pub async fn plain() -> Self {
        Self::start(None).await
    }

    /// Serves `cert`/`key`; client certificates are optional and verified against `client_ca`.
    pub async fn tls(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> Self {
        let provider = kubeplex_net::tls::provider();
        let mut roots = rustls::RootCertStore::empty();
        for cert in pem::certs(client_ca_pem.as_bytes()).unwrap() {
            roots.add(cert).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let certs = pem::certs(cert_pem.as_bytes()).unwrap();
        let key = pem::private_key(key_pem.as_bytes()).unwrap().unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self::start(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await
    }

    async fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let task = tokio::spawn(async move {
            let mut connection = 0;
            while let Ok((tcp, _)) = listener.accept().await {
                connection += 1;
                let (seen, tls) = (recorded.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            // A rejected handshake is the client's business; nothing to serve.
                            let Ok(stream) = acceptor.accept(tcp).await else { return };
                            let client_cert = stream.get_ref().1.peer_certificates().is_some();
                            serve(TokioIo::new(stream), seen, client_cert, connection).await;
                        }
                        None => serve(TokioIo::new(tcp), seen, false, connection).await,
                    }
                });
            }
        });
        Self { addr, seen, task }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve<I>(io: I, seen: Arc<Mutex<Vec<Seen>>>, client_cert: bool, connection: usize)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move { Ok::<_, Infallible>(answer(req, seen, client_cert, connection).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // The kube-apiserver's limit of concurrent streams per HTTP/2 connection
    // (k8s.io/apiserver `secure_serving.go`: 100 unless --http2-max-streams-per-connection).
    builder.http2().max_concurrent_streams(APISERVER_MAX_STREAMS);
    let _ = builder.serve_connection_with_upgrades(io, service).await;
}

async fn answer(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    client_cert: bool,
    connection: usize,
) -> Response<BoxBody<Bytes, Infallible>> {
    let header =
        |name| req.headers().get(name).map(|v: &http::HeaderValue| v.to_str().unwrap().to_owned());
    let record = Seen {
        version: req.version(),
        method: req.method().to_string(),
        target: req.uri().path_and_query().map(|pq| pq.to_string()).unwrap_or_default(),
        host: header(http::header::HOST).or_else(|| req.uri().authority().map(|a| a.to_string())),
        authorization: header(http::header::AUTHORIZATION),
        client_cert,
        body: Vec::new(),
        connection,
    };
    if req.headers().contains_key(http::header::UPGRADE) {
        seen.lock().unwrap().push(record);
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let Ok(upgraded) = hyper::upgrade::on(req).await else { return };
            let mut io = TokioIo::new(upgraded);
            let mut buf = [0u8; 64];
            while let Ok(n @ 1..) = io.read(&mut buf).await {
                let _ = io.write_all(&buf[..n]).await;
            }
        });
        return Response::builder()
            .status(101)
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "SPDY/3.1")
            .body(Full::default().boxed())
            .unwrap();
    }
    let rejected = record.authorization.as_deref() == Some("Bearer reject-me");
    let watch = record.target.contains("watch=1");
    // Recorded before the body is read, so a test can see a request whose body is still open.
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.push(record);
        seen.len() - 1
    };
    let body = req.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    seen.lock().unwrap()[index].body = body;
    if rejected {
        return Response::builder().status(401).body(Full::default().boxed()).unwrap();
    }
    if watch {
        return Response::new(WatchBody { sent: false }.boxed());
    }
    Response::new(Full::new(Bytes::from_static(b"ok")).boxed())
}

/// A watch response: one event line, then open until the server goes away.
struct WatchBody {
    sent: bool,
}

impl hyper::body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        if self.sent {
            return std::task::Poll::Pending;
        }
        self.sent = true;
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(b"event\n")))))
    }
}
