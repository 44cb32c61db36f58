//! Lists in a strategic merge patch: merging by key (`mergeSlice`) and the `$setElementOrder`
//! directive (`mergePatchIntoOriginal`); their ordering is in `order.rs`.
//!
//! Go mutates the live list's backing array while merging, and `$setElementOrder` then orders
//! by what that array holds: [`LiveSlice`] reproduces those writes, and Go's scalar
//! de-duplication (which swaps with the last element) is copied as is.

use serde_json::{Map, Value};

use super::super::gojson::{fmt_v, go_eq, go_type, GoType};
use super::super::schema::{Lookup, Schema, Strategy};
use super::super::PatchError;
use super::order::{normalize_element_order, validate_order};
use super::{
    bad_arg_type, bad_patch_type, extract_key, merge_map, no_merge_key, panic, remove_directives,
    unhashable, DIRECTIVE, SET_ELEMENT_ORDER,
};

type Result<T> = std::result::Result<T, PatchError>;

/// `mergePatchIntoOriginal`: every `$setElementOrder/<list>` of the patch merges `<list>` (if
/// the patch has it) and orders the result; both keys leave the patch.
pub(super) fn merge_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema,
) -> Result<()> {
    let keys: Vec<String> =
        patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER)).cloned().collect();
    for key in keys {
        let Some(order) = patch.shift_remove(&key) else { continue };
        let Value::Array(order) = order else { return Err(bad_arg_type(GoType::Slice, &order)) };
        let list_key = extract_key(&key, SET_ELEMENT_ORDER)?;
        let live = list_at(original, &list_key)?;
        let patched = list_at(patch, &list_key)?;
        let lookup = schema.lookup(&list_key);
        let mut view = None;
        validate_order(patched.as_deref().unwrap_or_default(), &order, lookup.merge_key)?;
        let merged = match (&live, &patched) {
            (Some(live), None) => live.clone(),
            (None, Some(patched)) => match remove_directives(Value::Array(patched.clone())) {
                Some(Value::Array(items)) => items,
                _ => continue,
            },
            (Some(live), Some(patched)) => {
                if lookup.strategy.merging() == Strategy::Merge {
                    let merged = merge_into(live.clone(), patched.clone(), lookup, false)?;
                    // Go keeps looking at the live slice, whose backing array the merge
                    // rewrote in place.
                    view = Some(merged.live_view);
                    merged.items
                } else {
                    patched.clone()
                }
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = partition(merged, &order, lookup.merge_key)?;
        let live = view.or(live).unwrap_or_default();
        let kind = element_type(&live, patched.as_deref().unwrap_or_default())?;
        let ordered = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &live,
            lookup.merge_key,
            kind,
        )?;
        original.insert(list_key.clone(), Value::Array(ordered));
        patch.shift_remove(&list_key);
    }
    Ok(())
}

/// The list under `key`, if present; anything else there is Go's failed type assertion.
fn list_at(map: &Map<String, Value>, key: &str) -> Result<Option<Vec<Value>>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(bad_arg_type(GoType::Slice, other)),
    }
}

/// `mergeSlice` for a list whose field merges (or a `$deleteFromPrimitiveList`).
pub(super) fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    lookup: Lookup,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    Ok(merge_into(original, patch, lookup, is_delete_list)?.items)
}

/// A merged list, and what the caller's view of the live slice shows afterwards.
struct Merged {
    items: Vec<Value>,
    live_view: Vec<Value>,
}

fn merge_into(
    original: Vec<Value>,
    patch: Vec<Value>,
    lookup: Lookup,
    is_delete_list: bool,
) -> Result<Merged> {
    if original.is_empty() && patch.is_empty() {
        return Ok(Merged { items: Vec::new(), live_view: original });
    }
    let kind = element_type(&original, &patch)?;
    let merge_key = lookup.merge_key;
    if kind != GoType::Map {
        if is_delete_list {
            let items = delete_from_slice(original.clone(), &patch)?;
            return Ok(Merged { items, live_view: original });
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        let (patch_items, server_only) = partition(dedup_scalars(both), &patch, merge_key)?;
        let items =
            normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)?;
        return Ok(Merged { items, live_view: original });
    }
    if merge_key.is_empty() {
        return Err(PatchError::Internal(format!(
            "cannot merge lists without merge key for {}",
            lookup.element_name
        )));
    }
    let mut live = LiveSlice::new(original);
    let patch = merge_special_elements(&mut live, patch, merge_key)?;
    // mergeSlice's `original` now has the post-deletion length (or is the replacing items).
    let live_len = live.items.len();
    merge_items(&mut live, &patch, merge_key, lookup.schema)?;
    let server_order: Vec<Value> = live.items.iter().take(live_len).cloned().collect();
    let (patch_items, server_only) = partition(live.items, &patch, merge_key)?;
    let items =
        normalize_element_order(patch_items, server_only, &patch, &server_order, merge_key, kind)?;
    Ok(Merged { items, live_view: live.backing })
}

/// A Go slice over the live list's backing array, whose length is its capacity (the
/// apiserver's conversions allocate exactly). Deleting shifts items left in place; appending
/// writes into the slots that frees, until it outgrows them and Go reallocates; the caller's
/// view of the full array (`backing`) sees all of that.
struct LiveSlice {
    backing: Vec<Value>,
    items: Vec<Value>,
    /// Whether `items` still lives in `backing`.
    shared: bool,
}

impl LiveSlice {
    fn new(original: Vec<Value>) -> Self {
        LiveSlice { items: original.clone(), backing: original, shared: true }
    }

    /// `append(s[:idx], s[idx+1:]...)`: the tail moves one slot left, the last slot keeps its
    /// old item.
    fn remove(&mut self, idx: usize) {
        if idx < self.items.len() {
            self.items.remove(idx);
            if self.shared {
                for (slot, item) in self.backing.iter_mut().zip(&self.items).skip(idx) {
                    *slot = item.clone();
                }
            }
        }
    }

    fn set(&mut self, idx: usize, item: Value) {
        if self.shared {
            if let Some(slot) = self.backing.get_mut(idx) {
                *slot = item.clone();
            }
        }
        if let Some(slot) = self.items.get_mut(idx) {
            *slot = item;
        }
    }

    fn push(&mut self, item: Value) {
        let len = self.items.len();
        match self.backing.get_mut(len) {
            Some(slot) if self.shared => *slot = item.clone(),
            _ => self.shared = false,
        }
        self.items.push(item);
    }

    /// The slice becomes a fresh one (`$patch: replace`): no more writes reach the backing.
    fn replace_with(&mut self, items: Vec<Value>) {
        self.items = items;
        self.shared = false;
    }
}

/// `sliceElementType`: the one Go type of every item of both lists.
fn element_type(original: &[Value], patch: &[Value]) -> Result<GoType> {
    let mut first: Option<GoType> = None;
    for item in original.iter().chain(patch) {
        let ty = go_type(item);
        match first {
            // reflect.TypeOf(nil) is nil, and Go calls Kind() on it.
            None if ty == GoType::Nil => {
                return Err(panic(
                    "runtime error: invalid memory address or nil pointer dereference",
                ))
            }
            None if ty == GoType::Slice => {
                return Err(PatchError::Rejected("lists of lists are not supported".to_owned()))
            }
            None => first = Some(ty),
            Some(expected) if expected != ty => {
                let both = Value::Array(vec![
                    Value::Array(original.to_vec()),
                    Value::Array(patch.to_vec()),
                ]);
                return Err(PatchError::Internal(format!(
                    "list element types are not identical: {}",
                    fmt_v(&both)
                )));
            }
            Some(_) => {}
        }
    }
    first.ok_or_else(|| PatchError::Internal("no elements in any of the given slices".to_owned()))
}

/// `deleteFromSlice`: the live scalars not listed.
fn delete_from_slice(current: Vec<Value>, to_delete: &[Value]) -> Result<Vec<Value>> {
    let mut kept = Vec::with_capacity(current.len());
    for item in current {
        if !contains(to_delete, &item)? {
            kept.push(item);
        }
    }
    Ok(kept)
}

/// Membership in a Go `map[interface{}]bool` built from `set`: maps and slices cannot be keys.
fn contains(set: &[Value], item: &Value) -> Result<bool> {
    let unhashable_in = |v: &Value| matches!(v, Value::Object(_) | Value::Array(_));
    if set.iter().any(unhashable_in) {
        return Err(unhashable(set));
    }
    if unhashable_in(item) {
        return Err(unhashable(std::slice::from_ref(item)));
    }
    Ok(set.iter().any(|v| go_eq(v, item) == Ok(true)))
}

/// `deduplicateScalars`, which moves the last item into each duplicate's place.
fn dedup_scalars(mut items: Vec<Value>) -> Vec<Value> {
    let mut i = 0;
    while i + 1 < items.len() {
        let mut j = i + 1;
        while j < items.len() {
            if items.get(i) == items.get(j) {
                items.swap_remove(j);
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    items
}

/// `mergeSliceWithSpecialElements`: applies `$patch: delete` items to the live slice, notes
/// `$patch: replace` (the other items then become the list). Returns the patch items left.
fn merge_special_elements(
    live: &mut LiveSlice,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<Vec<Value>> {
    let mut rest = Vec::new();
    let mut replace = false;
    for item in patch {
        let Value::Object(map) = &item else { continue };
        let Some(directive) = map.get(DIRECTIVE) else {
            rest.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Some(value) = map.get(merge_key) else {
                    return Err(no_merge_key(map, merge_key));
                };
                while let Some(idx) = find_by_key(&live.items, merge_key, value)? {
                    live.remove(idx);
                }
            }
            // Keep going: the remaining `$patch` items still have to be dropped.
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::Internal(
                    "merging lists cannot yet be specified in the patch".to_owned(),
                ))
            }
            _ => return Err(bad_patch_type(directive, map)),
        }
    }
    if replace {
        live.replace_with(rest);
        return Ok(Vec::new());
    }
    Ok(rest)
}

/// `mergeSliceWithoutSpecialElements`: each patch item merges into the first live item with
/// its key, or is appended (where later patch items can find it).
fn merge_items(
    live: &mut LiveSlice,
    patch: &[Value],
    merge_key: &str,
    schema: Schema,
) -> Result<()> {
    for item in patch {
        let Value::Object(patch_map) = item else { continue };
        let Some(value) = patch_map.get(merge_key) else {
            return Err(no_merge_key(patch_map, merge_key));
        };
        match find_by_key(&live.items, merge_key, value)? {
            Some(idx) => {
                let current = match live.items.get(idx) {
                    Some(Value::Object(map)) => map.clone(),
                    _ => Map::new(),
                };
                live.set(idx, Value::Object(merge_map(current, patch_map.clone(), schema)?));
            }
            None => live.push(item.clone()),
        }
    }
    Ok(())
}

/// `findMapInSliceBasedOnKeyValue`: the first item whose merge key equals `value`.
fn find_by_key(list: &[Value], merge_key: &str, value: &Value) -> Result<Option<usize>> {
    for (idx, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(PatchError::Internal(format!("value for key {idx} is not a map")));
        };
        if let Some(candidate) = map.get(merge_key) {
            if go_eq(candidate, value).map_err(panic)? {
                return Ok(Some(idx));
            }
        }
    }
    Ok(None)
}

/// Splits `merged` into the items present in `by` (patch items) and the others (server-only),
/// by value for scalar lists, by merge key otherwise.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    // Go builds the set of `by` before looking anything up in it.
    if merge_key.is_empty() && by.iter().any(|v| matches!(v, Value::Object(_) | Value::Array(_))) {
        return Err(unhashable(by));
    }
    let mut in_patch = Vec::new();
    let mut server_only = Vec::new();
    for item in merged {
        let present = if merge_key.is_empty() {
            contains(by, &item)?
        } else {
            let Value::Object(map) = &item else { return Err(bad_arg_type(GoType::Map, &item)) };
            let Some(value) = map.get(merge_key) else { return Err(no_merge_key(map, merge_key)) };
            find_by_key(by, merge_key, value)?.is_some()
        };
        if present {
            in_patch.push(item);
        } else {
            server_only.push(item);
        }
    }
    Ok((in_patch, server_only))
}
