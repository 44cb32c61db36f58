//! Protobuf watch streams: each event is a 4-byte big-endian length followed by a bare
//! `metav1.WatchEvent` {type = 1, object = 2 RawExtension{raw = 1}} whose raw is the object's
//! full `k8s\0` envelope (the frame itself has no magic: `protobuf.LengthDelimitedFramer`).

use bytes::{Buf, Bytes, BytesMut};

use super::codec::{
    expect_len, expect_str, len_field_size, put_bytes_field, put_len_header, Fields,
};
use super::Error;

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
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frame_layout() {
        let frame = encode_watch_frame("ADDED", b"k8s\0");
        assert_eq!(frame, b"\x00\x00\x00\x0f\x0a\x05ADDED\x12\x06\x0a\x04k8s\0");
        let event = decode_watch_event(&frame[4..]).unwrap();
        assert_eq!(event, WatchEventRef { event_type: "ADDED", object: b"k8s\0" });
    }

    #[test]
    fn oversized_frame_is_refused_before_buffering() {
        let mut decoder = WatchFrameDecoder::new(10);
        decoder.push(&[0, 0, 0, 11]);
        assert_eq!(decoder.next_frame(), Err(Error::FrameTooLarge { len: 11, max: 10 }));
    }

    #[test]
    fn incomplete_event_is_an_error() {
        assert_eq!(decode_watch_event(b"\x0a\x05ADDED"), Err(Error::MissingField("object")));
        assert_eq!(decode_watch_event(b"\x12\x00"), Err(Error::MissingField("type")));
    }

    proptest! {
        #[test]
        fn decoder_reassembles_any_chunking(
            objects in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
            cuts in proptest::collection::vec(1usize..64, 1..40),
        ) {
            let stream: Vec<u8> = objects.iter().flat_map(|o| encode_watch_frame("MODIFIED", o)).collect();
            let mut decoder = WatchFrameDecoder::default();
            let mut got = Vec::new();
            let mut rest = stream.as_slice();
            let mut cut = cuts.iter().cycle();
            while !rest.is_empty() {
                let n = (*cut.next().unwrap()).min(rest.len());
                decoder.push(&rest[..n]);
                rest = &rest[n..];
                while let Some(frame) = decoder.next_frame().unwrap() {
                    got.push(decode_watch_event(&frame).unwrap().object.to_vec());
                }
            }
            prop_assert_eq!(got, objects);
            prop_assert_eq!(decoder.buffered(), 0);
        }

        #[test]
        fn decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut decoder = WatchFrameDecoder::new(256);
            decoder.push(&data);
            while let Ok(Some(frame)) = decoder.next_frame() {
                let _ = decode_watch_event(&frame);
            }
        }
    }
}
