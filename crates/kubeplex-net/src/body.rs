//! The streamed body every part shares.

/// The error of a streamed body: anything, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A streamed body, for requests and responses alike (what the proxy forwards, what it
/// answers with, what the upstream client sends).
pub type Body = http_body_util::combinators::BoxBody<bytes::Bytes, BoxError>;
