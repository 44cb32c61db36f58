//! The strategic merge patch metadata of the served kinds: for each Go struct, which fields are
//! structs to recurse into and which lists merge by which key (`patchStrategy` /
//! `patchMergeKey` struct tags). This is the `PatchMetaFromStruct` lookup the apiserver does by
//! reflection on the typed object, read from a table generated from the Go sources
//! (`table.rs`, by `tools/gen-patch-schema.py` from k8s.io/api and apimachinery v0.36).

mod table;

/// A field's `patchStrategy` tag. A lone `retainKeys` is recorded as `None`: it only matters
/// to the client building the patch, the server acts on the `$retainKeys` directive wherever it
/// finds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    None,
    Merge,
    Replace,
    MergeRetainKeys,
}

impl Strategy {
    /// `extractRetainKeysPatchStrategy`: the strategy that decides list and map merging.
    pub(super) fn merging(self) -> Strategy {
        match self {
            Strategy::Merge | Strategy::MergeRetainKeys => Strategy::Merge,
            other => other,
        }
    }
}

/// What a field holds, as far as merging cares (the generator only emits fields of these two
/// shapes: Go tags no map or scalar field with a strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldShape {
    Struct,
    List,
}

/// One row of the generated table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FieldMeta {
    pub(super) json: &'static str,
    pub(super) shape: FieldShape,
    /// The struct the field (or each list element) decodes into, when it has rows of its own.
    pub(super) ty: &'static str,
    pub(super) strategy: Strategy,
    pub(super) merge_key: &'static str,
}

/// A table of structs and their merge-relevant fields.
pub(super) type Table = &'static [(&'static str, &'static [FieldMeta])];

/// The schema at some point of an object: a Go struct with rows in the table, or nothing known
/// (maps, scalars, structs without merge metadata), where every field is a plain field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Schema {
    table: Table,
    ty: Option<&'static str>,
}

/// What a lookup gives: the schema to recurse with, the field's strategy and merge key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lookup {
    pub(super) schema: Schema,
    pub(super) strategy: Strategy,
    pub(super) merge_key: &'static str,
    /// `LookupPatchMeta.Name()` of the list element type, for one error message.
    pub(super) element_name: &'static str,
}

/// The schema of a served kind, by `(group, resource)`.
pub(super) fn root(group: &str, resource: &str) -> Option<Schema> {
    table::ROOTS
        .iter()
        .find(|(g, r, _)| *g == group && *r == resource)
        .map(|(_, _, ty)| Schema { table: table::STRUCTS, ty: Some(ty) })
}

impl Schema {
    pub(super) const UNKNOWN: Schema = Schema { table: &[], ty: None };

    /// The schema of struct `ty` in another table (tests use the apimachinery test struct).
    #[cfg(test)]
    pub(super) fn of(table: Table, ty: &'static str) -> Schema {
        Schema { table, ty: Some(ty) }
    }

    /// `LookupPatchMetadataForStruct` / `ForSlice`: the metadata of field `key`.
    pub(super) fn lookup(self, key: &str) -> Lookup {
        let row = self.ty.and_then(|ty| {
            let (_, fields) = self.table.iter().find(|(name, _)| *name == ty)?;
            fields.iter().find(|f| f.json == key)
        });
        match row {
            Some(f) => Lookup {
                schema: Schema { table: self.table, ty: (!f.ty.is_empty()).then_some(f.ty) },
                strategy: f.strategy,
                merge_key: f.merge_key,
                // Lists with a strategy but no merge key are lists of strings.
                element_name: if f.shape == FieldShape::List && f.merge_key.is_empty() {
                    "string"
                } else {
                    "struct"
                },
            },
            None => Lookup {
                schema: Schema::UNKNOWN,
                strategy: Strategy::None,
                merge_key: "",
                element_name: "struct",
            },
        }
    }
}

#[cfg(test)]
mod tests;
