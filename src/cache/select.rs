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
//! Not decided here, because they depend on the request: `limit` is ignored at
//! `resourceVersion=0` (`computeListLimit`: pass `None`), and which state to list (the current
//! one, or `Store::at` for an exact RV or a continue token).

use std::ops::Bound;
use std::sync::Arc;

use crate::wire::continue_token;
use crate::wire::selector::fields_by_kind::FieldRules;
use crate::wire::selector::{FieldSelector, LabelSelector};

use super::object::{CachedObject, Encoding, PROTOBUF_FIELDS};
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
}

/// The page of `snapshot` that `query` asks for.
pub fn select(snapshot: &Snapshot, query: &Query<'_>) -> Page {
    let limit = query.limit.filter(|&n| n > 0);
    if let Some(key) = single_key(query) {
        // The registry turned the list into a get of one key: at most one object, no token.
        let items = snapshot.get(&key).filter(|o| matches(o, query)).cloned().into_iter().collect();
        return Page { items, continue_token: None, remaining_item_count: None };
    }

    let prefix = match query.namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/"),
        None => String::new(),
    };
    let mut from = prefix.clone();
    if let Some(start) = query.start {
        from.push_str(start.strip_prefix('/').unwrap_or(start));
    }
    let mut range = snapshot
        .items()
        .range::<_, str>((Bound::Included(from.as_str()), Bound::Unbounded))
        .take_while(|(key, _)| key.starts_with(&prefix))
        .map(|(_, object)| object);

    let unfiltered =
        query.label.is_none_or(|l| l.is_empty()) && query.field.is_none_or(|f| f.is_empty());
    let mut items = Vec::new();
    let mut has_more = false;
    let mut remaining_item_count = None;
    if unfiltered {
        items.extend(range.by_ref().take(limit.unwrap_or(usize::MAX)).cloned());
        let rest = if limit.is_some() { range.count() } else { 0 };
        has_more = rest > 0;
        remaining_item_count = has_more.then(|| i64::try_from(rest).unwrap_or(i64::MAX));
    } else {
        for object in range {
            if limit.is_some_and(|n| items.len() >= n) {
                // Reaching any object past a full page is how the cache learns a next page is
                // needed; whether it matches is not looked at.
                has_more = true;
                break;
            }
            if matches(object, query) {
                items.push(Arc::clone(object));
            }
        }
    }

    let continue_token = items.last().filter(|_| has_more).map(|last| {
        let start = continue_token::start_key(
            Some(&last.namespace),
            &last.name,
            query.namespace.is_some_and(|ns| !ns.is_empty()),
        );
        continue_token::encode(
            i64::try_from(snapshot.resource_version()).unwrap_or(i64::MAX),
            &start,
        )
    });
    Page { items, continue_token, remaining_item_count }
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
/// a cache of this encoding holds every field it names: a JSON cache holds all the selectable
/// fields of built-in kinds; a protobuf cache only `metadata.name` and `metadata.namespace`.
/// Custom resources' CRD `selectableFields` are not known, so those selectors are refused.
pub fn cacheable_field_selector(
    encoding: Encoding,
    group: &str,
    resource: &str,
    selector: &FieldSelector,
) -> Option<FieldSelector> {
    let converted = FieldRules::for_resource(group, resource).convert(selector).ok()?;
    let held = |field: &str| match encoding {
        Encoding::Json => true,
        Encoding::Protobuf => PROTOBUF_FIELDS.contains(&field),
    };
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

/// `validation.IsDNS1123Label`, which `ValidateNamespaceName` applies.
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && b.first().is_some_and(inner)
        && b.last().is_some_and(inner)
        && b.iter().all(|c| inner(c) || *c == b'-')
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
