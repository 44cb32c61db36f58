//! Limits of a client listener, as Go's `http.Server` fields that kube-apiserver sets
//! (k8s.io/apiserver `SecureServingInfo.Serve`: `ReadHeaderTimeout: 32s`, `IdleTimeout: 90s`,
//! `MaxHeaderBytes: 1 MiB`), plus a cap on open connections. [`Limits::none`] is the
//! unlimited listener (the fake apiserver's, tests).

use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::conn::auto;

/// kube-apiserver's `http.Server` `ReadHeaderTimeout` ("just shy of requestTimeoutUpperBound").
pub const APISERVER_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout` (http.DefaultTransport's keep-alive timeout).
pub const APISERVER_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// kube-apiserver's `MaxHeaderBytes`.
pub const APISERVER_MAX_HEADER_BYTES: usize = 1 << 20;

/// Hears of a listener's connections (for metrics).
pub trait ConnObserver: Send + Sync {
    fn opened(&self);
    fn closed(&self);
    /// The listener reached its connection cap and stopped accepting.
    fn cap_reached(&self);
}

#[derive(Clone, Default)]
pub struct Limits {
    /// Open connections at most; 0: no cap.
    pub max_connections: usize,
    /// A request head must arrive whole within this from its first byte (a slow-loris client
    /// is closed); `None`: no limit.
    pub header_read_timeout: Option<Duration>,
    /// An HTTP/1.1 keep-alive connection with no request for this long is closed. `None`: no
    /// limit.
    pub idle_timeout: Option<Duration>,
    /// Largest request head (HTTP/1.1) or header list (HTTP/2); a larger one gets 431 Request
    /// Header Fields Too Large. 0: hyper's default.
    pub max_header_bytes: usize,
    pub observer: Option<Arc<dyn ConnObserver>>,
}

/// A connection counted open until dropped.
pub struct Open(Option<Arc<dyn ConnObserver>>);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(o) = &self.0 {
            o.closed();
        }
    }
}

impl Limits {
    pub fn none() -> Limits {
        Limits::default()
    }

    /// kube-apiserver's own (k8s.io/apiserver `SecureServingInfo.Serve`), with no cap on
    /// connections.
    pub fn apiserver() -> Limits {
        Limits {
            max_connections: 0,
            header_read_timeout: Some(APISERVER_HEADER_READ_TIMEOUT),
            idle_timeout: Some(APISERVER_IDLE_TIMEOUT),
            max_header_bytes: APISERVER_MAX_HEADER_BYTES,
            observer: None,
        }
    }

    pub(crate) fn opened(&self) -> Open {
        if let Some(o) = &self.observer {
            o.opened();
        }
        Open(self.observer.clone())
    }

    pub(crate) fn cap_reached(&self) {
        if let Some(o) = &self.observer {
            o.cap_reached();
        }
    }

    /// Sets hyper's side of the limits (the head and idle timeouts are `timed::Timed`'s).
    pub(crate) fn apply(&self, builder: &mut auto::Builder<hyper_util::rt::TokioExecutor>) {
        if self.max_header_bytes > 0 {
            // hyper refuses a read buffer under 8 KiB; the head must fit in it, or 431.
            builder.http1().max_buf_size(self.max_header_bytes.max(8192));
            let list = u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX);
            builder.http2().max_header_list_size(list);
        }
    }
}
