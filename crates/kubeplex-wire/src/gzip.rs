//! Response compression as kube-apiserver does it (`responsewriters/writers.go`,
//! `compression.go`, `APIResponseCompression`): gzip at level 1, only when the client's
//! `Accept-Encoding` lists `gzip` and the body is larger than 128 KiB, with
//! `Content-Encoding: gzip` and `Vary: Accept-Encoding` (fixture `cm-list-gzip`).
//!
//! Only bodies the proxy assembles itself go through here: a passed-through body keeps the
//! upstream's encoding and is never decompressed and recompressed. Watch streams are never
//! compressed.
//!
//! The other way, [`Gunzip`] reads what an upstream compressed for kubeplex (which asks for
//! gzip as Go clients do): a list over the threshold, or a stream of gzip members — kube-apiserver
//! 1.37's `WatchListCompression` writes one member per flush of a streaming list.

use std::io::Write;

use flate2::write::{GzEncoder, MultiGzDecoder};
use flate2::{Compression, GzBuilder};
use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, VARY};

/// `defaultGzipThresholdBytes`: a body must be strictly larger than this to be compressed.
pub const GZIP_THRESHOLD: usize = 128 * 1024;

/// `defaultGzipContentEncodingLevel`: the apiserver trades ratio for CPU.
pub const GZIP_LEVEL: u32 = 1;

/// `ContentEncodingSupported`: the first `Accept-Encoding` header, split on commas, has an
/// element that is exactly `gzip` once surrounding whitespace is trimmed. q-values are not
/// parsed: `gzip;q=1` does not count, and neither does `GZIP`.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(ACCEPT_ENCODING) else { return false };
    match std::str::from_utf8(value.as_bytes()) {
        Ok(text) => text.split(',').any(|token| token.trim() == "gzip"),
        Err(_) => value.as_bytes().split(|b| *b == b',').any(|token| token.trim_ascii() == b"gzip"),
    }
}

/// Whether a body of `len` bytes is compressed for a client that accepts gzip.
pub fn should_compress(accepts_gzip: bool, len: usize) -> bool {
    accepts_gzip && len > GZIP_THRESHOLD
}

/// Gzips `body` the way Go's `gzip.NewWriterLevel(w, 1)` frames it: no name or comment,
/// modification time 0, XFL 4 (fastest), OS 255 (unknown). The deflate stream itself differs
/// from Go's compressor, as any two implementations' do; it decompresses to the same bytes.
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let out = Vec::with_capacity(body.len() / 4 + 64);
    let mut encoder: GzEncoder<Vec<u8>> =
        GzBuilder::new().operating_system(255).mtime(0).write(out, Compression::new(GZIP_LEVEL));
    // Writing into a Vec cannot fail: the error arms are unreachable, not silenced failures.
    if encoder.write_all(body).is_err() {
        return Vec::new();
    }
    encoder.finish().unwrap_or_default()
}

/// Applies the apiserver's rule to an assembled response body: compresses it and sets
/// `Content-Encoding: gzip` and appends `Vary: Accept-Encoding` when the request accepted gzip
/// and the body is over the threshold; otherwise returns it untouched.
pub fn compress_response(request: &HeaderMap, response: &mut HeaderMap, body: Vec<u8>) -> Vec<u8> {
    if !should_compress(accepts_gzip(request), body.len()) {
        return body;
    }
    response.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    response.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    gzip(&body)
}

/// `Content-Encoding: gzip` (the only coding the apiserver writes).
pub fn is_gzip(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_ENCODING).is_some_and(|v| v.as_bytes().trim_ascii() == b"gzip")
}

/// Why a compressed body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GunzipError {
    #[error("malformed gzip data: {0}")]
    Malformed(String),
    #[error("gzip data ends inside a member")]
    Truncated,
    #[error("gzip data decompresses to more than {0} bytes")]
    TooLarge(usize),
}

/// Input is decompressed this much at a time, so that no step can write more than ~1000 times
/// it (deflate's largest ratio) before the limit is checked.
const STEP: usize = 16 * 1024;

/// A gzip stream read as it arrives: one member or several one after another, each chunk's
/// output as soon as it decodes, and never more than `limit` bytes of output in all (a small
/// compressed body cannot make kubeplex allocate a huge one).
pub struct Gunzip {
    decoder: MultiGzDecoder<Vec<u8>>,
    limit: usize,
    written: usize,
    /// Input seen since the last member ended (none: the stream is at a member boundary).
    in_member: bool,
}

impl Gunzip {
    pub fn new(limit: usize) -> Gunzip {
        Gunzip { decoder: MultiGzDecoder::new(Vec::new()), limit, written: 0, in_member: false }
    }

    /// The decompressed bytes `input` completes.
    pub fn push(&mut self, input: &[u8]) -> Result<Vec<u8>, GunzipError> {
        let malformed = |e: std::io::Error| GunzipError::Malformed(e.to_string());
        for step in input.chunks(STEP) {
            self.in_member = true;
            self.decoder.write_all(step).map_err(malformed)?;
            self.decoder.flush().map_err(malformed)?;
            if self.written + self.decoder.get_ref().len() > self.limit {
                return Err(GunzipError::TooLarge(self.limit));
            }
        }
        let out = std::mem::take(self.decoder.get_mut());
        self.written += out.len();
        Ok(out)
    }

    /// The end of the input: the rest of the output, or why the stream was not complete.
    pub fn finish(mut self) -> Result<Vec<u8>, GunzipError> {
        if !self.in_member {
            return Ok(Vec::new());
        }
        self.decoder.try_finish().map_err(|_| GunzipError::Truncated)?;
        let out = std::mem::take(self.decoder.get_mut());
        if self.written + out.len() > self.limit {
            return Err(GunzipError::TooLarge(self.limit));
        }
        Ok(out)
    }
}

/// A whole gzip body (one member or several), decompressed to at most `limit` bytes.
pub fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, GunzipError> {
    let mut reader = Gunzip::new(limit);
    let mut out = reader.push(body)?;
    out.extend(reader.finish()?);
    Ok(out)
}

#[cfg(test)]
mod tests;
