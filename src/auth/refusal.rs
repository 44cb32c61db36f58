//! What the apiserver would answer a request the identity checks refuse; `serve` writes it
//! (`serve::body::refused`).

use crate::wire::status::Status;

/// A refused request.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// 401, as the apiserver's authentication filter writes it (JSON whatever was negotiated:
    /// fixture `err-unauthorized`).
    Unauthorized,
    /// 403 in the encoding the client negotiated for errors (its `Accept`), with the
    /// authorization filter's `X-Content-Type-Options: nosniff` (fixtures
    /// `err-forbidden-list`, `err-forbidden-get-protobuf`).
    Forbidden { status: Status, accept: Option<String> },
    /// Any other Status the apiserver's filters answer with (500, 503), as JSON.
    Status(Status),
    /// The upstream throttled the review that would decide it: answered as the apiserver's
    /// priority-and-fairness filter answers a request beyond its share (429, `Retry-After`,
    /// plain text).
    Throttled,
}
