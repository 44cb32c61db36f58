//! `metav1.Status` in protobuf: the error body a protobuf client receives (errors are negotiated
//! like any response), and the object of an `ERROR` event in a protobuf watch.

use super::codec::{len_field_size, put_bytes_field, put_len_header, put_varint_field};
use super::envelope::{finish_envelope, start_envelope};

/// One `details.causes` entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCause<'a> {
    /// `reason` in JSON (`type` in Go).
    pub reason: &'a str,
    pub message: &'a str,
    pub field: &'a str,
}

/// `details` of a Status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusDetails<'a> {
    pub name: &'a str,
    pub group: &'a str,
    pub kind: &'a str,
    pub uid: &'a str,
    pub causes: &'a [StatusCause<'a>],
    pub retry_after_seconds: i32,
}

/// A Status to encode; `status` is `"Failure"` for errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusRef<'a> {
    pub status: &'a str,
    pub message: &'a str,
    pub reason: &'a str,
    pub code: i32,
    pub details: Option<StatusDetails<'a>>,
    /// `metadata.continue`, set on the 410 for an expired continue token.
    pub continue_token: &'a str,
}

fn cause_len(cause: &StatusCause<'_>) -> usize {
    len_field_size(1, cause.reason.len())
        + len_field_size(2, cause.message.len())
        + len_field_size(3, cause.field.len())
}

fn details_len(details: &StatusDetails<'_>) -> usize {
    len_field_size(1, details.name.len())
        + len_field_size(2, details.group.len())
        + len_field_size(3, details.kind.len())
        + details.causes.iter().map(|c| len_field_size(4, cause_len(c))).sum::<usize>()
        + 1
        + super::varint_len(i64::from(details.retry_after_seconds) as u64)
        + len_field_size(6, details.uid.len())
}

/// The `code` (field 6) of a bare Status message, as an upstream ERROR event carries it.
pub fn status_code(raw_message: &[u8]) -> Option<i64> {
    super::codec::Fields::new(raw_message).map_while(Result::ok).find_map(|(f, v)| match (f, v) {
        (6, super::codec::Value::Varint(c)) => Some(c as i32 as i64),
        _ => None,
    })
}

/// The `k8s\0` body of a Status (`apiVersion: v1`, `kind: Status`, whatever the resource's group).
/// gogo writes every scalar, `details` only when set, and an int32 as a sign-extended varint.
pub fn encode_status(status: &StatusRef<'_>) -> Vec<u8> {
    let list_meta = len_field_size(1, 0)
        + len_field_size(2, 0)
        + len_field_size(3, status.continue_token.len());
    let raw_len = len_field_size(1, list_meta)
        + len_field_size(2, status.status.len())
        + len_field_size(3, status.message.len())
        + len_field_size(4, status.reason.len())
        + status.details.as_ref().map_or(0, |d| len_field_size(5, details_len(d)))
        + 1
        + super::varint_len(i64::from(status.code) as u64);
    let mut buf = start_envelope("v1", "Status", raw_len);
    put_len_header(&mut buf, 1, list_meta);
    put_bytes_field(&mut buf, 1, b"");
    put_bytes_field(&mut buf, 2, b"");
    put_bytes_field(&mut buf, 3, status.continue_token.as_bytes());
    put_bytes_field(&mut buf, 2, status.status.as_bytes());
    put_bytes_field(&mut buf, 3, status.message.as_bytes());
    put_bytes_field(&mut buf, 4, status.reason.as_bytes());
    if let Some(details) = &status.details {
        put_len_header(&mut buf, 5, details_len(details));
        put_bytes_field(&mut buf, 1, details.name.as_bytes());
        put_bytes_field(&mut buf, 2, details.group.as_bytes());
        put_bytes_field(&mut buf, 3, details.kind.as_bytes());
        for cause in details.causes {
            put_len_header(&mut buf, 4, cause_len(cause));
            put_bytes_field(&mut buf, 1, cause.reason.as_bytes());
            put_bytes_field(&mut buf, 2, cause.message.as_bytes());
            put_bytes_field(&mut buf, 3, cause.field.as_bytes());
        }
        put_varint_field(&mut buf, 5, i64::from(details.retry_after_seconds) as u64);
        put_bytes_field(&mut buf, 6, details.uid.as_bytes());
    }
    put_varint_field(&mut buf, 6, i64::from(status.code) as u64);
    finish_envelope(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn not_found_matches_go() {
        // protobuf.NewSerializer(..).Encode(errors.NewNotFound({Resource: "configmaps"}, "nope")
        // .Status()) with apimachinery v0.36.4.
        let status = StatusRef {
            status: "Failure",
            message: "configmaps \"nope\" not found",
            reason: "NotFound",
            code: 404,
            details: Some(StatusDetails { name: "nope", kind: "configmaps", ..Default::default() }),
            ..Default::default()
        };
        let expected = "6b3873000a0c0a027631120653746174757312550a060a0012001a0012074661696c7572651a1b636f6e6669676d61707320226e6f706522206e6f7420666f756e6422084e6f74466f756e642a180a046e6f706512001a0a636f6e6669676d617073280032003094031a002200";
        assert_eq!(encode_status(&status), hex(expected));
    }

    #[test]
    fn too_large_resource_version_matches_go() {
        // Fixture err-too-large-rv's Status (cause, retryAfterSeconds) re-encoded by Go in protobuf.
        let causes = [StatusCause {
            reason: "ResourceVersionTooLarge",
            message: "Too large resource version",
            field: "",
        }];
        let status = StatusRef {
            status: "Failure",
            message: "Timeout: Too large resource version: 999999999, current: 266",
            reason: "Timeout",
            code: 504,
            details: Some(StatusDetails {
                causes: &causes,
                retry_after_seconds: 1,
                ..Default::default()
            }),
            continue_token: "",
        };
        let expected = "6b3873000a0c0a027631120653746174757312a0010a060a0012001a0012074661696c7572651a3c54696d656f75743a20546f6f206c61726765207265736f757263652076657273696f6e3a203939393939393939392c2063757272656e743a20323636220754696d656f75742a430a0012001a0022370a175265736f7572636556657273696f6e546f6f4c61726765121a546f6f206c61726765207265736f757263652076657273696f6e1a002801320030f8031a002200";
        assert_eq!(encode_status(&status), hex(expected));
    }

    #[test]
    fn expired_continue_and_negative_code() {
        let status =
            StatusRef { status: "Failure", code: -1, continue_token: "c", ..Default::default() };
        let body = encode_status(&status);
        let raw = super::super::decode_unknown(&body).unwrap().raw;
        assert_eq!(raw.get(..9), Some(b"\x0a\x07\x0a\x00\x12\x00\x1a\x01c".as_slice()));
        // code -1 as int32: a ten-byte varint.
        assert_eq!(
            raw.get(raw.len() - 11..),
            Some(b"\x30\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01".as_slice())
        );
    }
}
