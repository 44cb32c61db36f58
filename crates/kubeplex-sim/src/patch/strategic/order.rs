//! The order a strategic merge patch leaves a list in (`normalizeElementOrder`), and the check
//! that a `$setElementOrder` list agrees with its patch list.
//!
//! The result is the apiserver's exactly, which means reproducing how it gets there:
//! `sort.SliceStable` (insertion sort by blocks of 20, then `symMerge`) driven by a comparison
//! that is not a strict order, and the interleaving of server-only items with patch items by
//! their index in the live list.

use serde_json::Value;

use super::super::gojson::{fmt_v, go_eq, GoType};
use super::super::PatchError;
use super::{bad_arg_type, no_merge_key, panic, DIRECTIVE};

type Result<T> = std::result::Result<T, PatchError>;

/// `validatePatchWithSetOrderList`: the patch list's items must appear in the order list, in
/// that order (deletions and directive items aside).
pub(super) fn validate_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
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
pub(super) fn normalize_element_order(
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
