//! Why one list or watch attempt of the reflector ended ([`ReflectError`]), as the upstream
//! said it: 410 Gone (relist), 429 with its `Retry-After`, another status, no answer, or data
//! that could not be read.

use std::time::Duration;

/// Why one list or watch attempt ended.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    #[error("upstream history no longer covers the resourceVersion (410 Gone)")]
    Gone,
    #[error("upstream is throttling (429)")]
    Throttled { retry_after: Option<Duration> },
    #[error("upstream answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("upstream request failed: {0}")]
    Transport(String),
    #[error("malformed upstream data: {0}")]
    Decode(String),
}

impl ReflectError {
    /// The upstream gave no answer of its own: no connection, a server error, throttling. A
    /// refusal (401, 403, 404, …) is an answer.
    pub fn unreachable(&self) -> bool {
        match self {
            ReflectError::Transport(_) | ReflectError::Throttled { .. } => true,
            ReflectError::Status { status, .. } => *status >= 500,
            ReflectError::Gone | ReflectError::Decode(_) => false,
        }
    }

    /// The upstream does not serve the collection (404: a resource's collection is never "not
    /// found" while it is served — a list in a namespace that does not exist is empty): its
    /// CRD was deleted, or its version is no longer served.
    pub fn not_served(&self) -> bool {
        matches!(self, ReflectError::Status { status: 404, .. })
    }

    /// The upstream refused kubeplex itself (401, 403): kubeplex's own identity may not list
    /// this, which retrying soon will not change.
    pub fn forbidden(&self) -> bool {
        matches!(self, ReflectError::Status { status: 401 | 403, .. })
    }
}
