//! Response compression as kube-apiserver does it (`responsewriters/writers.go`,
//! `compression.go`, `APIResponseCompression`): gzip at level 1, only when the client's
//! `Accept-Encoding` lists `gzip` and the body is larger than 128 KiB, with
//! `Content-Encoding: gzip` and `Vary: Accept-Encoding` (fixture `cm-list-gzip`).
//!
//! Only bodies the proxy assembles itself go through here: a passed-through body keeps the
//! upstream's encoding and is never decompressed and recompressed. Watch streams are never
//! compressed.

use std::io::Write;

use flate2::write::GzEncoder;
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

#[cfg(test)]
mod tests;
