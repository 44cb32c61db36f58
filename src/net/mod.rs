//! The accept loops shared by kubeplex's listeners and the fake apiserver's.

pub mod h1;
mod rewind;

use std::future::Future;

use http::{Request, Response};
use tokio::net::TcpListener;

use self::h1::{LeanCounters, ReqBody};
use self::rewind::Rewind;
use kubeplex_net::Body;

pub use kubeplex_net::serve;
use kubeplex_net::{accept_limited, with_hyper_limited, Drain, Limits};

/// Like [`serve`], with HTTP/1.1 body-less GETs (lists, gets, watches) served by the lean
/// server of [`h1`], which keeps no buffers while a watch is idle; a connection goes to hyper
/// from the first request that is not one of those (HTTP/2 from its preface).
pub async fn serve_lean<H, F>(listener: TcpListener, handler: H, counters: LeanCounters)
where
    H: Fn(Request<ReqBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    serve_lean_until(listener, handler, counters, Drain::never(), Limits::none()).await
}

/// Like [`serve_lean`], until `drain` is signalled (see `kubeplex_net::accept_limited`), within
/// the listener's `limits` (`kubeplex_net::accept_limited`; the lean server applies the header
/// and idle timeouts itself, hyper the rest).
pub async fn serve_lean_until<H, F>(
    listener: TcpListener,
    handler: H,
    counters: LeanCounters,
    drain: Drain,
    limits: Limits,
) where
    H: Fn(Request<ReqBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let conn_drain = drain.clone();
    let conn_limits = limits.clone();
    accept_limited(listener, drain, &limits, move |stream| {
        let (handler, counters, drain) = (handler.clone(), counters.clone(), conn_drain.clone());
        let limits = conn_limits.clone();
        async move {
            let hyper_handler = handler.clone();
            let hyper_drain = drain.clone();
            let hyper_limits = limits.clone();
            h1::connection(
                stream,
                handler,
                move |stream, read| async move {
                    with_hyper_limited(
                        Rewind::new(read, stream),
                        move |req| hyper_handler(h1::boxed(req)),
                        hyper_drain,
                        &hyper_limits,
                    )
                    .await
                },
                &counters,
                &drain,
                &limits,
            )
            .await
        }
    })
    .await
}

/// [`serve`], until `drain` is signalled, within the listener's `limits`.
pub async fn serve_until<H, F, B>(listener: TcpListener, handler: H, drain: Drain, limits: Limits)
where
    H: Fn(Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn_drain = drain.clone();
    let conn_limits = limits.clone();
    accept_limited(listener, drain, &limits, move |stream| {
        let (handler, drain, limits) = (handler.clone(), conn_drain.clone(), conn_limits.clone());
        async move { with_hyper_limited(stream, handler, drain, &limits).await }
    })
    .await
}
