//! The bytes of an answer from the cache, as kube-apiserver writes them: an object or a list
//! of the cached items in the negotiated encoding and shape (the object with its type meta, its
//! PartialObjectMetadata, or a Table row: `table.rs`), Go's trailing newline for JSON, gzip
//! where the apiserver applies it (and the gzipped pages kept for the next identical list), and
//! large lists written from the items' own buffers.

use std::sync::Arc;

use http::{header, HeaderMap, Response};

use super::pages::PageCache;
use crate::cache::resource::Encoding;
use crate::cache::CachedObject;
use crate::live::discovery::ResourceInfo;
use crate::serve::body::{self, Body, JSON, PROTOBUF};
use crate::wire::meta::{self, unstructured, ListMeta};
use crate::wire::status::Status;
use crate::wire::table::IncludeObject;
use crate::wire::{gzip, proto};

const META_API_VERSION: &str = "meta.k8s.io/v1";
/// Lists at least this large (and not to be gzipped) are written from the cached items' own
/// buffers rather than assembled into one body: no copy of the whole list, and no pages of
/// fresh memory to fault in for it.
const STREAM_LIST_BYTES: usize = 256 * 1024;

/// What the client asked to get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Object,
    Metadata,
    /// A `meta.k8s.io/v1` Table, printed from the JSON cache (`table.rs`).
    Table(IncludeObject),
}

pub(super) struct Out<'a> {
    pub(super) info: &'a ResourceInfo,
    pub(super) encoding: Encoding,
    pub(super) shape: Shape,
    pub(super) headers: &'a HeaderMap,
    pub(super) pages: &'a PageCache,
    pub(super) metrics: &'a crate::serve::metrics::Metrics,
    /// What, besides the snapshot, decides a list's bytes: resource, encoding, shape, scope and
    /// query.
    pub(super) page_key: String,
}

/// One object as the client asked for it: the object with its type meta, its metadata, or a
/// Table row.
pub(super) fn object(obj: &CachedObject, out: &Out<'_>) -> Response<Body> {
    let info = out.info;
    let result = match (out.encoding, out.shape) {
        (Encoding::Json, Shape::Object) if info.is_builtin() => {
            meta::with_type_meta(&obj.body, &info.api_version(), &info.kind)
                .map_err(|e| e.to_string())
        }
        (Encoding::Json, Shape::Object) => Ok(obj.body.to_vec()),
        (Encoding::Json, Shape::Metadata) => if info.is_builtin() {
            meta::partial_object_metadata_json(&obj.body, META_API_VERSION)
        } else {
            unstructured::partial_object_metadata_json(&obj.body, META_API_VERSION)
        }
        .map_err(|e| e.to_string()),
        (Encoding::Protobuf, Shape::Object) => {
            Ok(proto::encode_unknown(&info.api_version(), &info.kind, &obj.body))
        }
        (Encoding::Protobuf, Shape::Metadata) => {
            custom_resource_message(info, &obj.body).and_then(|message| {
                let message = message.as_deref().unwrap_or(&obj.body);
                proto::partial_object_metadata(message, META_API_VERSION).map_err(|e| e.to_string())
            })
        }
        (_, Shape::Table(include)) => super::table::object(info, obj, include),
    };
    finish(result, out, None)
}

/// A list of `items` as the client asked for it (objects, their metadata, or a Table), with
/// `meta_out`'s RV and continue token; kept gzipped in the page cache under `page_key`.
pub(super) fn list(
    items: &[Arc<CachedObject>],
    meta_out: &ListMeta<'_>,
    out: &Out<'_>,
    page_key: Option<&str>,
) -> Response<Body> {
    let info = out.info;
    // A Table's ages are of the moment it is printed: never kept in the page cache.
    let page_key = page_key.filter(|_| !matches!(out.shape, Shape::Table(_)));
    let size: usize = items.iter().map(|o| o.body.len()).sum();
    if size >= STREAM_LIST_BYTES && !gzip::accepts_gzip(out.headers) {
        let bodies: Vec<bytes::Bytes> = items.iter().map(|o| o.body.clone()).collect();
        let (api_version, kind) = (info.api_version(), info.list_kind());
        let parts = match (out.encoding, out.shape) {
            (Encoding::Json, Shape::Object) if info.is_builtin() => {
                Some(meta::list_json_parts(&api_version, &kind, meta_out, &bodies))
            }
            (Encoding::Protobuf, Shape::Object) => {
                Some(proto::encode_list_parts(&api_version, &kind, meta_out, &bodies))
            }
            _ => None,
        };
        if let Some(parts) = parts {
            return body::respond_parts(200, content_type(out), parts);
        }
    }
    let bodies: Vec<&[u8]> = items.iter().map(|o| o.body.as_ref()).collect();
    let result = match (out.encoding, out.shape) {
        (Encoding::Json, Shape::Object) => Ok(if info.is_builtin() {
            meta::list_json(&info.api_version(), &info.list_kind(), meta_out, &bodies)
        } else {
            unstructured::list_json(&info.api_version(), &info.list_kind(), meta_out, &bodies)
        }),
        (Encoding::Json, Shape::Metadata) => if info.is_builtin() {
            meta::partial_object_metadata_list_json(META_API_VERSION, meta_out, &bodies)
        } else {
            unstructured::partial_object_metadata_list_json(META_API_VERSION, meta_out, &bodies)
        }
        .map_err(|e| e.to_string()),
        (Encoding::Protobuf, Shape::Object) => {
            Ok(proto::encode_list(&info.api_version(), &info.list_kind(), meta_out, &bodies))
        }
        (Encoding::Protobuf, Shape::Metadata) => items
            .iter()
            .map(|o| custom_resource_message(info, &o.body))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|messages| {
                let messages: Vec<&[u8]> =
                    messages.iter().zip(&bodies).map(|(m, b)| m.as_deref().unwrap_or(b)).collect();
                proto::partial_object_metadata_list(META_API_VERSION, meta_out, &messages)
                    .map_err(|e| e.to_string())
            }),
        (_, Shape::Table(include)) => super::table::list(info, items, meta_out, include),
    };
    finish(result, out, page_key)
}

/// A custom resource's PartialObjectMetadata as a protobuf message, from the JSON object its
/// cache holds (`None` for a built-in kind, whose cached message is used as it is).
fn custom_resource_message(info: &ResourceInfo, body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    if info.is_builtin() {
        return Ok(None);
    }
    unstructured::partial_object_metadata_message(body).map(Some).map_err(|e| e.to_string())
}

fn content_type(out: &Out<'_>) -> &'static str {
    match out.encoding {
        Encoding::Json => JSON,
        Encoding::Protobuf => PROTOBUF,
    }
}

/// An answer already gzipped (from the page cache).
pub(super) fn gzipped(compressed: bytes::Bytes, out: &Out<'_>) -> Response<Body> {
    let mut resp = body::respond_bytes(200, content_type(out), compressed);
    resp.headers_mut().insert(header::CONTENT_ENCODING, header::HeaderValue::from_static("gzip"));
    resp.headers_mut().insert(header::VARY, header::HeaderValue::from_static("Accept-Encoding"));
    resp
}

/// Content type, Go's trailing newline for JSON, and gzip as the apiserver applies it.
fn finish(
    result: Result<Vec<u8>, String>,
    out: &Out<'_>,
    page_key: Option<&str>,
) -> Response<Body> {
    let mut bytes = match result {
        Ok(b) => b,
        Err(e) => return body::status(&Status::internal(e)),
    };
    let ct = match out.encoding {
        Encoding::Json => {
            if bytes.last() != Some(&b'\n') {
                bytes.push(b'\n');
            }
            JSON
        }
        Encoding::Protobuf => PROTOBUF,
    };
    if gzip::should_compress(gzip::accepts_gzip(out.headers), bytes.len()) {
        let compressed = bytes::Bytes::from(gzip::gzip(&bytes));
        if let Some(key) = page_key {
            out.metrics.page_cache.with_label_values(&["miss"]).inc();
            out.pages.insert(key.to_string(), compressed.clone());
        }
        return gzipped(compressed, out);
    }
    body::respond(200, ct, bytes)
}
