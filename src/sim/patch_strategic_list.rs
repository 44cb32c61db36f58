//! Lists in a strategic merge patch: merging by key (`mergeSlice`), the `$setElementOrder`
//! directive (`mergePatchIntoOriginal`), and the ordering that follows both
//! (`normalizeElementOrder`).
//!
//! The resulting order is the apiserver's exactly, which means reproducing how it gets there:
//! Go's scalar de-duplication that swaps with the last element, `sort.SliceStable` (insertion
//! sort by blocks of 20 plus `symMerge`) driven by a comparison that is not a strict order, and
//! the interleaving of server-only items with patch items by their index in the live list.

use serde_json::{Map, Value};

use super::super::gojson::{fmt_v, go_eq, go_type, GoType};
use super::super::schema::{Lookup, Schema, Strategy};
use super::super::PatchError;
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
        let ordered =
            normalize_element_order(patch_items, server_only, &order, &live, lookup.merge_key, kind)?;
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
                return Err(panic("runtime error: invalid memory address or nil pointer dereference"))
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
fn merge_items(live: &mut LiveSlice, patch: &[Value], merge_key: &str, schema: Schema) -> Result<()> {
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
fn partition(merged: Vec<Value>, by: &[Value], merge_key: &str) -> Result<(Vec<Value>, Vec<Value>)> {
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

/// `validatePatchWithSetOrderList`: the patch list's items must appear in the order list, in
/// that order (deletions and directive items aside).
fn validate_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let items = if merge_key.is_empty() {
        patch_list.to_vec()
    } else {
        split_deletions(patch_list.to_vec())?.0
    };
    let (mut p, mut o) = (0, 0);
    while let (Some(item), Some(ordered)) = (items.get(p), order.get(o)) {
        if matches!(item, Value::Object(m) if m.contains_key(DIRECTIVE)) {
            p += 1;
            continue;
        }
        if merge_key_equal(item, ordered, merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() && o >= order.len() {
        return Err(PatchError::Internal(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            fmt_v(&Value::Array(patch_list.to_vec())),
            fmt_v(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

/// `mergeKeyValueEqual`.
fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return go_eq(left, right).map_err(panic);
    }
    let Value::Object(left) = left else { return Err(bad_arg_type(GoType::Map, left)) };
    let Value::Object(right) = right else { return Err(bad_arg_type(GoType::Map, right)) };
    let Some(l) = left.get(merge_key) else { return Err(no_merge_key(left, merge_key)) };
    let Some(r) = right.get(merge_key) else { return Err(no_merge_key(right, merge_key)) };
    go_eq(l, r).map_err(panic)
}

/// `extractToDeleteItems`: (items kept, `$patch: delete` items).
fn split_deletions(items: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut kept = Vec::new();
    let mut deleted = Vec::new();
    for item in items {
        let Value::Object(map) = &item else { return Err(bad_arg_type(GoType::Map, &item)) };
        if map.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
            deleted.push(item);
        } else {
            kept.push(item);
        }
    }
    Ok((kept, deleted))
}

/// `normalizeElementOrder`: patch items sorted by the patch order, server-only items by the
/// live order, then interleaved.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    let left = server_only
        .into_iter()
        .map(|item| Ok((index(server_order, &item, merge_key, kind)?, item)))
        .collect::<Result<Vec<_>>>()?;
    let right = patch_items
        .into_iter()
        .map(|item| Ok((index(server_order, &item, merge_key, kind)?, item)))
        .collect::<Result<Vec<_>>>()?;
    // mergeSortedSlice: a server-only item goes first only when both are in the live list and
    // it comes earlier there.
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut left, mut right) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((l, _)), Some((r, _))) => *l >= 0 && *r >= 0 && l < r,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next.map(|(_, item)| item));
    }
    Ok(out)
}

/// `normalizeSliceOrder`: sorts by position in `order`, deletion items last.
fn normalize_slice_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>> {
    let (items, deleted) = if kind == GoType::Map {
        for item in items.iter().chain(order) {
            let Value::Object(map) = item else { return Err(bad_arg_type(GoType::Map, item)) };
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        split_deletions(items)?
    } else {
        (items, Vec::new())
    };
    let mut keyed = items
        .into_iter()
        .map(|item| Ok((index(order, &item, merge_key, kind)?, item)))
        .collect::<Result<Vec<_>>>()?;
    stable_sort(&mut keyed);
    Ok(keyed.into_iter().map(|(_, item)| item).chain(deleted).collect())
}

/// `index`: the position in `list` of the first item equal to `item` (by merge key value for
/// maps, where a missing key is nil and equals another missing key), or -1.
fn index(list: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Result<i64> {
    let key_of = |v: &Value| -> Value {
        if kind == GoType::Map {
            v.as_object().and_then(|m| m.get(merge_key)).cloned().unwrap_or(Value::Null)
        } else {
            v.clone()
        }
    };
    let wanted = key_of(item);
    for (idx, candidate) in list.iter().enumerate() {
        if go_eq(&wanted, &key_of(candidate)).map_err(panic)? {
            return Ok(i64::try_from(idx).unwrap_or(i64::MAX));
        }
    }
    Ok(-1)
}

/// Go's `sort.SliceStable` with normalizeSliceOrder's `less`: by position when both items have
/// one, and "less" whenever either has none, which is not a consistent order, so the algorithm
/// itself (insertion sort on blocks of 20, then `symMerge`) is what decides.
fn stable_sort(data: &mut [(i64, Value)]) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b);
            a = b;
            b += 2 * block;
        }
        if a + block < n {
            sym_merge(data, a, a + block, n);
        }
        block *= 2;
    }
}

fn less(data: &[(i64, Value)], i: usize, j: usize) -> bool {
    match (data.get(i), data.get(j)) {
        (Some((x, _)), Some((y, _))) if *x >= 0 && *y >= 0 => x < y,
        _ => true,
    }
}

fn insertion_sort(data: &mut [(i64, Value)], a: usize, b: usize) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(data, j, j - 1) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge(data: &mut [(i64, Value)], a: usize, m: usize, b: usize) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(data, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i.saturating_sub(1) {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(data, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(data, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b);
    }
}

fn rotate(data: &mut [(i64, Value)], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

fn swap_range(data: &mut [(i64, Value)], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}
