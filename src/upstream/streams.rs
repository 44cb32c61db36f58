//! Upstream connections kept under the apiserver's limit of concurrent HTTP/2 streams.
//!
//! The kube-apiserver lets each HTTP/2 connection carry 100 streams at once
//! (k8s.io/apiserver `secure_serving.go`: `MaxConcurrentStreams = 100` unless
//! `--http2-max-streams-per-connection` says otherwise); a request beyond that waits until a
//! stream closes. A watch holds its stream for as long as it runs, so one connection shared by
//! a pool's passed-through watches would make every other request — writes, reviews, proofs —
//! wait behind them, forever. client-go's transport opens another connection instead
//! (`http2.Transport.StrictMaxConcurrentStreams` false): so does [`Spread`]. Each of its
//! connections (a hyper client of its own, one HTTP/2 connection per server) carries at most
//! [`STREAMS_PER_CONNECTION`] requests at once, counted from the request until its response's
//! body is dropped ([`ResponseBody`]).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// Requests one connection carries at once: the apiserver's 100, less a few for streams it has
/// not yet seen closed.
pub const STREAMS_PER_CONNECTION: usize = 96;
/// Connections toward one server at most (then the least busy takes more).
pub const MAX_CONNECTIONS: usize = 128;

/// A set of clients of one kind toward the same server, each with its count of requests in
/// flight. `C` is the client (cloned to send).
pub struct Spread<C> {
    conns: Mutex<Vec<(C, Arc<AtomicUsize>)>>,
    make: Box<dyn Fn() -> C + Send + Sync>,
}

/// One request's place on a connection, given back when dropped.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<C: Clone> Spread<C> {
    /// `make` builds a client with connections of its own; the first is built now.
    pub fn new(make: impl Fn() -> C + Send + Sync + 'static) -> Spread<C> {
        Spread::with_first(make(), make)
    }

    /// Starting with `first`; `make` builds the others when needed.
    pub fn with_first(first: C, make: impl Fn() -> C + Send + Sync + 'static) -> Spread<C> {
        let first = (first, Arc::new(AtomicUsize::new(0)));
        Spread { conns: Mutex::new(vec![first]), make: Box::new(make) }
    }

    /// The client a request goes on, and its slot there: the first with room, else a new one,
    /// else (at [`MAX_CONNECTIONS`]) the least busy.
    pub fn pick(&self) -> (C, Slot) {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match conns
            .iter()
            .position(|(_, n)| n.load(Ordering::Acquire) < STREAMS_PER_CONNECTION)
        {
            Some(at) => at,
            None if conns.len() < MAX_CONNECTIONS => {
                conns.push(((self.make)(), Arc::new(AtomicUsize::new(0))));
                conns.len() - 1
            }
            None => {
                (0..conns.len()).min_by_key(|i| conns[*i].1.load(Ordering::Acquire)).unwrap_or(0)
            }
        };
        let (client, open) = &conns[at];
        open.fetch_add(1, Ordering::AcqRel);
        (client.clone(), Slot(open.clone()))
    }

    /// Connections made so far.
    pub fn connections(&self) -> usize {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// An upstream response's body, holding its request's [`Slot`] until it is dropped (a watch's
/// for as long as it is read).
#[derive(Debug)]
pub struct ResponseBody {
    inner: Incoming,
    slot: Option<Slot>,
}

impl ResponseBody {
    pub(super) fn new(inner: Incoming, slot: Option<Slot>) -> ResponseBody {
        ResponseBody { inner, slot }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // The stream is over once the body ends or fails: its place is free at once, whoever
        // still holds the response.
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
