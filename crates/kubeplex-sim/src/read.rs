//! Get and list, with the apiserver's resourceVersion, paging and selector rules
//! (docs/design.md §2).

use std::sync::Arc;

use http::{HeaderMap, Response};

use super::encode;
use super::filter::Filter;
use super::kinds::Kind;
use super::repr::Repr;
use super::respond::Body;
use super::server::{SimState, Target};
use super::store::{Items, Obj, SnapshotError};
use crate::wire::continue_token;
use crate::wire::request::{parse_resource_version, ListOptions, RvMatch};
use crate::wire::status::Status;

/// Message of the apiserver's 410 for a list at a compacted resourceVersion.
const LIST_RV_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";
/// Message of the apiserver's 410 for a continue token older than compaction.
const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter, or use the \
    continue token in this response to retrieve the remainder of the results. Continuing with \
    the provided token results in an inconsistent list - objects that were created, modified, \
    or deleted between the time the first chunk was returned and now may show up in the list.";

pub async fn get(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let kind = &t.kind;
    let name = t.name.as_deref().unwrap_or("");
    // get: unset → most recent, "0" → any, N → not older than N.
    if let Some(rv) = opts.numeric_resource_version()? {
        wait_not_older_than(state, rv).await?;
    }
    let ns = t.namespace.as_deref().unwrap_or("");
    let obj = state
        .store
        .get(kind, ns, name)
        .ok_or_else(|| Status::not_found(&kind.group, &kind.resource, name))?;
    encode::object_response(kind, &obj, repr, opts, headers)
}

/// Waits (up to the apiserver's ~3 s) for the store to reach `rv`; 504 "Too large resource
/// version" otherwise.
pub async fn wait_not_older_than(state: &SimState, rv: u64) -> Result<u64, Status> {
    state
        .store
        .wait_for_rv(rv, state.config.too_large_rv_wait)
        .await
        .map_err(|current| Status::too_large_resource_version(rv, current))
}

/// How a list picks the state it is served from.
enum ListAt {
    /// The current state ("most recent", "any", or "not older than" once reached).
    Latest,
    /// Exactly this revision.
    Exact(u64),
}

pub async fn list(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    headers: &HeaderMap,
) -> Result<Response<Body>, Status> {
    let kind = &t.kind;
    let filter = Filter::new(kind, opts, t.namespace.as_deref())?;
    // The watch cache ignores `limit` at resourceVersion=0 (`computeListLimit`).
    let limit = opts
        .limit
        .filter(|l| *l > 0 && opts.resource_version.as_deref() != Some("0"))
        .map(|l| l as usize);

    let (at, start) = match &opts.continue_token {
        Some(token) => {
            if opts.resource_version.as_deref().is_some_and(|rv| rv != "0") {
                return Err(Status::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let tok = continue_token::decode(token)
                .map_err(|e| Status::bad_request(format!("invalid continue token: {e}")))?;
            // A negative RV is the apiserver's "inconsistent continuation" (issued with a 410):
            // continue from the key at the latest state.
            let at = if tok.rv > 0 { ListAt::Exact(tok.rv as u64) } else { ListAt::Latest };
            (at, Some(resume_key(t, &tok.start)))
        }
        None => {
            let rv = opts.resource_version.as_deref();
            let at = match (rv, opts.resource_version_match, limit) {
                (None | Some("0"), _, _) => ListAt::Latest,
                (Some(rv), Some(RvMatch::Exact), _) | (Some(rv), None, Some(_)) => {
                    ListAt::Exact(parse_resource_version(rv)?)
                }
                (Some(rv), _, _) => {
                    wait_not_older_than(state, parse_resource_version(rv)?).await?;
                    ListAt::Latest
                }
            };
            (at, None)
        }
    };

    // A consistent list (resourceVersion unset, no token): the watch cache asks etcd for
    // progress and has reached the list's RV afterwards (`ConsistentListFromCache`).
    if opts.resource_version.is_none() && opts.continue_token.is_none() {
        state.store.publish_progress_of(kind);
    }
    let (rv, items) = match at {
        ListAt::Latest => snapshot(state, kind, None).await?,
        ListAt::Exact(rv) => match snapshot(state, kind, Some(rv)).await {
            Err(s) if s.code == 410 && opts.continue_token.is_some() => {
                return Err(expired_continue(t, start.as_deref()));
            }
            other => other?,
        },
    };

    // `metadata.name=X` where the key can be built is a single-key read: no paging.
    let single_key = filter.exact_name().is_some() && (t.namespace.is_some() || !kind.namespaced);
    let limit = if single_key { None } else { limit };
    // The watch cache lists the latest state from its index where the selector pins an indexed
    // field (`waitAndListLatestRV` with `MatcherIndex`); a continued list walks the key range.
    let index = match at {
        ListAt::Latest if start.is_none() => filter.index_entry(kind),
        _ => None,
    };
    let page = select_page(kind, &items, &filter, t, start.as_deref(), index, limit);
    let continue_token =
        page.last_key.as_ref().map(|k| continue_token::encode(rv as i64, &start_key(t, k)));
    let remaining = match (&continue_token, filter.has_selector()) {
        (Some(_), false) => Some(page.remaining as i64),
        _ => None,
    };
    let list_meta =
        encode::ListMeta { resource_version: rv.to_string(), continue_token, remaining };
    encode::list_response(kind, &page.items, &list_meta, repr, opts, headers)
}

async fn snapshot(state: &SimState, kind: &Kind, at: Option<u64>) -> Result<(u64, Items), Status> {
    match state.store.snapshot(kind, at) {
        Ok(s) => Ok(s),
        Err(SnapshotError::TooOld) => Err(Status::expired(LIST_RV_TOO_OLD)),
        Err(SnapshotError::TooNew { .. }) => {
            let rv = at.unwrap_or(0);
            wait_not_older_than(state, rv).await?;
            state.store.snapshot(kind, at).map_err(|_| Status::expired(LIST_RV_TOO_OLD))
        }
    }
}

/// The 410 for a continue token whose revision was compacted, carrying a token that continues
/// inconsistently from the same key (rv -1), as the apiserver offers.
fn expired_continue(t: &Target, start: Option<&str>) -> Status {
    let mut s = Status::expired(CONTINUE_TOO_OLD);
    if let Some(key) = start {
        // `start` is already the first key to serve; the token's start is "last key + \0",
        // and resume_key() of that gives back `key`.
        let last = key.strip_suffix('\0').unwrap_or(key);
        s.continue_token = Some(continue_token::encode(-1, &start_key(t, last)));
    }
    s
}

struct Page {
    items: Vec<Arc<Obj>>,
    /// The key of the last item served when more matching items follow.
    last_key: Option<String>,
    /// Items left after this page (only meaningful without selectors).
    remaining: usize,
}

/// Filter-then-paginate, as the watch cache serves lists (`Cacher.GetList`): a page holds
/// `limit` matching items, and a continue token is issued as soon as any object of the range —
/// matching or not — follows a full page (so the next page may be empty). The range is the
/// key range from `start`, or only its objects in the index entry the list is read from.
/// `remainingItemCount` is known only when nothing is filtered.
fn select_page(
    kind: &Kind,
    items: &Items,
    filter: &Filter,
    t: &Target,
    start: Option<&str>,
    index: Option<(&str, &str)>,
    limit: Option<usize>,
) -> Page {
    let prefix = t.namespace.as_ref().map(|ns| format!("{ns}/"));
    let lower = match (start, &prefix) {
        (Some(s), _) => s.to_string(),
        (None, Some(p)) => p.clone(),
        (None, None) => String::new(),
    };
    let in_scope = |k: &String| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str()));
    let in_index = |o: &&Arc<Obj>| index.is_none_or(|entry| Filter::in_index_entry(kind, o, entry));
    let mut iter =
        items.range(lower..).take_while(|(k, _)| in_scope(k)).map(|(_, o)| o).filter(in_index);
    let mut page: Vec<Arc<Obj>> = Vec::new();
    let mut has_more = false;
    for o in iter.by_ref() {
        if limit.is_some_and(|l| page.len() >= l) {
            has_more = true;
            break;
        }
        if filter.matches(kind, o) {
            page.push(o.clone());
        }
    }
    let remaining = if has_more { 1 + iter.count() } else { 0 };
    let last_key = if has_more { page.last().map(|o| o.key.clone()) } else { None };
    Page { items: page, last_key, remaining }
}

/// The continue token's start key for the item with store key `key`: relative to the list's
/// key prefix (`/registry/<resource>[/<namespace>]`), followed by NUL so the next page starts
/// strictly after it.
fn start_key(t: &Target, key: &str) -> String {
    let rel = match &t.namespace {
        Some(ns) => key.strip_prefix(&format!("{ns}/")).unwrap_or(key).to_string(),
        None => key.to_string(),
    };
    format!("/{rel}\u{0}")
}

/// The store key a page resumes at (inclusive) for a token's start key.
fn resume_key(t: &Target, start: &str) -> String {
    let rel = start.strip_prefix('/').unwrap_or(start);
    match &t.namespace {
        Some(ns) => format!("{ns}/{rel}"),
        None => rel.to_string(),
    }
}
