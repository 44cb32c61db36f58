//! A layer written as one async function of the request and the rest of the stack below it
//! (`next`), for the steps of a request path that do their work before and after the inner
//! call: answer the request themselves, change it, or work on the answer. Like axum's
//! `middleware::from_fn`; the price is one boxed future per step, which only the passthrough
//! path pays (the cache's hot path goes through `stack`'s hand-written layers).

use std::convert::Infallible;
use std::future::Future;
use std::task::{Context, Poll};

use futures_util::future::{BoxFuture, FutureExt};
use http::Response;
use tower::{Layer, Service};

use super::body::Body;

/// The layer of `step`: `step(request, next)` answers, calling `next` (a ready clone of the
/// inner service) when the request goes on.
pub fn around<F>(step: F) -> AroundLayer<F> {
    AroundLayer { step }
}

#[derive(Clone)]
pub struct AroundLayer<F> {
    step: F,
}

impl<F: Clone, S> Layer<S> for AroundLayer<F> {
    type Service = Around<F, S>;
    fn layer(&self, inner: S) -> Around<F, S> {
        Around { step: self.step.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Around<F, S> {
    step: F,
    inner: S,
}

impl<F, S, R, Fut> Service<R> for Around<F, S>
where
    F: Fn(R, S) -> Fut,
    Fut: Future<Output = Response<Body>> + Send + 'static,
    S: Clone,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    /// Always ready: the inner service is cloned for each request (reference counts), and the
    /// services of the request paths are always ready themselves.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        (self.step)(req, self.inner.clone()).map(Ok).boxed()
    }
}
