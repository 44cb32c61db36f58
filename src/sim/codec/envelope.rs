//! The `k8s\0` + runtime.Unknown envelope around every protobuf object the apiserver sends:
//! Unknown {typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
//! contentType = 4}.

use super::proto::{put_bytes, WIRE_LEN};
use super::proto_decode::Reader;
use super::CodecError;

/// The four bytes that open a protobuf-encoded object.
pub const PROTOBUF_MAGIC: &[u8; 4] = b"k8s\0";

/// A decoded envelope, borrowing the object's message bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
    pub content_encoding: String,
    pub content_type: String,
}

/// `k8s\0` + Unknown, as the apiserver's protobuf serializer writes it: both TypeMeta strings
/// and the empty contentEncoding and contentType are always present (gogo writes non-pointer
/// strings even when empty).
pub fn wrap_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = PROTOBUF_MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// Splits `k8s\0` + Unknown; `None` when the magic is missing, an error when the envelope is
/// not a valid message.
pub fn unwrap_unknown(bytes: &[u8]) -> Result<Option<Unknown<'_>>, CodecError> {
    let Some(message) = bytes.strip_prefix(PROTOBUF_MAGIC.as_slice()) else { return Ok(None) };
    let mut unknown = Unknown {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
        content_encoding: String::new(),
        content_type: String::new(),
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut r = Reader { buf: message, pos: 0 };
    while !r.done() {
        let (num, wire) = r.key()?;
        if wire != WIRE_LEN || num > 4 {
            r.skip(wire)?;
            continue;
        }
        let payload = r.len_delimited()?;
        match num {
            1 => {
                let mut tm = Reader { buf: payload, pos: 0 };
                while !tm.done() {
                    match tm.key()? {
                        (1, WIRE_LEN) => unknown.api_version = text(tm.len_delimited()?),
                        (2, WIRE_LEN) => unknown.kind = text(tm.len_delimited()?),
                        (_, wire) => tm.skip(wire)?,
                    }
                }
            }
            2 => unknown.raw = payload,
            3 => unknown.content_encoding = text(payload),
            _ => unknown.content_type = text(payload),
        }
    }
    Ok(Some(unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips() {
        let wrapped = wrap_unknown("v1", "ConfigMap", b"\x0a\x00");
        assert_eq!(
            wrapped,
            b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x02\x0a\x00\x1a\x00\x22\x00".to_vec()
        );
        let unknown = unwrap_unknown(&wrapped).unwrap().unwrap();
        assert_eq!((unknown.api_version.as_str(), unknown.kind.as_str()), ("v1", "ConfigMap"));
        assert_eq!(unknown.raw, b"\x0a\x00");
        assert_eq!(unwrap_unknown(b"{}"), Ok(None));
        assert_eq!(unwrap_unknown(b"k8s\0\x0a\x05"), Err(CodecError::ProtoTruncated));
    }

    proptest::proptest! {
        #[test]
        fn unwrap_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut input = PROTOBUF_MAGIC.to_vec();
            input.extend_from_slice(&bytes);
            let _ = unwrap_unknown(&input);
        }
    }
}
