//! Go's timing of HTTP/1.1 request heads, for the connections hyper serves. kube-apiserver's
//! `http.Server` waits up to `IdleTimeout` (90 s) for the next request on a keep-alive
//! connection and, from the request's first byte, `ReadHeaderTimeout` (32 s) for the rest of
//! its head (net/http `conn.serve`: the idle deadline is set before `bufr.Peek(4)`, the header
//! deadline after it). hyper has one timer that runs from when it starts waiting for a head,
//! idle time included, so an idle connection would be closed after the header timeout.
//!
//! [`Timed`] reads for hyper and keeps both deadlines itself, knowing from [`Phases`] whether a
//! request is being served (the handler was called and its response body is not finished):
//! then nothing is timed, as Go does not time a request being served. An idle connection is
//! closed quietly (end of stream); a head not finished in time is an error (hyper closes the
//! connection without an answer, as Go does). Upgraded connections (a 101 answer: exec, attach,
//! port-forward) are never timed. HTTP/2 connections (their preface) have no heads to time;
//! one with no stream open for the idle timeout is shut down gracefully (GOAWAY), as Go's
//! http2 server does with `IdleTimeout` ([`idle_http2`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::body::BoxError;

/// What a connection is doing, as its service sees it.
pub(crate) struct Phases {
    /// Requests whose handler was called and whose response body is not finished.
    in_flight: AtomicUsize,
    /// Requests whose handler was called, ever: a head whose deadline ran has been read.
    started: AtomicU64,
    /// Answered 101: the connection is the handler's stream now.
    upgraded: AtomicBool,
    /// The connection speaks HTTP/2.
    http2: AtomicBool,
    /// Since when no request has been in flight (`None` while one is).
    idle_since: Mutex<Option<Instant>>,
    /// The reader's, to be woken when the connection falls idle (its idle deadline starts).
    reader: Mutex<Option<Waker>>,
}

impl Default for Phases {
    fn default() -> Self {
        Phases {
            in_flight: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            upgraded: AtomicBool::new(false),
            http2: AtomicBool::new(false),
            idle_since: Mutex::new(Some(Instant::now())),
            reader: Mutex::new(None),
        }
    }
}

impl Phases {
    /// A request's handler is called: served until the guard (moved into its response
    /// body, [`Tracked`]) is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        let mut idle = self.idle_since.lock().unwrap_or_else(PoisonError::into_inner);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.started.fetch_add(1, Ordering::AcqRel);
        *idle = None;
        InFlight(self.clone())
    }

    /// A response was answered 101 Switching Protocols.
    pub(crate) fn upgrade(&self) {
        self.upgraded.store(true, Ordering::Release);
    }

    /// A response body is finished (or dropped), or its handler was.
    fn end(&self) {
        let mut idle = self.idle_since.lock().unwrap_or_else(PoisonError::into_inner);
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *idle = Some(Instant::now());
            drop(idle);
            if let Some(w) = self.reader.lock().unwrap_or_else(PoisonError::into_inner).take() {
                w.wake();
            }
        }
    }

    /// An HTTP/2 connection with no stream in flight: since when.
    fn http2_idle_since(&self) -> Option<Instant> {
        if !self.http2.load(Ordering::Acquire) {
            return None;
        }
        *self.idle_since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    fn remember(&self, waker: &Waker) {
        let mut reader = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        match reader.as_ref() {
            Some(w) if w.will_wake(waker) => {}
            _ => *reader = Some(waker.clone()),
        }
    }
}

/// What the reader is waiting for while no request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// A request is being served, or nothing has been awaited yet.
    Nothing,
    /// The next request's first byte (the idle deadline runs).
    Request,
    /// The rest of a head whose first byte came (the header deadline runs).
    Head,
}

/// HTTP/2's connection preface starts so; an HTTP/1.1 method never does.
const H2_PREFACE: &[u8] = b"PRI ";

/// A connection's reads, timed as Go times an HTTP/1.1 server's (see the module).
pub(crate) struct Timed<I> {
    io: I,
    phases: Arc<Phases>,
    idle: Option<Duration>,
    header: Option<Duration>,
    waiting: Waiting,
    deadline: Option<Pin<Box<Sleep>>>,
    /// `Phases::started` when `waiting` was set: a request begun since ends the wait.
    started: u64,
    /// The first bytes while it is not yet known whether they are HTTP/2's preface; `None`
    /// once it is.
    looking: Option<Vec<u8>>,
    /// HTTP/2 or upgraded: never timed.
    off: bool,
}

impl<I> Timed<I> {
    pub(crate) fn new(
        io: I,
        phases: Arc<Phases>,
        idle: Option<Duration>,
        header: Option<Duration>,
    ) -> Self {
        Timed {
            io,
            phases,
            idle,
            header,
            waiting: Waiting::Nothing,
            deadline: None,
            started: 0,
            looking: Some(Vec::with_capacity(H2_PREFACE.len())),
            off: idle.is_none() && header.is_none(),
        }
    }

    fn arm(&mut self, waiting: Waiting) {
        self.waiting = waiting;
        let after = match waiting {
            Waiting::Nothing => None,
            Waiting::Request => self.idle,
            Waiting::Head => self.header,
        };
        match (after, self.deadline.as_mut()) {
            // One timer per connection, reset for each wait.
            (Some(d), Some(timer)) => timer.as_mut().reset(Instant::now() + d),
            (Some(d), None) => self.deadline = Some(Box::pin(tokio::time::sleep(d))),
            (None, _) => self.deadline = None,
        }
    }

    /// Looks at the connection's first bytes for HTTP/2's preface.
    fn sniff(&mut self, bytes: &[u8]) {
        let Some(seen) = self.looking.as_mut() else { return };
        let want = H2_PREFACE.len() - seen.len();
        seen.extend_from_slice(&bytes[..bytes.len().min(want)]);
        if !H2_PREFACE.starts_with(seen) {
            self.looking = None;
        } else if seen.len() == H2_PREFACE.len() {
            self.off = true;
            self.phases.http2.store(true, Ordering::Release);
            self.looking = None;
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Timed<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.off || this.phases.upgraded.load(Ordering::Acquire) {
            this.off = true;
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        // A head read since the deadline was set: the wait is over (the next starts afresh).
        let started = this.phases.started.load(Ordering::Acquire);
        if started != this.started {
            this.started = started;
            this.waiting = Waiting::Nothing;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got = &buf.filled()[before..];
                if !got.is_empty() {
                    this.sniff(got);
                    if !this.off && !this.phases.busy() && this.waiting != Waiting::Head {
                        this.arm(Waiting::Head);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                this.phases.remember(cx.waker());
                if this.phases.busy() {
                    this.waiting = Waiting::Nothing;
                    return Poll::Pending;
                }
                if this.waiting == Waiting::Nothing {
                    this.arm(Waiting::Request);
                }
                let expired =
                    this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                match this.waiting {
                    // An idle keep-alive connection: closed quietly, as Go closes it.
                    Waiting::Request => Poll::Ready(Ok(())),
                    _ => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request head not received within the header read timeout",
                    ))),
                }
            }
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Timed<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// Resolves once the connection is HTTP/2 and has had no stream in flight for `idle` (never
/// without `idle`): the caller then shuts it down gracefully.
pub(crate) async fn idle_http2(phases: &Phases, idle: Option<Duration>) {
    let Some(idle) = idle else { return std::future::pending().await };
    loop {
        let wait = match phases.http2_idle_since() {
            Some(since) if since.elapsed() >= idle => return,
            Some(since) => idle - since.elapsed(),
            // HTTP/1.1 (timed by `Timed`), not known yet, or busy: look again later.
            None => idle,
        };
        tokio::time::sleep(wait).await;
    }
}

/// A request being served, until dropped.
pub(crate) struct InFlight(Arc<Phases>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body whose request is served until it is finished (dropped).
pub(crate) struct Tracked {
    body: http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>,
    _served: InFlight,
}

impl Tracked {
    pub(crate) fn new<B>(body: B, served: InFlight) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        Tracked { body: body.map_err(Into::into).boxed_unsync(), _served: served }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
