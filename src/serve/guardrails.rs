//! Guardrails on passthrough: what protects the apiserver when a client misbehaves. They answer
//! as the apiserver's own filters do, so a client sees the same thing whether kubeplex or the
//! apiserver sheds it:
//!
//! - in-flight limits, as k8s.io/apiserver `filters.WithMaxInFlightLimit`: read-only (GET,
//!   HEAD) and mutating requests count against separate limits (400 and 200 by default, 0 is
//!   no limit); long-running requests (the `LongRunningRequestCheck`: watches and the `attach`,
//!   `exec`, `log`, `portforward`, `proxy` subresources) are exempt. A request over the limit
//!   waits for a slot as the apiserver's priority and fairness queues it — at most a quarter of
//!   the request timeout (`WithPriorityAndFairness(.., c.RequestTimeout/4)`: 15 s), and no more
//!   requests waiting than the limit lets in flight — and is refused only when the wait runs
//!   out or the queue is full, with `tooManyRequests`: 429, `Retry-After: 1`, the text of Go's
//!   `http.Error`. (Refused at once, as the non-APF filter does, a pool's node tiers got 429s
//!   for writes the apiserver would have queued: 9,057 in an hour at N = 500.) A slot is held
//!   until the answer's body has been sent, as the filter holds it until the handler ends.
//! - the request body limit, as the apiserver's `MaxRequestBodyBytes` (3 MiB): a body declared
//!   longer gets the 413 Status `RequestEntityTooLarge` and is never forwarded.
//!
//! Cached reads never come here: they cost the apiserver nothing.
//!
//! And on every client listener ([`Guardrails::limits`], applied by `kubeplex_net`), as the
//! apiserver's own `http.Server` (k8s.io/apiserver `SecureServingInfo.Serve`): a request head
//! must arrive within 32 s (a slow-loris client is closed), an idle keep-alive connection is
//! closed after 90 s, heads over 1 MiB get 431; and at most 10000 connections are open (at the
//! cap the listener stops accepting until one closes).

use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderMap, Method, Response};
use http_body_util::BodyExt;
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::body::{self, Body};
use super::request::{Class, Verb};
use crate::wire::request::ApiPath;
use crate::wire::status::Status;

/// The apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_INFLIGHT: usize = 400;
/// The apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_INFLIGHT: usize = 200;
/// How long a request over its in-flight limit waits for a slot: the apiserver's priority and
/// fairness queue wait, a quarter of its 60-s request timeout.
pub const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(15);
/// The apiserver's `MaxRequestBodyBytes` default (3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 3 * 1024 * 1024;
/// The apiserver's `http.Server` `ReadHeaderTimeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration =
    kubeplex_net::limits::APISERVER_HEADER_READ_TIMEOUT;
/// The apiserver's `IdleTimeout`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = kubeplex_net::limits::APISERVER_IDLE_TIMEOUT;
/// The apiserver's `MaxHeaderBytes`.
pub const DEFAULT_MAX_HEADER_BYTES: usize = kubeplex_net::limits::APISERVER_MAX_HEADER_BYTES;
/// Open client connections at most.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Subresources the apiserver's `LongRunningRequestCheck` exempts (kube-apiserver's
/// `BasicLongRunningRequestCheck(..., {"attach","exec","proxy","log","portforward"})`).
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

/// The passthrough limits; 0 means no limit (as the apiserver's in-flight flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guardrails {
    pub max_requests_inflight: usize,
    pub max_mutating_requests_inflight: usize,
    /// How long a request over its limit waits for a slot (zero: refused at once).
    pub queue_wait: Duration,
    pub max_request_body_bytes: u64,
    /// Listener limits (see the module docs); zero durations and counts: none.
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_connections: usize,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails {
            max_requests_inflight: DEFAULT_MAX_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_INFLIGHT,
            queue_wait: DEFAULT_QUEUE_WAIT,
            max_request_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("guardrail metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl Guardrails {
    /// The client listener's limits, reported to `registry`'s connection metrics.
    pub fn limits(&self, registry: &Registry) -> Result<kubeplex_net::Limits, Error> {
        let open = prometheus::IntGauge::new(
            "kubeplex_client_connections",
            "Client connections open on the API listener.",
        )?;
        let capped = prometheus::IntCounter::new(
            "kubeplex_client_connection_cap_reached_total",
            "Times the API listener reached maxConnections and stopped accepting until a connection closed.",
        )?;
        registry.register(Box::new(open.clone()))?;
        registry.register(Box::new(capped.clone()))?;
        let nonzero = |d: Duration| (!d.is_zero()).then_some(d);
        Ok(kubeplex_net::Limits {
            max_connections: self.max_connections,
            header_read_timeout: nonzero(self.header_read_timeout),
            idle_timeout: nonzero(self.idle_timeout),
            max_header_bytes: self.max_header_bytes,
            observer: Some(Arc::new(Connections { open, capped })),
        })
    }
}

/// The listener's connection metrics.
struct Connections {
    open: prometheus::IntGauge,
    capped: prometheus::IntCounter,
}

impl kubeplex_net::ConnObserver for Connections {
    fn opened(&self) {
        self.open.inc();
    }
    fn closed(&self) {
        self.open.dec();
    }
    fn cap_reached(&self) {
        self.capped.inc();
    }
}

/// The kind label, as the apiserver's `apiserver_current_inflight_requests{request_kind}`.
#[derive(Debug, Clone, Copy)]
enum Kind {
    ReadOnly,
    Mutating,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::ReadOnly => "readOnly",
            Kind::Mutating => "mutating",
        }
    }
}

/// Admits passthrough requests within the limits.
pub struct Limiter {
    max_body: u64,
    read_only: Option<Seats>,
    mutating: Option<Seats>,
    queue_wait: Duration,
    inflight: IntGaugeVec,
    waiting: IntGaugeVec,
    dropped: IntCounterVec,
}

/// One kind's slots, and its bounded queue of requests waiting for one.
struct Seats {
    slots: Arc<Semaphore>,
    /// Places in the queue: as many as slots.
    queue: Arc<Semaphore>,
}

/// A held in-flight slot: released (and the gauge lowered) when dropped.
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    gauge: prometheus::IntGauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Slot {
    /// Holds the slot until `resp`'s body has been sent (or dropped).
    pub fn hold_until_sent(self, resp: Response<Body>) -> Response<Body> {
        let (parts, b) = resp.into_parts();
        let b = b
            .map_frame(move |f| {
                let _ = &self;
                f
            })
            .boxed();
        Response::from_parts(parts, b)
    }
}

impl Limiter {
    pub fn new(g: Guardrails, registry: &Registry) -> Result<Limiter, Error> {
        let inflight = IntGaugeVec::new(
            Opts::new(
                "kubeplex_passthrough_inflight_requests",
                "Passthrough requests in flight, by request_kind (readOnly, mutating)",
            ),
            &["request_kind"],
        )?;
        let dropped = IntCounterVec::new(
            Opts::new(
                "kubeplex_passthrough_dropped_requests_total",
                "Passthrough requests answered 429 over the in-flight limit, by request_kind",
            ),
            &["request_kind"],
        )?;
        let waiting = IntGaugeVec::new(
            Opts::new(
                "kubeplex_passthrough_waiting_requests",
                "Passthrough requests waiting for an in-flight slot, by request_kind",
            ),
            &["request_kind"],
        )?;
        registry.register(Box::new(inflight.clone()))?;
        registry.register(Box::new(waiting.clone()))?;
        registry.register(Box::new(dropped.clone()))?;
        // Both kinds exported from the start (at 0), so rates and alerts see them before the
        // first refusal.
        for kind in [Kind::ReadOnly, Kind::Mutating] {
            inflight.with_label_values(&[kind.as_str()]);
            waiting.with_label_values(&[kind.as_str()]);
            dropped.with_label_values(&[kind.as_str()]);
        }
        let seats = |n: usize| {
            (n > 0).then(|| Seats {
                slots: Arc::new(Semaphore::new(n)),
                queue: Arc::new(Semaphore::new(n)),
            })
        };
        Ok(Limiter {
            max_body: g.max_request_body_bytes,
            read_only: seats(g.max_requests_inflight),
            mutating: seats(g.max_mutating_requests_inflight),
            queue_wait: g.queue_wait,
            inflight,
            waiting,
            dropped,
        })
    }

    /// A slot for the passthrough request `class` (waited for, up to the queue wait, when its
    /// kind is at its limit), `Ok(None)` for a long-running one, or the answer that refuses it.
    pub async fn admit(
        &self,
        method: &Method,
        class: &Class,
        headers: &HeaderMap,
    ) -> Result<Option<Slot>, Box<Response<Body>>> {
        if let Some(len) = content_length(headers) {
            if self.max_body > 0 && len > self.max_body {
                return Err(Box::new(self.too_large()));
            }
        }
        if long_running(class) {
            return Ok(None);
        }
        let kind = if matches!(*method, Method::GET | Method::HEAD) {
            Kind::ReadOnly
        } else {
            Kind::Mutating
        };
        let seats = match kind {
            Kind::ReadOnly => &self.read_only,
            Kind::Mutating => &self.mutating,
        };
        let permit = match seats {
            Some(seats) => match self.seat(seats, kind).await {
                Some(p) => Some(p),
                None => {
                    self.dropped.with_label_values(&[kind.as_str()]).inc();
                    return Err(Box::new(body::too_many_requests()));
                }
            },
            None => None,
        };
        let gauge = self.inflight.with_label_values(&[kind.as_str()]);
        gauge.inc();
        Ok(Some(Slot { _permit: permit, gauge }))
    }

    /// A slot at once, or after waiting in the queue (when it has a place) for at most the
    /// queue wait; `None`: refused.
    async fn seat(&self, seats: &Seats, kind: Kind) -> Option<OwnedSemaphorePermit> {
        if let Ok(p) = seats.slots.clone().try_acquire_owned() {
            return Some(p);
        }
        if self.queue_wait.is_zero() {
            return None;
        }
        let _place = seats.queue.clone().try_acquire_owned().ok()?;
        let gauge = self.waiting.with_label_values(&[kind.as_str()]);
        gauge.inc();
        let seated =
            tokio::time::timeout(self.queue_wait, seats.slots.clone().acquire_owned()).await;
        gauge.dec();
        seated.ok()?.ok()
    }
}

impl Limiter {
    /// A request body of unknown length (chunked, or HTTP/2 without `Content-Length`) read
    /// whole, at most the limit: as the apiserver reads at most limit+1 bytes of a body and
    /// answers 413 past it, a longer one is refused here and never forwarded. Bodies of known
    /// length (checked by [`Limiter::admit`]) and bodiless requests stream as they are.
    pub async fn bounded_body(
        &self,
        req: http::Request<Body>,
    ) -> Result<http::Request<Body>, Box<Response<Body>>> {
        use http_body::Body as _;
        let known = req.body().size_hint().exact().is_some();
        if self.max_body == 0 || known || req.body().is_end_stream() {
            return Ok(req);
        }
        let (parts, mut b) = req.into_parts();
        let limit = usize::try_from(self.max_body).unwrap_or(usize::MAX);
        let mut read = bytes::BytesMut::new();
        while let Some(frame) = b.frame().await {
            let Ok(frame) = frame else {
                // The client went away or sent a broken body: nothing to forward.
                return Err(Box::new(body::status(&Status::new(
                    400,
                    "BadRequest",
                    "the request body could not be read".to_string(),
                ))));
            };
            if let Ok(data) = frame.into_data() {
                if read.len() + data.len() > limit {
                    return Err(Box::new(self.too_large()));
                }
                read.extend_from_slice(&data);
            }
        }
        Ok(http::Request::from_parts(parts, body::full(read.freeze())))
    }

    fn too_large(&self) -> Response<Body> {
        body::status(&Status::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {}", self.max_body),
        ))
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// The apiserver's `LongRunningRequestCheck`: watches, and the streaming subresources.
fn long_running(class: &Class) -> bool {
    if class.verb == Verb::Watch {
        return true;
    }
    match &class.path {
        ApiPath::Resource(rp) => {
            rp.subresource.as_deref().is_some_and(|s| LONG_RUNNING_SUBRESOURCES.contains(&s))
        }
        _ => false,
    }
}
