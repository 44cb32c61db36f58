//! The `k8s\0` + `runtime.Unknown` envelope around every protobuf body, and `<Kind>List` messages.

use super::super::meta::ListMeta;
use super::codec::{
    expect_len, expect_str, expect_varint, len_field_size, put_bytes_field, put_len_header,
    put_tag, put_varint, Fields,
};
use super::error::Error;

/// The four bytes that open every Kubernetes protobuf body (`protobuf.Serializer`'s prefix).
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Media type of a protobuf response or request body.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A decoded envelope; every field borrows from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    /// The object's bare message.
    pub raw: &'a [u8],
    /// Always empty from the apiserver; kept so a non-empty one can be refused.
    pub content_encoding: &'a str,
    pub content_type: &'a str,
}

/// An item of a list being written: a cached message, or a message wrapped in one more field
/// (a PartialObjectMetadata item is the object's ObjectMeta wrapped in field 1).
#[derive(Debug, Clone, Copy)]
pub(super) enum Item<'a> {
    Message(&'a [u8]),
    Wrapped(u32, &'a [u8]),
}

impl Item<'_> {
    fn len(&self) -> usize {
        match self {
            Item::Message(bytes) => bytes.len(),
            Item::Wrapped(field, bytes) => len_field_size(*field, bytes.len()),
        }
    }

    fn write(&self, buf: &mut Vec<u8>) {
        match self {
            Item::Message(bytes) => buf.extend_from_slice(bytes),
            Item::Wrapped(field, bytes) => put_bytes_field(buf, *field, bytes),
        }
    }
}

/// Wraps an object's bare message in `k8s\0` + Unknown, as the apiserver sends a single object.
pub fn encode_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut buf = start_envelope(api_version, kind, raw.len());
    buf.extend_from_slice(raw);
    finish_envelope(buf)
}

/// Writes everything up to and including the header of `raw` (field 2), sized for the rest.
pub(super) fn start_envelope(api_version: &str, kind: &str, raw_len: usize) -> Vec<u8> {
    let type_meta_len = len_field_size(1, api_version.len()) + len_field_size(2, kind.len());
    let total = MAGIC.len() + len_field_size(1, type_meta_len) + len_field_size(2, raw_len) + 4;
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(MAGIC);
    put_len_header(&mut buf, 1, type_meta_len);
    put_bytes_field(&mut buf, 1, api_version.as_bytes());
    put_bytes_field(&mut buf, 2, kind.as_bytes());
    put_len_header(&mut buf, 2, raw_len);
    buf
}

/// Appends contentEncoding (3) and contentType (4): gogo writes these empty strings every time.
pub(super) fn finish_envelope(mut buf: Vec<u8>) -> Vec<u8> {
    buf.extend_from_slice(&[0x1a, 0x00, 0x22, 0x00]);
    buf
}

/// Reads a `k8s\0` + Unknown body without copying.
pub fn decode_unknown(body: &[u8]) -> Result<Unknown<'_>, Error> {
    let message = body.strip_prefix(MAGIC.as_slice()).ok_or(Error::MissingMagic)?;
    let mut unknown =
        Unknown { api_version: "", kind: "", raw: &[], content_encoding: "", content_type: "" };
    for field in Fields::new(message) {
        match field? {
            (1, value) => {
                for field in Fields::new(expect_len(value, "typeMeta")?) {
                    match field? {
                        (1, value) => unknown.api_version = expect_str(value, "apiVersion")?,
                        (2, value) => unknown.kind = expect_str(value, "kind")?,
                        _ => {}
                    }
                }
            }
            (2, value) => unknown.raw = expect_len(value, "raw")?,
            (3, value) => unknown.content_encoding = expect_str(value, "contentEncoding")?,
            (4, value) => unknown.content_type = expect_str(value, "contentType")?,
            // Unknown fields are skipped, as protobuf readers must.
            _ => {}
        }
    }
    Ok(unknown)
}

/// Size of a ListMeta message. `selfLink` (1), `resourceVersion` (2) and `continue` (3) are
/// always written, `remainingItemCount` (4) only when set (it is a pointer in Go).
fn list_meta_len(meta: &ListMeta<'_>) -> usize {
    len_field_size(1, 0)
        + len_field_size(2, meta.resource_version.len())
        + len_field_size(3, meta.continue_token.len())
        + meta.remaining_item_count.map_or(0, |n| 1 + super::codec::varint_len(n as u64))
}

fn put_list_meta(buf: &mut Vec<u8>, meta: &ListMeta<'_>) {
    put_len_header(buf, 1, list_meta_len(meta));
    put_bytes_field(buf, 1, b"");
    put_bytes_field(buf, 2, meta.resource_version.as_bytes());
    put_bytes_field(buf, 3, meta.continue_token.as_bytes());
    if let Some(count) = meta.remaining_item_count {
        put_tag(buf, 4, super::codec::VARINT);
        // Go writes `uint64(*RemainingItemCount)`: a negative count takes ten bytes.
        put_varint(buf, count as u64);
    }
}

/// Builds a `<Kind>List` body from bare item messages (the bytes each item has as `raw` of its
/// own envelope): ListMeta is field 1 and each item one field 2, in the order given.
pub fn encode_list(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[impl AsRef<[u8]>],
) -> Vec<u8> {
    encode_list_items(api_version, list_kind, meta, items.iter().map(|i| Item::Message(i.as_ref())))
}

/// [`encode_list`] as parts to write one after the other: the items' own buffers are shared,
/// not copied, so a large list is never assembled in memory.
pub fn encode_list_parts(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[bytes::Bytes],
) -> Vec<bytes::Bytes> {
    let items_len: usize = items.iter().map(|item| len_field_size(2, item.len())).sum();
    let raw_len = len_field_size(1, list_meta_len(meta)) + items_len;
    let mut head = start_envelope(api_version, list_kind, raw_len);
    put_list_meta(&mut head, meta);
    let mut parts = Vec::with_capacity(items.len() * 2 + 2);
    parts.push(bytes::Bytes::from(head));
    for item in items {
        let mut header = Vec::with_capacity(6);
        put_len_header(&mut header, 2, item.len());
        parts.push(bytes::Bytes::from(header));
        parts.push(item.clone());
    }
    parts.push(bytes::Bytes::from(finish_envelope(Vec::new())));
    parts
}

pub(super) fn encode_list_items<'i>(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: impl Iterator<Item = Item<'i>> + Clone,
) -> Vec<u8> {
    let items_len: usize = items.clone().map(|item| len_field_size(2, item.len())).sum();
    let raw_len = len_field_size(1, list_meta_len(meta)) + items_len;
    let mut buf = start_envelope(api_version, list_kind, raw_len);
    put_list_meta(&mut buf, meta);
    for item in items {
        put_len_header(&mut buf, 2, item.len());
        item.write(&mut buf);
    }
    finish_envelope(buf)
}

/// A decoded `<Kind>List` body; items are the bare messages, ready to be cached as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRef<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub meta: ListMeta<'a>,
    pub items: Vec<&'a [u8]>,
}

/// Reads a list body (as a reflector receives a page from the upstream) without copying items.
pub fn decode_list(body: &[u8]) -> Result<ListRef<'_>, Error> {
    let unknown = decode_unknown(body)?;
    let mut list = ListRef {
        api_version: unknown.api_version,
        kind: unknown.kind,
        meta: ListMeta::default(),
        items: Vec::new(),
    };
    for field in Fields::new(unknown.raw) {
        match field? {
            (1, value) => {
                for field in Fields::new(expect_len(value, "metadata")?) {
                    match field? {
                        (2, value) => {
                            list.meta.resource_version = expect_str(value, "resourceVersion")?
                        }
                        (3, value) => list.meta.continue_token = expect_str(value, "continue")?,
                        (4, value) => {
                            list.meta.remaining_item_count =
                                Some(expect_varint(value, "remainingItemCount")? as i64)
                        }
                        _ => {}
                    }
                }
            }
            (2, value) => list.items.push(expect_len(value, "items")?),
            _ => {}
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests;
