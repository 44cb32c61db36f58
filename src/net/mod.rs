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
use kubeplex_net::{accept, with_hyper};

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
