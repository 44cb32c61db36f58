//! Secondary indexes of a state: for an indexed field, each value maps to the keys of the objects
//! holding it, in key order, so a list that pins the field to one value (every kubelet's
//! `pods?fieldSelector=spec.nodeName=<node>`) visits that value's objects, not the whole state.
//!
//! Indexes are persistent maps like the state itself: a snapshot carries its own at O(1) cost,
//! and an event touches an index only when it changes an indexed value (most pod updates are
//! status changes that leave the node alone).
//!
//! An object is indexed under the value a field selector compares, so that the index holds
//! exactly the objects a `field=value` term matches: a field its field set lacks reads as "".

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};

use crate::wire::selector::fields_by_kind::FieldRules;

use super::object::{holds_field, CachedObject, Encoding};

/// The keys of the objects holding one value, in key order. `Arc<str>` so that copying a
/// persistent node on a change costs reference counts, not string copies. A value held by one
/// object keeps that key on its own, not in a set of one (a set's node is a few hundred bytes:
/// measured, 26 MB for 100,000 objects in a `metadata.name` index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    One(Arc<str>),
    Many(OrdSet<Arc<str>>),
}

impl Keys {
    pub fn len(&self) -> usize {
        match self {
            Keys::One(_) => 1,
            Keys::Many(keys) => keys.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.range((Bound::Unbounded, Bound::Unbounded))
    }

    /// The keys within `bounds`, in order.
    pub fn range<'k>(
        &'k self,
        bounds: (Bound<&str>, Bound<&str>),
    ) -> impl Iterator<Item = &'k Arc<str>> + 'k {
        let (one, many) = match self {
            Keys::One(key) => {
                (Some(key).filter(|k| RangeBounds::<str>::contains(&bounds, &***k)), None)
            }
            Keys::Many(keys) => (None, Some(keys.range::<_, str>(bounds))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    fn insert(&mut self, key: Arc<str>) {
        match self {
            Keys::One(one) if *one == key => {}
            Keys::One(one) => {
                let mut keys = OrdSet::unit(one.clone());
                keys.insert(key);
                *self = Keys::Many(keys);
            }
            Keys::Many(keys) => {
                keys.insert(key);
            }
        }
    }

    /// Removes `key`; whether none is left.
    fn remove(&mut self, key: &str) -> bool {
        match self {
            Keys::One(one) => &**one == key,
            Keys::Many(keys) => {
                keys.remove(key);
                match keys.len() {
                    0 => true,
                    1 => {
                        *self =
                            Keys::One(keys.iter().next().cloned().unwrap_or_else(|| key.into()));
                        false
                    }
                    _ => false,
                }
            }
        }
    }
}

/// The fields every cache indexes: none. An index costs an entry and an allocation of the
/// value per object: a `metadata.name` index on every cache cost 5–13 MiB per cache of 100,000
/// ConfigMaps, 27 MiB for a JSON and a protobuf cache of them (`scripts/realcluster/memory.sh`:
/// RSS above the bytes held 1.33× → 1.30× JSON, 1.46× → 1.34× protobuf, 1.36× → 1.25× both),
/// for the lists by name across namespaces it served — which the apiserver's watch
/// cache answers by walking its objects too (it indexes only what the registry names: pods'
/// `spec.nodeName`); a list by name within a namespace is a get of one key
/// (`select::single_key`).
pub const DEFAULT_INDEXED_FIELDS: &[&str] = &[];

/// The fields a cache of this resource in this encoding indexes: those the apiserver indexes
/// ([`FieldRules::index_fields`]) when the encoding holds them (a protobuf cache holds what its
/// partial decode reads: pods' `spec.nodeName` among them).
pub fn indexed_fields(encoding: Encoding, group: &str, resource: &str) -> Vec<&'static str> {
    let mut fields = DEFAULT_INDEXED_FIELDS.to_vec();
    for &field in FieldRules::for_resource(group, resource).index_fields() {
        if holds_field(encoding, group, resource, field) && !fields.contains(&field) {
            fields.push(field);
        }
    }
    fields
}

/// One indexed field: value → keys of the objects with that value. Values with no object are
/// removed, so the map's size is the number of distinct values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldIndex {
    field: &'static str,
    entries: OrdMap<Arc<str>, Keys>,
}

impl FieldIndex {
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The keys of the objects whose field has `value`; `None` when there are none.
    pub fn keys(&self, value: &str) -> Option<&Keys> {
        self.entries.get(value)
    }

    /// The distinct values, in order, with their keys.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Keys)> {
        self.entries.iter().map(|(v, k)| (&**v, k))
    }

    fn insert(&mut self, value: &str, key: Arc<str>) {
        match self.entries.get_mut(value) {
            Some(keys) => keys.insert(key),
            None => {
                self.entries.insert(Arc::from(value), Keys::One(key));
            }
        }
    }

    fn remove(&mut self, value: &str, key: &str) {
        if self.entries.get_mut(value).is_some_and(|keys| keys.remove(key)) {
            self.entries.remove(value);
        }
    }
}

/// The indexes of a state, one per indexed field. Cloning costs one reference count per field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Indexes {
    fields: Vec<FieldIndex>,
}

impl Indexes {
    /// Empty indexes of `fields` (a field named twice is indexed once).
    pub fn new(fields: &[&'static str]) -> Self {
        let mut indexes = Self::default();
        for &field in fields {
            if indexes.get(field).is_none() {
                indexes.fields.push(FieldIndex { field, entries: OrdMap::new() });
            }
        }
        indexes
    }

    /// The index of `field`, if it is indexed.
    pub fn get(&self, field: &str) -> Option<&FieldIndex> {
        self.fields.iter().find(|i| i.field == field)
    }

    /// The indexed fields.
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields.iter().map(|i| i.field)
    }

    /// Records that the object at a key went from `old` to `new` (`None`: absent). Both, when
    /// given, must have the same key. Only values that changed touch an index: a key moves from
    /// its old value's entry to its new one's.
    pub fn update(&mut self, old: Option<&CachedObject>, new: Option<&CachedObject>) {
        for index in &mut self.fields {
            let before = old.map(|o| (indexed_value(o, index.field), o.key.as_str()));
            let after = new.map(|o| (indexed_value(o, index.field), o.key.as_str()));
            if before == after {
                continue;
            }
            if let Some((value, key)) = before {
                index.remove(value, key);
            }
            if let (Some((value, _)), Some(new)) = (after, new) {
                // The object's own key, shared.
                index.insert(value, new.key.shared());
            }
        }
    }
}

/// The value `object` is indexed under for `field`: what a selector term compares.
pub fn indexed_value<'a>(object: &'a CachedObject, field: &str) -> &'a str {
    object.field(field).unwrap_or("")
}

#[cfg(test)]
mod tests;
