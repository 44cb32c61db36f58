//! Gets and lists answered from the cache, byte-compatible with kube-apiserver — or declined,
//! in which case the caller passes the request through. Declining is always safe; answering
//! is only done where the cache's answer is exactly what the apiserver would give.
//!
//! resourceVersion rules (docs/design.md §2) as the cache applies them:
//! - `"0"` (any): the cache's current state;
//! - `N` not-older-than (get with N; list with N and no limit; `NotOlderThan`): wait ~3 s for
//!   the cache to reach N (proving it there when the upstream is past N: [`fresh`](super::fresh)), then
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

use super::encode::{self, Out, Shape};
use super::fresh;
use super::prepare::{self, Read};
use super::read::CachedRead;
use crate::cache::fanout::Filter;
use crate::cache::resource::Encoding;
use crate::cache::select::{self, Query};
use crate::cache::store::Snapshot;
use crate::live::caches::Live;
use crate::live::freshness::{ConsistentRead, Proven};
use crate::serve::body::{self, Body};
use crate::serve::state::ProxyState;
use crate::wire::continue_token;
use crate::wire::gzip;
use crate::wire::meta::ListMeta;
use crate::wire::negotiate::{self, Endpoint};
use crate::wire::request::{ListOptions, ResourcePath, RvMatch};
use crate::wire::selector::fields_by_kind::FieldRules;
use crate::wire::status::Status;

/// What the cache would answer a get or list with, worked out before anything is asked of the
/// upstream or of a cache: `None` where only the apiserver answers (indented JSON, a
/// representation the cache does not hold, a consistent get, ...) — then no review is asked.
pub struct Plan {
    arrived: std::time::Instant,
    /// The cache (by encoding) that answers.
    encoding: Encoding,
    /// The encoding the answer is written in: the cache's, but for custom resources' metadata
    /// in protobuf, written from the JSON cache.
    answer: Encoding,
    shape: Shape,
    /// resourceVersion unset and no continue token: the most recent state.
    consistent: bool,
    /// Every object of its scope, in the cache's form, in one unpaged answer.
    whole: bool,
    /// A list's namespace and selectors, as the cache evaluates them (`None` for a get).
    filter: Option<Filter>,
}

impl Plan {
    /// The cache (by encoding) that would answer.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Whether it asks for every object of its scope in the cache's form, in one unpaged
    /// answer: what a cache of that scope loads, so that a cache it starts is fed by it.
    pub fn whole(&self) -> bool {
        self.whole
    }
}

/// The [`Plan`] of a get or list, or `None` to have it passed through.
pub fn plan(
    state: &ProxyState,
    read: &CachedRead<'_>,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<Plan> {
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
    let (encoding, answer, shape) = match super::table::requested(info, &neg, opts) {
        Some(include) => (Encoding::Json, Encoding::Json, Shape::Table(include)),
        None => {
            let form = prepare::cache_form(info, &neg, kind)?;
            let shape = if form.metadata { Shape::Metadata } else { Shape::Object };
            (form.cache, form.answer, shape)
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
    // A list of every object of its scope, in the cache's own form, in one unpaged answer:
    // what a cache of that scope loads, so that its answer can be a cold cache's first load.
    // At resourceVersion=0 the watch cache ignores `limit` (`computeListLimit`): an informer's
    // first list (`limit=500&resourceVersion=0`) gets all of it in one answer (one with a
    // continue token after all is not taken: `live::reflector::fed`).
    let any_state = opts.resource_version.as_deref() == Some("0");
    let unpaged = (opts.limit.is_none_or(|l| l <= 0) || any_state) && opts.continue_token.is_none();
    let not_exact = opts.resource_version_match != Some(RvMatch::Exact);
    let whole = rp.name.is_none() && shape == Shape::Object && unpaged && not_exact;
    // A list's selectors the cache cannot evaluate exactly are the apiserver's to answer.
    let filter = match &rp.name {
        Some(_) => None,
        None => {
            let (label, field) = prepare::selectors(info, encoding, opts)?;
            Some(Filter { namespace: rp.namespace.clone(), label, field })
        }
    };
    Some(Plan { arrived, encoding, answer, shape, consistent, whole, filter })
}

/// Answers a get or list from the cache as `plan` says, once the client may read it (node
/// mode's gate, asked by `route`), or returns `None` to have it passed through.
pub async fn answer(
    state: &Arc<ProxyState>,
    read: &CachedRead<'_>,
    cache: &Live,
    plan: Plan,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<Response<Body>> {
    let (info, rp, opts) = (read.info, read.rp, read.opts);
    let Plan { arrived, encoding: _, answer, shape, consistent, whole: _, filter } = plan;
    let proven = match (consistent, &filter) {
        (true, Some(filter)) => {
            let limit =
                opts.limit.filter(|l| *l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
            let namespaced = info.namespaced;
            let read = ConsistentRead { namespaced, filter, limit, watch: false, arrived };
            let (proven, _) = fresh::consistent(state, cache, &read).await.ok()?;
            Some(proven)
        }
        _ => None,
    };
    let page_key = format!(
        "{}|{answer:?}|{shape:?}|{}|{}",
        cache.describe(),
        rp.namespace.as_deref().unwrap_or(""),
        query.unwrap_or("")
    );
    let out = Out {
        info,
        encoding: answer,
        shape,
        headers,
        pages: &state.pages,
        metrics: &state.metrics,
        page_key,
    };
    match (&rp.name, &filter) {
        (Some(name), _) => get(state, cache, rp, opts, name, &out).await,
        (None, Some(filter)) => list(state, cache, rp, opts, filter, proven, &out).await,
        (None, None) => None,
    }
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
    Some(encode::object(&obj, out))
}

async fn list(
    state: &ProxyState,
    cache: &Live,
    rp: &ResourcePath,
    opts: &ListOptions,
    filter: &Filter,
    proven: Option<Proven>,
    out: &Out<'_>,
) -> Option<Response<Body>> {
    let (label, field) = (&filter.label, &filter.field);
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
                    let namespaced = out.info.namespaced;
                    match fresh::not_older_than_listed(state, cache, namespaced, filter, limit, rv)
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
            return Some(encode::gzipped(compressed, out));
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
    Some(encode::list(&page.items, &meta, out, Some(key.as_str())))
}
