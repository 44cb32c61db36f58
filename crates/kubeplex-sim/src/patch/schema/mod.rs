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
mod tests {
    use super::*;

    #[test]
    fn pod_lists_merge_by_their_go_tags() {
        let pod = root("", "pods").expect("pods are served");
        let spec = pod.lookup("spec");
        assert_eq!(spec.strategy, Strategy::None);
        let containers = spec.schema.lookup("containers");
        assert_eq!((containers.strategy, containers.merge_key), (Strategy::Merge, "name"));
        let ports = containers.schema.lookup("ports");
        assert_eq!((ports.strategy, ports.merge_key), (Strategy::Merge, "containerPort"));
        let env = containers.schema.lookup("env");
        assert_eq!((env.strategy, env.merge_key), (Strategy::Merge, "name"));
        let mounts = containers.schema.lookup("volumeMounts");
        assert_eq!((mounts.strategy, mounts.merge_key), (Strategy::Merge, "mountPath"));
        let volumes = spec.schema.lookup("volumes");
        assert_eq!((volumes.strategy, volumes.merge_key), (Strategy::MergeRetainKeys, "name"));
        assert_eq!(volumes.strategy.merging(), Strategy::Merge);
        // Tolerations have no strategy: replaced as a whole.
        assert_eq!(spec.schema.lookup("tolerations").strategy, Strategy::None);
        let conditions = pod.lookup("status").schema.lookup("conditions");
        assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
    }

    #[test]
    fn object_meta_lists() {
        for (group, resource) in [("", "configmaps"), ("events.k8s.io", "events"), ("", "nodes")] {
            let meta = root(group, resource).expect("served").lookup("metadata").schema;
            let owners = meta.lookup("ownerReferences");
            assert_eq!((owners.strategy, owners.merge_key), (Strategy::Merge, "uid"));
            let finalizers = meta.lookup("finalizers");
            assert_eq!((finalizers.strategy, finalizers.merge_key), (Strategy::Merge, ""));
            assert_eq!(finalizers.element_name, "string");
            assert_eq!(meta.lookup("managedFields").strategy, Strategy::None);
        }
    }

    #[test]
    fn other_served_kinds() {
        let svc = root("", "services").expect("served");
        let ports = svc.lookup("spec").schema.lookup("ports");
        assert_eq!((ports.strategy, ports.merge_key), (Strategy::Merge, "port"));
        let conditions = svc.lookup("status").schema.lookup("conditions");
        assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
        let node = root("", "nodes").expect("served");
        let addresses = node.lookup("status").schema.lookup("addresses");
        assert_eq!((addresses.strategy, addresses.merge_key), (Strategy::Merge, "type"));
        let cidrs = node.lookup("spec").schema.lookup("podCIDRs");
        assert_eq!((cidrs.strategy, cidrs.merge_key), (Strategy::Merge, ""));
        let sa = root("", "serviceaccounts").expect("served");
        assert_eq!(sa.lookup("secrets").merge_key, "name");
        let ns = root("", "namespaces").expect("served");
        assert_eq!(ns.lookup("spec").schema.lookup("finalizers").strategy, Strategy::None);
        assert_eq!(root("demo.kubeplex.io", "widgets"), None);
        // Workloads merge their template's containers by name, their conditions by type.
        for resource in ["deployments", "replicasets"] {
            let w = root("apps", resource).expect("served");
            let template = w.lookup("spec").schema.lookup("template").schema;
            let containers = template.lookup("spec").schema.lookup("containers");
            assert_eq!((containers.strategy, containers.merge_key), (Strategy::Merge, "name"));
            let conditions = w.lookup("status").schema.lookup("conditions");
            assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
        }
        assert_eq!(root("apps", "daemonsets"), None);
    }

    #[test]
    fn every_struct_reference_resolves() {
        for (_, fields) in table::STRUCTS {
            for f in *fields {
                if !f.ty.is_empty() {
                    assert!(table::STRUCTS.iter().any(|(n, _)| *n == f.ty), "{}", f.ty);
                }
            }
        }
        for (_, _, ty) in table::ROOTS {
            assert!(table::STRUCTS.iter().any(|(n, _)| n == ty), "{ty}");
        }
    }
}
