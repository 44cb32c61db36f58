//! Response bodies the upstream may compress: kubeplex asks for gzip as Go clients do (their
//! transport sends `Accept-Encoding: gzip` on every request), the apiserver compresses what it
//! answers over 128 KiB (lists, discovery), and kube-apiserver 1.37's `WatchListCompression`
//! compresses a streaming list with one gzip member per flush. Bodies are read decompressed,
//! bounded by the decompressed size.

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT_ENCODING};
use http::{HeaderMap, Response};
use http_body_util::BodyExt;

use super::streams::ResponseBody;
use crate::wire::gzip::{self, Gunzip, GunzipError};

/// The header a request sends to accept a compressed answer.
pub fn accept_gzip(headers: &mut HeaderMap) {
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("reading the body: {0}")]
    Transport(String),
    #[error("body over {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Gzip(#[from] GunzipError),
}

/// A whole body, decompressed if the upstream compressed it; more than `limit` bytes either
/// way (as sent, or decompressed) is refused.
pub async fn read(resp: Response<ResponseBody>, limit: usize) -> Result<Bytes, BodyError> {
    let gzipped = gzip::is_gzip(resp.headers());
    let body = http_body_util::Limited::new(resp.into_body(), limit)
        .collect()
        .await
        .map_err(|e| match e.downcast::<http_body_util::LengthLimitError>() {
            Ok(_) => BodyError::TooLarge(limit),
            Err(e) => BodyError::Transport(e.to_string()),
        })?
        .to_bytes();
    if !gzipped {
        return Ok(body);
    }
    Ok(gzip::gunzip(&body, limit)?.into())
}

/// A streamed body's data, decompressed as it arrives if the upstream compressed it.
pub struct Chunks {
    body: ResponseBody,
    gunzip: Option<Gunzip>,
}

impl Chunks {
    pub fn new(resp: Response<ResponseBody>) -> Chunks {
        // A watch stream has no end to bound it: each chunk's output is bounded by the chunk
        // (deflate's ratio), and the reader bounds each event it assembles.
        let gunzip = gzip::is_gzip(resp.headers()).then(|| Gunzip::new(usize::MAX));
        Chunks { body: resp.into_body(), gunzip }
    }

    /// The next data, `None` at the end of the body. Cancel-safe: what arrived is kept.
    pub async fn next(&mut self) -> Option<Result<Bytes, BodyError>> {
        loop {
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    let Some(gunzip) = &mut self.gunzip else { return Some(Ok(data)) };
                    match gunzip.push(&data) {
                        Ok(out) if out.is_empty() => continue,
                        Ok(out) => return Some(Ok(out.into())),
                        Err(e) => return Some(Err(e.into())),
                    }
                }
                Some(Err(e)) => return Some(Err(BodyError::Transport(e.to_string()))),
                None => {
                    return match self.gunzip.take().map(Gunzip::finish) {
                        Some(Ok(out)) if !out.is_empty() => Some(Ok(out.into())),
                        Some(Err(e)) => Some(Err(e.into())),
                        _ => None,
                    };
                }
            }
        }
    }
}
