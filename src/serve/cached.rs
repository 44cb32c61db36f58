//! Gets and lists answered from the cache, byte-compatible with kube-apiserver — or declined,
//! in which case the caller passes the request through. Declining is always safe; answering
//! is only done where the cache's answer is exactly what the apiserver would give.
//!
//! resourceVersion rules (docs/design.md §2) as the cache applies them:
//! - `"0"` (any): the cache's current state;
//! - `N` not-older-than (get with N; list with N and no limit; `NotOlderThan`): wait ~3 s for
//!   the cache to reach N (proving it there when the upstream is past N: `serve::fresh`), then
//!   its current state — or, like the apiserver's own watch cache, 504 "Too large resource
//!   version";
//! - `N` exact (list with N and a limit; `Exact`; a continue token): the snapshot at N when it
//!   is still in the window, else pass through;
//! - unset (most recent, consistent): a list is answered once the cache is shown to hold the
//!   upstream's state as of the request's arrival (`live::freshness`), else passed
//!   through; a get is passed through (one small upstream request either way, and faster).
//!
//! A cache that has not synced yet is waited for (bounded), not passed by: the reads of a cold
//! cache share its one upstream list.

use std::sync::Arc;

use http::{header, HeaderMap, Response};

use super::body::{self, Body, JSON, PROTOBUF};
use super::fresh;
use super::pages::PageCache;
use super::read::CachedRead;
use super::resources::ResourceInfo;
use super::state::ProxyState;
use crate::cache::fanout::Filter;
use crate::cache::resource::Encoding;
use crate::cache::select::{self, Query};
use crate::cache::store::Snapshot;
use crate::cache::CachedObject;
use crate::live::caches::Live;
use crate::live::freshness::Proven;
use crate::wire::meta::{self, unstructured, ListMeta};
use crate::wire::negotiate::{self, Endpoint, MediaType, MetaVersion, Representation};
use crate::wire::request::{ListOptions, ResourcePath, RvMatch};
use crate::wire::selector::fields_by_kind::{self, FieldRules};
use crate::wire::selector::{FieldSelector, LabelSelector};
use crate::wire::status::Status;
use crate::wire::table::IncludeObject;
use crate::wire::{continue_token, gzip, proto};

const META_API_VERSION: &str = "meta.k8s.io/v1";
/// Lists at least this large (and not to be gzipped) are written from the cached items' own
/// buffers rather than assembled into one body: no copy of the whole list, and no pages of
/// fresh memory to fault in for it.
const STREAM_LIST_BYTES: usize = 256 * 1024;

/// What the client asked to get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Metadata,
    /// A `meta.k8s.io/v1` Table, printed from the JSON cache (`table.rs`).
    Table(IncludeObject),
}

/// Answers the request from the cache, or returns `None` to have it passed through.
pub async fn try_answer(
    state: &Arc<ProxyState>,
    read: &CachedRead<'_>,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<Response<Body>> {
    let (info, rp, opts) = (read.info, read.rp, read.opts);
    let arrived = std::time::Instant::now();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let endpoint = if info.is_builtin() { Endpoint::BuiltIn } else { Endpoint::CustomResource };
    let neg = negotiate::negotiate_output(accept, endpoint).ok()?;
    let user_agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
    let pretty = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "pretty")
        .map(|(_, v)| v.into_owned());
    // Indented JSON is the apiserver's to write.
    if neg.pretty(pretty.as_deref(), user_agent) {
        return None;
    }
    let kind = if rp.name.is_some() { Read::Get } else { Read::List };
    // --- Tables (kubectl get): the JSON cache, printed (table.rs).
    let (encoding, shape) = match super::table::requested(info, &neg, opts) {
        Some(include) => (Encoding::Json, Shape::Table(include)),
        None => {
            let (encoding, metadata) = cache_form(info, &neg, kind)?;
            (encoding, if metadata { Shape::Metadata } else { Shape::Object })
        }
    };
    // --- end Tables
    // Only a request the cache could answer starts (or keeps alive) a cache: a consistent get
    // (no resourceVersion) never does, so a `kubectl get secret x` does not make kubeplex list
    // and watch every secret; a consistent list does when proofs are on.
    let consistent = opts.resource_version.is_none() && opts.continue_token.is_none();
    let proofs = !state.caches.freshness_config().consistent_wait.is_zero();
    if (consistent && (rp.name.is_some() || !proofs))
        || (rp.name.is_some() && rp.namespace.is_none() && info.namespaced)
    {
        return None;
    }
    // `None`: no cache may answer (the cost rule, the memory budget, node mode's review); the
    // read passes through.
    // A list of every object of its scope, in the cache's own form, in one unpaged answer:
    // what a cache of that scope loads, so that its answer can be a cold cache's first load.
    // At resourceVersion=0 the watch cache ignores `limit` (`computeListLimit`): an informer's
    // first list (`limit=500&resourceVersion=0`) gets all of it in one answer (one with a
    // continue token after all is not taken: `live::reflector::fed`).
    let any_state = opts.resource_version.as_deref() == Some("0");
    let unpaged = (opts.limit.is_none_or(|l| l <= 0) || any_state) && opts.continue_token.is_none();
    let not_exact = opts.resource_version_match != Some(RvMatch::Exact);
    let whole = rp.name.is_none() && shape == Shape::Object && unpaged && not_exact;
    let cache = read.cache(state, encoding, whole).await?;
    if !fresh::synced(state, &cache).await {
        return None;
    }
    let proven = match consistent && rp.name.is_none() {
        true => Some(consistent_list(state, &cache, info, rp, opts, encoding, arrived).await?),
        false => None,
    };
    let page_key = format!(
        "{}|{shape:?}|{}|{}",
        cache.describe(),
        rp.namespace.as_deref().unwrap_or(""),
        query.unwrap_or("")
    );
    let out = Out {
        info,
        encoding,
        shape,
        headers,
        pages: &state.pages,
        metrics: &state.metrics,
        page_key,
    };
    match &rp.name {
        Some(name) => get(state, &cache, rp, opts, name, &out).await,
        None => list(state, &cache, rp, opts, proven, &out).await,
    }
}

/// The freshness proof of a consistent list: a metadata list of the cache (or of the list's
/// namespace in it) when it costs the upstream no more than the list would directly
/// ([`fresh::listing`]: a small cache the list is about all of — another tier's `limit=1`
/// current-RV list, a node's list of its Node);
/// else the cache's own proof, where a small list passes through rather than wait for a probe.
async fn consistent_list(
    state: &ProxyState,
    cache: &Live,
    info: &ResourceInfo,
    rp: &ResourcePath,
    opts: &ListOptions,
    encoding: Encoding,
    arrived: std::time::Instant,
) -> Option<Proven> {
    let (label, field) = selectors(info, encoding, opts)?;
    let filter = Filter { namespace: rp.namespace.clone(), label, field };
    let limit = opts.limit.filter(|l| *l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    if let Some(listing) = fresh::listing(cache, info.namespaced, &filter, limit) {
        let namespace = filter.namespace.as_deref();
        return fresh::consistent_listed(state, cache, listing, namespace, arrived).await;
    }
    let min_bytes = state.caches.freshness_config().probe_min_list_bytes;
    let worth_it = || fresh::scope_bytes(&cache.current(), rp.namespace.as_deref()) >= min_bytes;
    fresh::consistent(state, cache, arrived, worth_it, || false).await
}

/// The state a consistent list is answered at: the cache's, shown current by its proof — or,
/// when a metadata list showed the cache's state to be the upstream's at a later RV R
/// ([`Proven::cache_at`]), that state at R, as the apiserver would answer (the list's RV is
/// what another tier's clock takes for the upstream's current RV). `None` if the cache has
/// moved since, short of R: the read passes through.
fn proven_state(cache: &Live, proven: Option<Proven>) -> Option<Snapshot> {
    let snap = cache.current();
    match proven.and_then(|p| p.at.zip(p.cache_at)) {
        Some((rv, cache_at)) if snap.resource_version() < rv => {
            (snap.resource_version() == cache_at).then(|| snap.as_of(rv))
        }
        _ => Some(snap),
    }
}

struct Out<'a> {
    info: &'a ResourceInfo,
    encoding: Encoding,
    shape: Shape,
    headers: &'a HeaderMap,
    pages: &'a PageCache,
    metrics: &'a crate::serve::metrics::Metrics,
    /// What, besides the snapshot, decides a list's bytes: resource, encoding, shape, scope and
    /// query.
    page_key: String,
}

/// What a cached answer is for: the representations each accepts differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    Get,
    List,
    Watch,
}

/// The cache (by encoding) that answers what the client negotiated, and whether it asked for
/// metadata only; `None` for what only the apiserver writes: Table (but see `table.rs`), YAML,
/// the v1beta1 meta types, protobuf metadata of custom resources, and a metadata type that does
/// not fit the read (PartialObjectMetadataList for a get, or the other way round: its 406).
/// A watch's events carry PartialObjectMetadata whichever of the two the client named.
pub(super) fn cache_form(
    info: &ResourceInfo,
    neg: &negotiate::Negotiated,
    read: Read,
) -> Option<(Encoding, bool)> {
    let encoding = match neg.media_type {
        MediaType::Json => Encoding::Json,
        MediaType::Protobuf => Encoding::Protobuf,
        _ => return None,
    };
    let metadata = match (neg.representation, read) {
        (Representation::Object, _) => false,
        (Representation::PartialObjectMetadata(MetaVersion::V1), Read::Get | Read::Watch)
        | (Representation::PartialObjectMetadataList(MetaVersion::V1), Read::List | Read::Watch) => {
            true
        }
        _ => return None,
    };
    if metadata && encoding == Encoding::Protobuf && !info.is_builtin() {
        return None;
    }
    Some((encoding, metadata))
}

/// The request's label and field selectors as a cache of `encoding` evaluates them, or `None`
/// when it cannot evaluate them exactly: malformed ones (whose 400 the upstream words), fields
/// the encoding's cache does not hold, custom resources' selectable fields.
pub(super) fn selectors(
    info: &ResourceInfo,
    encoding: Encoding,
    opts: &ListOptions,
) -> Option<(Option<LabelSelector>, Option<FieldSelector>)> {
    let label = match &opts.label_selector {
        Some(s) => Some(LabelSelector::parse(s).ok()?),
        None => None,
    };
    let field = match &opts.field_selector {
        Some(s) => {
            let f = FieldSelector::parse(s).ok()?;
            fields_by_kind::validate(&info.group, &info.resource, &f).ok()?;
            // Old field names converted (pods' `spec.host` is `spec.nodeName`).
            Some(select::cacheable_field_selector(encoding, &info.group, &info.resource, &f)?)
        }
        None => None,
    };
    Some((label, field))
}

/// The snapshot for a not-older-than read: the current one once the cache has reached `rv`.
///
/// If it does not get there in the apiserver's ~3 s, the answer is the apiserver's own: its
/// watch cache waits the same way and then gives 504 "Too large resource version" with its
/// current RV. (Passing through instead would make the client wait twice.)
async fn not_older_than(
    state: &ProxyState,
    cache: &Live,
    rv: u64,
) -> Result<Snapshot, Response<Body>> {
    match fresh::not_older_than(state, cache, rv).await {
        Ok(()) => Ok(cache.current()),
        Err(current) => Err(body::status(&Status::too_large_resource_version(rv, current))),
    }
}

async fn get(
    state: &ProxyState,
    cache: &Live,
    rp: &ResourcePath,
    opts: &ListOptions,
    name: &str,
    out: &Out<'_>,
) -> Option<Response<Body>> {
    let snap = match opts.resource_version.as_deref() {
        Some("0") => cache.current(),
        Some(rv) => match not_older_than(state, cache, rv.parse().ok()?).await {
            Ok(snap) => snap,
            Err(too_large) => return Some(too_large),
        },
        None => return None,
    };
    let ns = rp.namespace.as_deref().unwrap_or("");
    let key = if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") };
    let Some(obj) = snap.get(&key).cloned() else {
        return Some(body::status(&Status::not_found(&out.info.group, &out.info.resource, name)));
    };
    Some(encode_object(&obj, out))
}

async fn list(
    state: &ProxyState,
    cache: &Live,
    rp: &ResourcePath,
    opts: &ListOptions,
    proven: Option<Proven>,
    out: &Out<'_>,
) -> Option<Response<Body>> {
    let (label, field) = selectors(out.info, out.encoding, opts)?;
    // The watch cache ignores `limit` at resourceVersion=0 (`computeListLimit`).
    let limit = opts
        .limit
        .filter(|l| *l > 0 && opts.resource_version.as_deref() != Some("0"))
        .map(|l| l as usize);
    // `latest`: the list is of the latest state, which the apiserver serves from its own index
    // when the selector pins an indexed field (see `Query::upstream_indexes`).
    let (snap, start, latest) = match &opts.continue_token {
        Some(token) => {
            if opts.resource_version.as_deref().is_some_and(|rv| rv != "0") {
                return None;
            }
            let tok = continue_token::decode(token).ok()?;
            if tok.rv <= 0 {
                return None;
            }
            (cache.at(tok.rv as u64).ok()?, Some(tok.start), false)
        }
        None => {
            let rv = opts.resource_version.as_deref();
            let (snap, latest) = match (rv, opts.resource_version_match, limit) {
                // Consistent: the caller has shown the cache to be current.
                (None, _, _) => (proven_state(cache, proven)?, true),
                (Some("0"), _, _) => (cache.current(), true),
                (Some(rv), Some(RvMatch::Exact), _) | (Some(rv), None, Some(_)) => {
                    (cache.at(rv.parse().ok()?).ok()?, false)
                }
                (Some(rv), _, _) => {
                    let rv = rv.parse().ok()?;
                    let filter = Filter {
                        namespace: rp.namespace.clone(),
                        label: label.clone(),
                        field: field.clone(),
                    };
                    let namespaced = out.info.namespaced;
                    match fresh::not_older_than_listed(state, cache, namespaced, &filter, limit, rv)
                        .await
                    {
                        Some((proven, _)) => (proven_state(cache, Some(proven))?, true),
                        None => match not_older_than(state, cache, rv).await {
                            Ok(snap) => (snap, true),
                            Err(too_large) => return Some(too_large),
                        },
                    }
                }
            };
            (snap, None, latest)
        }
    };
    let query = Query {
        namespace: select::list_namespace(rp.namespace.as_deref(), field.as_ref(), start.is_some()),
        namespaced: out.info.namespaced,
        label: label.as_ref(),
        field: field.as_ref(),
        limit,
        start: start.as_deref(),
        upstream_indexes: if latest {
            FieldRules::for_resource(&out.info.group, &out.info.resource).index_fields()
        } else {
            &[]
        },
    };
    let gzip_ok = gzip::accepts_gzip(out.headers);
    let key = format!("{}|{}", out.page_key, snap.resource_version());
    if gzip_ok {
        if let Some(compressed) = out.pages.get(&key) {
            out.metrics.page_cache.with_label_values(&["hit"]).inc();
            return Some(gzipped(compressed, out));
        }
    }
    let page = select::select(&snap, &query);
    out.metrics.observe_cache_list(&out.info.label(), page.index, page.fetched);
    let rv = snap.resource_version().to_string();
    let meta = ListMeta {
        resource_version: &rv,
        continue_token: page.continue_token.as_deref().unwrap_or(""),
        remaining_item_count: page.remaining_item_count,
    };
    Some(encode_list(&page.items, &meta, out, Some(key.as_str())))
}

fn encode_object(obj: &CachedObject, out: &Out<'_>) -> Response<Body> {
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
            proto::partial_object_metadata(&obj.body, META_API_VERSION).map_err(|e| e.to_string())
        }
        (_, Shape::Table(include)) => super::table::object(info, obj, include),
    };
    finish(result, out, None)
}

fn encode_list(
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
        (Encoding::Protobuf, Shape::Metadata) => {
            proto::partial_object_metadata_list(META_API_VERSION, meta_out, &bodies)
                .map_err(|e| e.to_string())
        }
        (_, Shape::Table(include)) => super::table::list(info, items, meta_out, include),
    };
    finish(result, out, page_key)
}

fn content_type(out: &Out<'_>) -> &'static str {
    match out.encoding {
        Encoding::Json => JSON,
        Encoding::Protobuf => PROTOBUF,
    }
}

fn gzipped(compressed: bytes::Bytes, out: &Out<'_>) -> Response<Body> {
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
