//! The hyper accept loop: HTTP/1.1 and HTTP/2 (prior knowledge) on one listener, upgrades
//! allowed, every connection a task owned by the loop (aborting the loop's task ends them all),
//! and graceful draining ([`Drain`]).

use std::convert::Infallible;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::limits::Limits;
use crate::timed;

/// Like [`serve`], with `limits` on the listener and its connections.
pub async fn serve_limited<H, F, B>(listener: TcpListener, handler: H, limits: Limits)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn_limits = limits.clone();
    accept_limited(listener, Drain::never(), &limits, move |stream| {
        let (handler, limits) = (handler.clone(), conn_limits.clone());
        async move { with_hyper_limited(stream, handler, Drain::never(), &limits).await }
    })
    .await
}

/// Serves HTTP/1.1 and HTTP/2 (prior knowledge) on `listener` with hyper until the calling task
/// is aborted. Every connection is a task owned by this one, so aborting it ends them all;
/// upgrades (exec, attach, port-forward) are allowed through.
pub async fn serve<H, F, B>(listener: TcpListener, handler: H)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_limited(listener, handler, Limits::none()).await
}

/// The graceful-shutdown signal of a listener: once it is given, the accept loop stops
/// accepting and every connection finishes the requests it is serving and closes (an idle one
/// at once). Cloned into each connection.
#[derive(Clone)]
pub struct Drain(tokio::sync::watch::Receiver<bool>);

/// Gives the [`Drain`] signal.
pub struct DrainSignal(tokio::sync::watch::Sender<bool>);

impl Drain {
    /// A signal and the drain it gives.
    pub fn new() -> (DrainSignal, Drain) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (DrainSignal(tx), Drain(rx))
    }

    /// A drain that is never signalled.
    pub fn never() -> Drain {
        Drain::new().1
    }

    pub fn is_draining(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the signal is given; never, if its sender is gone without giving it.
    pub async fn signaled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl DrainSignal {
    pub fn drain(&self) {
        self.0.send_replace(true);
    }
}

/// Accepts connections, each served by `conn` in a task of its own, until the calling task is
/// aborted or `drain` is signalled: then the listener is closed and this returns once every
/// connection has ended (each sees the same signal and closes when its requests are done; the
/// caller bounds the wait and aborts what is left). At most `limits.max_connections`
/// connections are open: at the cap
/// it stops accepting (new clients wait in the kernel's backlog) until one closes, rather than
/// accepting and dropping. The observer hears of connections opened and closed and of each
/// time the cap is reached.
pub async fn accept_limited<C, CF>(listener: TcpListener, drain: Drain, limits: &Limits, conn: C)
where
    C: Fn(TcpStream) -> CF,
    CF: Future<Output = ()> + Send + 'static,
{
    let cap = (limits.max_connections > 0)
        .then(|| std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections)));
    let mut conns = JoinSet::new();
    loop {
        // A slot first, then a connection: at the cap nothing is accepted.
        let permit = match &cap {
            None => None,
            Some(cap) => match cap.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    limits.cap_reached();
                    tokio::select! {
                        p = cap.clone().acquire_owned() => p.ok(),
                        Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                        () = drain.signaled() => break,
                    }
                }
            },
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            // Reap finished connections so the set does not grow without bound.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            () = drain.signaled() => break,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tune(&stream);
        let open = limits.opened();
        let served = conn(stream);
        conns.spawn(async move {
            served.await;
            drop((open, permit));
        });
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Serves one connection with hyper (HTTP/1.1 or HTTP/2, upgrades allowed), with the
/// listener's `limits` on request heads; when `drain` is signalled the connection shuts down
/// gracefully: it finishes the requests under way (HTTP/2: GOAWAY; HTTP/1.1: closes after the
/// response) and closes.
pub async fn with_hyper_limited<I, H, F, B>(io: I, handler: H, drain: Drain, limits: &Limits)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Request heads timed as Go's server times them (`timed`), knowing which requests are
    // being served.
    let phases = Arc::new(timed::Phases::default());
    let served = phases.clone();
    let svc = hyper::service::service_fn(move |req| {
        let in_flight = served.begin();
        let phases = served.clone();
        let fut = handler(req);
        async move {
            let resp = fut.await;
            if resp.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                phases.upgrade();
            }
            Ok::<_, Infallible>(resp.map(|body| timed::Tracked::new(body, in_flight)))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    limits.apply(&mut builder);
    let io = timed::Timed::new(io, phases.clone(), limits.idle_timeout, limits.header_read_timeout);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = drain.signaled() => {}
        () = timed::idle_http2(&phases, limits.idle_timeout) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// TCP keep-alive probes on an accepted connection, as the apiserver's listener sends them (Go's
/// `net.ListenConfig` default: idle 15 s, then every 15 s, 9 probes — k8s.io/apiserver
/// `CreateListener`): a client gone without a FIN (a node powered off, a partition) is found
/// out within ~2.5 minutes of silence, and its connection, watches and descriptors released,
/// instead of lingering until a write to it fails.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);
const KEEPALIVE_PROBES: u32 = 9;

/// An accepted connection's socket options: no Nagle delay (watch frames go out as they come),
/// and keep-alive probes ([`KEEPALIVE_IDLE`]).
pub fn tune(stream: &tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}

#[cfg(test)]
mod tests;
