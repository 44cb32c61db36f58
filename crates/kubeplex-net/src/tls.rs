//! The TLS listener, kube-apiserver's secure serving in small: a serving certificate and key
//! from files (`--tls-cert-file`, `--tls-private-key-file`), reloaded when they change; HTTP/2
//! or HTTP/1.1 by ALPN; client certificates requested and verified against a client-CA bundle
//! (`--client-ca-file`), the user they name put into every request's extensions.

mod config;
pub mod pem;
mod provider;
mod reload;
mod request_cert;
mod verify;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

pub use self::config::{TlsConfig, TlsError, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_RELOAD_INTERVAL};
pub use self::provider::provider;
use self::reload::Reloader;
pub use self::verify::Peer;

/// Why one connection's handshake failed (that connection ends; the listener goes on).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("tls handshake not done after {0:?}")]
    Timeout(Duration),
    #[error("tls handshake: {0}")]
    Tls(#[source] std::io::Error),
}

/// Accepts TLS connections with the current certificate files. Cheap to clone (shared).
#[derive(Clone)]
pub struct TlsAcceptor {
    reloader: Arc<Reloader>,
    handshake_timeout: Duration,
}

/// One accepted TLS connection and its client's certificate.
pub struct TlsConn<IO> {
    pub stream: tokio_rustls::server::TlsStream<IO>,
    /// Call [`Peer::annotate`] on each request's extensions.
    pub peer: Peer,
}

impl TlsAcceptor {
    /// Loads the files. A missing, unreadable or invalid file, or a key that is not the
    /// certificate's, is an error naming it: kubeplex does not start without its certificate.
    pub fn new(config: TlsConfig) -> Result<Self, TlsError> {
        let handshake_timeout = config.handshake_timeout;
        Ok(Self { reloader: Arc::new(Reloader::new(config)?), handshake_timeout })
    }

    /// Runs the server side of the handshake, bounded by the handshake timeout.
    pub async fn accept<IO>(&self, io: IO) -> Result<TlsConn<IO>, HandshakeError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let loaded = self.reloader.current();
        let acceptor = tokio_rustls::TlsAcceptor::from(loaded.server.clone());
        let stream = tokio::time::timeout(self.handshake_timeout, acceptor.accept(io))
            .await
            .map_err(|_| HandshakeError::Timeout(self.handshake_timeout))?
            .map_err(HandshakeError::Tls)?;
        let peer = Peer::new(self.reloader.clone(), stream.get_ref().1.peer_certificates());
        Ok(TlsConn { stream, peer })
    }
}

/// [`crate::serve`] over TLS: every connection a task owned by this one (aborting it ends
/// them all), its handshake bounded in time, then HTTP/2 or HTTP/1.1 (upgrades allowed). Each
/// request carries the client certificate's outcome in its extensions ([`crate::ClientCert`]
/// or [`crate::RejectedClientCert`], see [`Peer::annotate`]). Until `drain` is signalled, within
/// the listener's `limits` (see [`crate::accept_limited`]); the handshake is bounded by its own
/// timeout, then the request head by the header timeout.
pub async fn serve_tls_limited<H, F, B>(
    listener: TcpListener,
    tls: TlsAcceptor,
    handler: H,
    drain: crate::serve::Drain,
    limits: crate::limits::Limits,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn_drain = drain.clone();
    let conn_limits = limits.clone();
    crate::serve::accept_limited(listener, drain, &limits, move |stream| {
        let (tls, handler, drain) = (tls.clone(), handler.clone(), conn_drain.clone());
        let limits = conn_limits.clone();
        async move {
            let remote = stream.peer_addr().ok();
            let TlsConn { stream, peer } = match tls.accept(stream).await {
                Ok(conn) => conn,
                Err(error) => {
                    // Scanners, health checks, clients that distrust our certificate: routine,
                    // as the apiserver logs them (at V(5)).
                    tracing::debug!(?remote, %error, "tls handshake failed");
                    return;
                }
            };
            crate::serve::with_hyper_limited(
                stream,
                move |mut req: Request<Incoming>| {
                    peer.annotate(req.extensions_mut());
                    handler(req)
                },
                drain,
                &limits,
            )
            .await
        }
    })
    .await
}

#[cfg(test)]
mod tests;
