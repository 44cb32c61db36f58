//! TLS for the node mode's tests: the throwaway PKI (kubeplex-net's `scratch`: a CA that signs
//! kubeplex's serving certificate and the clients' certificates, as a cluster CA does) and an
//! HTTPS client that presents a client certificate or a bearer token, over HTTP/1.1 or HTTP/2 by
//! ALPN.

use kubeplex_net::tls::pem;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

pub use kubeplex_net::scratch::{Issued, Pki};

use crate::Resp;

/// How a client proves who it is.
#[derive(Clone, Default)]
pub struct Credentials {
    pub cert: Option<Issued>,
    pub token: Option<String>,
}

impl Credentials {
    pub fn none() -> Self {
        Credentials::default()
    }
    pub fn cert(cert: Issued) -> Self {
        Credentials { cert: Some(cert), token: None }
    }
    pub fn token(token: &str) -> Self {
        Credentials { cert: None, token: Some(token.to_string()) }
    }
}

/// An HTTPS client trusting `ca_pem`, with `credentials`.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<rustls::ClientConfig>,
    token: Option<String>,
}

impl TlsClient {
    pub fn new(ca_pem: &str, credentials: &Credentials, http2: bool) -> TlsClient {
        let provider = kubeplex_net::tls::provider();
        let mut roots = rustls::RootCertStore::empty();
        for cert in pem::certs(ca_pem.as_bytes()).expect("ca pem") {
            roots.add(cert).expect("ca");
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let mut config = match &credentials.cert {
            Some(c) => {
                let chain = pem::certs(c.cert_pem.as_bytes()).expect("cert pem");
                let key = pem::private_key(c.key_pem.as_bytes()).expect("key pem").expect("a key");
                builder.with_client_auth_cert(chain, key).expect("client auth")
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols =
            if http2 { vec![b"h2".to_vec()] } else { vec![b"http/1.1".to_vec()] };
        TlsClient { config: Arc::new(config), token: credentials.token.clone() }
    }

    /// One request on a new connection; the whole answer.
    pub async fn request(
        &self,
        addr: &str,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Resp {
        let step = Duration::from_secs(10);
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let tls = tokio::time::timeout(
            step,
            tokio_rustls::TlsConnector::from(self.config.clone()).connect(name, tcp),
        )
        .await
        .expect("handshake timed out")
        .expect("handshake");
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let mut req = Request::builder().method(method).uri(format!("https://{addr}{path}"));
        if !h2 {
            req = req.header("Host", addr);
        }
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::new())).expect("request");
        let io = TokioIo::new(tls);
        let resp = if h2 {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .expect("h2 handshake");
            tokio::spawn(conn);
            tokio::time::timeout(step, sender.send_request(req)).await.expect("timed out")
        } else {
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(io).await.expect("h1 handshake");
            tokio::spawn(conn);
            tokio::time::timeout(step, sender.send_request(req)).await.expect("timed out")
        }
        .expect("response");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(step, resp.into_body().collect())
            .await
            .expect("body timed out")
            .expect("body")
            .to_bytes();
        Resp { status, headers, body }
    }

    pub async fn get(&self, addr: &str, path: &str) -> Resp {
        self.request(addr, Method::GET, path, &[("Accept", "application/json")]).await
    }
}

/// A TLS front for a plain-HTTP server (the fake apiserver), serving `pki`'s certificate for
/// the loopback addresses, HTTP/1.1 by ALPN, the bytes passed on as they are. client-go and
/// kubectl send a kubeconfig's token or impersonation only to an `https://` server
/// (clientcmd reads the user's credentials only for a TLS transport), so a direct read "as
/// the client" by a real client needs one.
pub struct TlsFront {
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    pub async fn start(pki: &Pki, backend: std::net::SocketAddr) -> TlsFront {
        let issued = pki.server();
        let chain = pem::certs(issued.cert_pem.as_bytes()).expect("cert pem");
        let key = pem::private_key(issued.key_pem.as_bytes()).expect("key pem").expect("a key");
        let provider = kubeplex_net::tls::provider();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            // Connections live in the set, so they end with the front.
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                conns.spawn(async move {
                    let Ok(Ok(mut tls)) =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                    else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
                while conns.try_join_next().is_some() {}
            }
        });
        TlsFront { addr, task }
    }
}
