//! A list answered from a state, as kube-apiserver's watch cache answers it (`Cacher.GetList`,
//! `watchCache.WaitUntilFreshAndGetList`, `storage.PrepareContinueToken`).
//!
//! The cache walks the list's key range in key order from the continue token's start key,
//! filters, and stops at `limit` matching objects. Two of its rules differ from "filter, then
//! cut a page", and clients see them, so they are kept:
//! - a page that is full gets a continue token as soon as *any* object follows in the range,
//!   matching or not (the next page may then be empty);
//! - `remainingItemCount` is only given without selectors, and counts every object after the page.
//!
//! When the field selector pins an indexed field to one value, the objects are read from the
//! state's index entry for it instead of the key range, in the same key order, with the same
//! result. What "the range" is for the token rule follows the apiserver, not this cache: its
//! watch cache serves a list at the latest state from *its* index where it has one (pods by
//! `spec.nodeName`), and then only that entry's objects are in range; at an exact RV or when
//! continuing it walks the key range (see [`Query::upstream_indexes`]).
//!
//! Not decided here, because they depend on the request: `limit` is ignored at
//! `resourceVersion=0` (`computeListLimit`: pass `None`), and which state to list (the current
//! one, or `Store::at` for an exact RV or a continue token).

use std::ops::Bound;
use std::sync::Arc;

use crate::wire::continue_token;
use crate::wire::names::is_dns1123_label;
use crate::wire::selector::fields_by_kind::FieldRules;
use crate::wire::selector::{FieldSelector, LabelSelector};

use super::index::{indexed_value, Keys};
use super::object::{holds_field, CachedObject, Encoding};
use super::store::Snapshot;

/// What a list asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<'a> {
    /// The namespace the list is confined to (its key prefix): the request's, or the one its
    /// field selector pins (see [`list_namespace`]). `None` lists every namespace, or a
    /// cluster-scoped resource.
    pub namespace: Option<&'a str>,
    /// Whether the resource is namespaced (discovery's `namespaced`). The apiserver reads a
    /// `metadata.name=` list as a single-key get only where it can build the key.
    pub namespaced: bool,
    pub label: Option<&'a LabelSelector>,
    /// Already converted by the resource's rules (`FieldRules::convert`, e.g. pods' `spec.host`
    /// is `spec.nodeName`), and evaluable from the cache ([`cacheable_field_selector`]).
    pub field: Option<&'a FieldSelector>,
    /// Page size; `None` or 0 for no limit.
    pub limit: Option<usize>,
    /// The decoded continue token's start key, relative to the list's prefix (`/name\0` within
    /// a namespace or for cluster-scoped objects, `/namespace/name\0` across namespaces).
    pub start: Option<&'a str>,
    /// The fields the apiserver's watch cache would answer this list from an index of
    /// (`FieldRules::index_fields`: pods' `spec.nodeName`), given only for a list at the latest
    /// state: `resourceVersion="0"`, or not older than an RV, without `continue`
    /// (`waitAndListLatestRV` with `MatcherIndex`, which takes the first one the selector pins
    /// with `=`). Only the objects of that index entry are then in the list's range, so a full
    /// page gets a continue token only if one of *them* follows. Empty at an exact RV or when
    /// continuing, where the apiserver walks the snapshot's key range.
    pub upstream_indexes: &'a [&'static str],
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// In key order.
    pub items: Vec<Arc<CachedObject>>,
    /// The token for the next page, carrying the state's RV.
    pub continue_token: Option<String>,
    /// Objects after this page; only without selectors, and only with a continue token.
    pub remaining_item_count: Option<i64>,
    /// The indexed field whose entry the objects were read from; `None` when the key range was.
    pub index: Option<&'static str>,
    /// Objects read from the state to build the page, matching or not (what the apiserver's
    /// `apiserver_cache_list_fetched_objects_total` counts).
    pub fetched: usize,
}

/// The page of `snapshot` that `query` asks for.
pub fn select(snapshot: &Snapshot, query: &Query<'_>) -> Page {
    let limit = query.limit.filter(|&n| n > 0);
    let mut page = Page {
        items: Vec::new(),
        continue_token: None,
        remaining_item_count: None,
        index: None,
        fetched: 0,
    };
    if let Some(key) = single_key(query) {
        // The registry turned the list into a get of one key: at most one object, no token.
        let object = snapshot.get(&key);
        page.fetched = usize::from(object.is_some());
        page.items.extend(object.filter(|o| matches(o, query)).cloned());
        return page;
    }

    let prefix = match query.namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/"),
        None => String::new(),
    };
    let mut from = prefix.clone();
    if let Some(start) = query.start {
        from.push_str(start.strip_prefix('/').unwrap_or(start));
    }
    let from = (Bound::Included(from.as_str()), Bound::Unbounded);
    let range = || {
        snapshot
            .items()
            .range::<_, str>(from)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .map(|(_, object)| object)
    };

    let unfiltered =
        query.label.is_none_or(|l| l.is_empty()) && query.field.is_none_or(|f| f.is_empty());
    let mut has_more = false;
    if unfiltered {
        let mut range = range();
        page.items.extend(range.by_ref().take(limit.unwrap_or(usize::MAX)).cloned());
        let rest = if limit.is_some() { range.count() } else { 0 };
        page.fetched = page.items.len() + rest;
        has_more = rest > 0;
        page.remaining_item_count = has_more.then(|| i64::try_from(rest).unwrap_or(i64::MAX));
    } else {
        page.fetched = match index_entry(snapshot, query) {
            Some((field, entry)) => {
                page.index = Some(field);
                let objects = entry
                    .into_iter()
                    .flat_map(|keys| keys.range(from))
                    .take_while(|key| key.starts_with(&prefix))
                    .filter_map(|key| snapshot.get(key));
                fill(&mut page.items, objects, query, limit)
            }
            None => fill(&mut page.items, range(), query, limit),
        };
        if let Some(last) = page.items.last().filter(|_| limit == Some(page.items.len())) {
            // Reaching any object past a full page is how the apiserver learns a next page is
            // needed; whether it matches is not looked at.
            has_more = anything_follows(snapshot, query, &prefix, &last.key);
        }
    }

    page.continue_token = page.items.last().filter(|_| has_more).map(|last| {
        let start = continue_token::start_key(
            Some(last.namespace()),
            last.name(),
            query.namespace.is_some_and(|ns| !ns.is_empty()),
        );
        continue_token::encode(
            i64::try_from(snapshot.resource_version()).unwrap_or(i64::MAX),
            &start,
        )
    });
    page
}

/// The smallest index entry holding every object the field selector can match: the entry of a
/// value it pins an indexed field to with `=` (`None` inside when no object has that value).
fn index_entry<'s>(
    snapshot: &'s Snapshot,
    query: &Query<'_>,
) -> Option<(&'static str, Option<&'s Keys>)> {
    let selector = query.field?;
    let indexes = snapshot.indexes();
    indexes
        .fields()
        .filter_map(|field| {
            let value = selector.exact_value(field)?;
            Some((field, indexes.get(field)?.keys(value)))
        })
        .min_by_key(|(_, keys)| keys.map_or(0, |k| k.len()))
}

/// Appends the objects that match to `items` until the page is full; returns how many objects
/// were read.
fn fill<'a>(
    items: &mut Vec<Arc<CachedObject>>,
    objects: impl Iterator<Item = &'a Arc<CachedObject>>,
    query: &Query<'_>,
    limit: Option<usize>,
) -> usize {
    let mut fetched = 0;
    for object in objects {
        fetched += 1;
        if matches(object, query) {
            items.push(Arc::clone(object));
            if limit.is_some_and(|n| items.len() >= n) {
                break;
            }
        }
    }
    fetched
}

/// Whether any object of the list's range follows `last`, the last object of a full page. The
/// range is the key prefix's objects or, when the apiserver would serve the list from its index
/// ([`Query::upstream_indexes`]), those of them in that index entry.
fn anything_follows(snapshot: &Snapshot, query: &Query<'_>, prefix: &str, last: &str) -> bool {
    let after = (Bound::Excluded(last), Bound::Unbounded);
    let pinned =
        query.upstream_indexes.iter().find_map(|&f| Some((f, query.field?.exact_value(f)?)));
    match pinned {
        Some((field, value)) => match snapshot.indexes().get(field) {
            Some(index) => index
                .keys(value)
                .and_then(|keys| keys.range(after).next())
                .is_some_and(|key| key.starts_with(prefix)),
            // A state without that index (`Snapshot::new`) gives the same answer, slowly.
            None => snapshot
                .items()
                .range::<_, str>(after)
                .take_while(|(key, _)| key.starts_with(prefix))
                .any(|(_, object)| indexed_value(object, field) == value),
        },
        None => snapshot
            .items()
            .range::<_, str>(after)
            .next()
            .is_some_and(|(k, _)| k.starts_with(prefix)),
    }
}

/// Whether the object passes the query's selectors (a field its field set lacks reads as "").
pub fn matches(object: &CachedObject, query: &Query<'_>) -> bool {
    query.label.is_none_or(|l| l.matches(object))
        && query
            .field
            .is_none_or(|f| f.requirements().iter().all(|r| r.matches(object.field(&r.field))))
}

/// The namespace a list is confined to. Besides the request's, a list across namespaces whose
/// field selector requires `metadata.namespace=<ns>` (a valid namespace name) is confined to it,
/// except when continuing (`Store.ListPredicate` and `SelectionPredicate.MatchesSingleNamespace`).
/// This decides the key prefix continue tokens are relative to.
pub fn list_namespace<'a>(
    request_namespace: Option<&'a str>,
    field: Option<&'a FieldSelector>,
    continuing: bool,
) -> Option<&'a str> {
    if let Some(ns) = request_namespace.filter(|ns| !ns.is_empty()) {
        return Some(ns);
    }
    if continuing {
        return None;
    }
    field?.exact_value("metadata.namespace").filter(|ns| is_dns1123_label(ns))
}

/// Whether a list with this field selector can be answered from a cache of this encoding; if
/// not, pass the request through (the upstream also gives the 400 for a refused field).
pub fn field_selector_supported(
    encoding: Encoding,
    group: &str,
    resource: &str,
    selector: &FieldSelector,
) -> bool {
    cacheable_field_selector(encoding, group, resource, selector).is_some()
}

/// The selector as [`select`] evaluates it (field names converted by the resource's rules), when
/// a cache of this encoding holds every field it names ([`holds_field`]): a JSON cache holds all
/// the selectable fields of built-in kinds; a protobuf cache those its partial decode reads, and
/// a selector on any other field is passed through rather than guessed. Custom resources' CRD
/// `selectableFields` are not known, so those selectors are refused.
pub fn cacheable_field_selector(
    encoding: Encoding,
    group: &str,
    resource: &str,
    selector: &FieldSelector,
) -> Option<FieldSelector> {
    let converted = FieldRules::for_resource(group, resource).convert(selector).ok()?;
    let held = |field: &str| holds_field(encoding, group, resource, field);
    converted.requirements().iter().all(|r| held(&r.field)).then_some(converted)
}

/// The key of the single-key get the registry makes of a list whose field selector requires
/// `metadata.name=<name>` (`SelectionPredicate.MatchesSingle`, then `KeyFunc`, which needs a
/// namespace for a namespaced resource and a valid path segment for a name).
fn single_key(query: &Query<'_>) -> Option<String> {
    if query.start.is_some() {
        return None;
    }
    let name = query.field?.exact_value("metadata.name")?;
    let valid = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']);
    if !valid {
        return None;
    }
    match query.namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => Some(CachedObject::key_for(ns, name)),
        None if !query.namespaced => Some(name.to_owned()),
        None => None,
    }
}

#[cfg(test)]
mod tests;
