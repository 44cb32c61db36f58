//! A cold cache's first load from the answer to the read that started it
//! (`live::reflector::fed`): the answer, passed through, goes to the reader as it comes —
//! as fast as directly — and, when it is a whole `200` list in the cache's own encoding, to the
//! cache once complete. The reader never waits for the cache.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body::{Frame, SizeHint};

use crate::live::reflector::fed::{Fed, Feeder};
use crate::live::reflector::MAX_LIST_PAGE_BYTES;
use crate::serve::body::{Body, BoxError};
use crate::wire::gzip;

/// The largest answer kept to feed a cache: the reflector's own limit on a list. Past it the
/// reader still gets all of it, and the cache loads by itself.
const MAX_FED_BYTES: usize = MAX_LIST_PAGE_BYTES;

/// What feeds a cache's first load: the sender, whether the read asked for the most recent
/// state, the cache's media type, and when the read was sent upstream.
pub struct Feeding {
    pub feeder: Feeder,
    pub consistent: bool,
    pub media_type: &'static str,
    pub requested: std::time::Instant,
}

/// `resp`, whose body also feeds the cache when it is a whole list in the cache's encoding.
pub fn tee(resp: Response<Body>, feeding: Feeding) -> Response<Body> {
    let content_type = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if resp.status() != StatusCode::OK || content_type != Some(feeding.media_type) {
        // Dropped: the cache loads by itself.
        return resp;
    }
    let gzipped = gzip::is_gzip(resp.headers());
    let (parts, body) = resp.into_parts();
    let tee = Tee { body, kept: Vec::new(), len: 0, feeding: Some(feeding), gzipped };
    Response::from_parts(parts, http_body_util::BodyExt::boxed(tee))
}

/// The answer's body on its way to the reader, its frames kept (shared, not copied) until it
/// ends: then they feed the cache.
struct Tee {
    body: Body,
    kept: Vec<Bytes>,
    len: usize,
    /// `None` once the cache can no longer be fed (too large, a failed read): it loads itself.
    feeding: Option<Feeding>,
    gzipped: bool,
}

impl Tee {
    fn fed(&mut self) {
        let Some(feeding) = self.feeding.take() else { return };
        // The chunks as they came: the reflector joins them, not the reader's last poll.
        let fed = Fed {
            requested: feeding.requested,
            consistent: feeding.consistent,
            body: std::mem::take(&mut self.kept),
            gzipped: self.gzipped,
        };
        let _ = feeding.feeder.send(fed);
    }
}

impl http_body::Body for Tee {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(_)) = (frame.data_ref(), &this.feeding) {
                    this.len += data.len();
                    if this.len > MAX_FED_BYTES {
                        this.feeding = None;
                        this.kept = Vec::new();
                    } else {
                        this.kept.push(data.clone());
                    }
                }
                // A body that knows it has ended (its length was announced) is not polled again.
                if this.body.is_end_stream() {
                    this.fed();
                }
            }
            Poll::Ready(Some(Err(_))) => {
                this.feeding = None;
                this.kept = Vec::new();
            }
            Poll::Ready(None) => this.fed(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
