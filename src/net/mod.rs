//! The accept loops shared by kubeplex's listeners and the fake apiserver's.

pub mod h1;
mod rewind;

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use self::h1::{LeanCounters, ReqBody};
use self::rewind::Rewind;
use crate::serve::body::Body;

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
    accept(listener, move |stream| with_hyper(stream, handler.clone())).await
}

/// Like [`serve`], with HTTP/1.1 body-less GETs (lists, gets, watches) served by the lean
/// server of [`h1`], which keeps no buffers while a watch is idle; a connection goes to hyper
/// from the first request that is not one of those (HTTP/2 from its preface).
pub async fn serve_lean<H, F>(listener: TcpListener, handler: H, counters: LeanCounters)
where
    H: Fn(Request<ReqBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    accept(listener, move |stream| {
        let (handler, counters) = (handler.clone(), counters.clone());
        async move {
            let hyper_handler = handler.clone();
            h1::connection(
                stream,
                handler,
                move |stream, read| {
                    with_hyper(Rewind::new(read, stream), move |req| hyper_handler(h1::boxed(req)))
                },
                &counters,
            )
            .await
        }
    })
    .await
}

async fn accept<C, CF>(listener: TcpListener, conn: C)
where
    C: Fn(TcpStream) -> CF,
    CF: Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            // Reap finished connections so the set does not grow without bound.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        conns.spawn(conn(stream));
    }
}

async fn with_hyper<I, H, F, B>(io: I, handler: H)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let svc = hyper::service::service_fn(move |req| {
        let fut = handler(req);
        async move { Ok::<_, Infallible>(fut.await) }
    });
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(TokioIo::new(io), svc)
        .await;
}
