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
        + super::codec::varint_len(i64::from(details.retry_after_seconds) as u64)
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
        + super::codec::varint_len(i64::from(status.code) as u64);
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
mod tests;
