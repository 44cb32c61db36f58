//! Protobuf watch streams: each event is a 4-byte big-endian length followed by a bare
//! `metav1.WatchEvent` {type = 1, object = 2 RawExtension{raw = 1}} whose raw is the object's
//! full `k8s\0` envelope (the frame itself has no magic: `protobuf.LengthDelimitedFramer`).

use bytes::{Buf, Bytes, BytesMut};

use super::codec::{
    expect_len, expect_str, len_field_size, put_bytes_field, put_len_header, Fields,
};
use super::error::Error;

/// Content-Type of a protobuf watch response.
pub const STREAM_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Default bound on one frame: well above etcd's object size limit, so only a broken or hostile
/// stream reaches it, and buffering stays bounded.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 << 20;

/// One watch frame: length prefix + WatchEvent, ready to write to every watcher.
///
/// `object_envelope` is the object's whole `k8s\0` body (as in a GET response). Objects cannot
/// come near the 4 GiB a frame length can express, so the length is not checked.
pub fn encode_watch_frame(event_type: &str, object_envelope: &[u8]) -> Vec<u8> {
    let raw_extension_len = len_field_size(1, object_envelope.len());
    let event_len = len_field_size(1, event_type.len()) + len_field_size(2, raw_extension_len);
    let mut buf = Vec::with_capacity(4 + event_len);
    buf.extend_from_slice(&u32::try_from(event_len).unwrap_or(u32::MAX).to_be_bytes());
    put_bytes_field(&mut buf, 1, event_type.as_bytes());
    put_len_header(&mut buf, 2, raw_extension_len);
    put_bytes_field(&mut buf, 1, object_envelope);
    buf
}

/// A decoded WatchEvent frame body, borrowing from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchEventRef<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: &'a str,
    /// The object's `k8s\0` envelope (a `Status` for `ERROR`).
    pub object: &'a [u8],
}

/// Reads a frame body (without its length prefix). Use `Bytes::slice_ref` on the frame to keep
/// `object` without copying.
pub fn decode_watch_event(frame: &[u8]) -> Result<WatchEventRef<'_>, Error> {
    let mut event_type = None;
    let mut object = None;
    for field in Fields::new(frame) {
        match field? {
            (1, value) => event_type = Some(expect_str(value, "type")?),
            (2, value) => {
                for field in Fields::new(expect_len(value, "object")?) {
                    if let (1, raw) = field? {
                        object = Some(expect_len(raw, "object.raw")?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(WatchEventRef {
        event_type: event_type.ok_or(Error::MissingField("type"))?,
        object: object.ok_or(Error::MissingField("object"))?,
    })
}

/// Splits a protobuf watch byte stream, arriving in arbitrary chunks, into frame bodies.
///
/// Memory is bounded by the largest allowed frame plus one chunk: a length prefix over the limit
/// is an error as soon as it is read, before its body is buffered.
#[derive(Debug)]
pub struct WatchFrameDecoder {
    buf: BytesMut,
    max_frame_len: usize,
}

impl WatchFrameDecoder {
    pub fn new(max_frame_len: usize) -> Self {
        WatchFrameDecoder { buf: BytesMut::new(), max_frame_len }
    }

    /// Appends bytes received from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete frame body, `None` until one is complete. Call until `None` after
    /// every `push`.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, Error> {
        let Some(prefix) = self.buf.get(..4) else { return Ok(None) };
        let mut len_bytes = [0u8; 4];
        len_bytes.copy_from_slice(prefix);
        let len = u32::from_be_bytes(len_bytes) as usize;
        if len > self.max_frame_len {
            return Err(Error::FrameTooLarge { len, max: self.max_frame_len });
        }
        if self.buf.len() - 4 < len {
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Bytes of an incomplete frame: non-zero when the stream ends means it was cut mid-frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

impl Default for WatchFrameDecoder {
    fn default() -> Self {
        WatchFrameDecoder::new(DEFAULT_MAX_FRAME_LEN)
    }
}

#[cfg(test)]
mod tests;
