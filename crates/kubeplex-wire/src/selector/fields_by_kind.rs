//! Which fields each resource can be selected on, as kube-apiserver 1.36 decides it.
//!
//! Two tables in the apiserver matter and they differ:
//! - the field label conversion (`AddFieldLabelConversionFunc` in
//!   `pkg/apis/core/v1/conversion.go`; `runtime.DefaultMetaV1FieldSelectorConversion` for kinds
//!   without one; `crConverter.ConvertFieldLabel` for custom resources) says which field names a
//!   request may use, and words the 400 for any other;
//! - the registry's `GetAttrs` / `ToSelectableFields` (`pkg/registry/*/strategy.go`) builds the
//!   field set an object is matched against. A field the conversion accepts but the set lacks
//!   (pods' `status.podIPs`) reads as "", like any missing field in `fields.Set.Get`.
//!
//! Custom resources may also declare `selectableFields` in their CRD; those are not modelled
//! here, so a caller must pass such selectors through to the apiserver.
//!
//! The values are read through [`FieldSource`], so that a JSON object and the few fields a
//! partial protobuf decode takes (`wire::proto::fields`) are rendered by the same code.

use serde_json::Value;

use super::error::SelectorError;
use super::field::{FieldRequirement, FieldSelector};

/// The field selector rules of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRules {
    Pods,
    Nodes,
    Namespaces,
    Secrets,
    Events,
    Services,
    ReplicationControllers,
    PersistentVolumeClaims,
    /// Built-in resources with no conversion function of their own (configmaps, endpoints,
    /// endpointslices, leases, runtimeclasses, csidrivers, servicecidrs, and the other core
    /// resources): name and namespace only.
    MetaOnly,
    /// Custom resources: `metadata.name`, and `metadata.namespace` when namespaced.
    Custom {
        cluster_scoped: bool,
    },
}

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];
const NODE_FIELDS: &[&str] = &["metadata.name", "spec.unschedulable"];
const NAMESPACE_FIELDS: &[&str] = &["status.phase", "metadata.name"];
const SECRET_FIELDS: &[&str] = &["type", "metadata.namespace", "metadata.name"];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];
const SERVICE_FIELDS: &[&str] =
    &["metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"];
const RC_FIELDS: &[&str] = &["metadata.name", "metadata.namespace", "status.replicas"];
const META_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];
const CLUSTER_META_FIELDS: &[&str] = &["metadata.name"];

impl FieldRules {
    /// The rules for a resource by API group ("" for core) and plural resource name. Unknown
    /// core resources get [`FieldRules::MetaOnly`]; anything else not listed is taken for a
    /// namespaced custom resource.
    pub fn for_resource(group: &str, resource: &str) -> Self {
        match (group, resource) {
            ("", "pods") => Self::Pods,
            ("", "nodes") => Self::Nodes,
            ("", "namespaces") => Self::Namespaces,
            ("", "secrets") => Self::Secrets,
            ("", "events") => Self::Events,
            ("", "services") => Self::Services,
            ("", "replicationcontrollers") => Self::ReplicationControllers,
            ("", "persistentvolumeclaims") => Self::PersistentVolumeClaims,
            // Built-in kinds without a conversion function of their own
            // (`runtime.DefaultMetaV1FieldSelectorConversion`: name and namespace, even for the
            // cluster-scoped ones, whose namespace reads as "").
            ("", _)
            | ("discovery.k8s.io", "endpointslices")
            | ("coordination.k8s.io", "leases")
            | ("node.k8s.io", "runtimeclasses")
            | ("storage.k8s.io", "csidrivers")
            | ("networking.k8s.io", "servicecidrs") => Self::MetaOnly,
            _ => Self::Custom { cluster_scoped: false },
        }
    }

    /// The field names a request may select on (pods also accept `spec.host`, an old alias
    /// that [`FieldRules::convert`] rewrites to `spec.nodeName`).
    pub fn supported_fields(self) -> &'static [&'static str] {
        match self {
            Self::Pods => POD_FIELDS,
            Self::Nodes => NODE_FIELDS,
            Self::Namespaces => NAMESPACE_FIELDS,
            Self::Secrets => SECRET_FIELDS,
            Self::Events => EVENT_FIELDS,
            Self::Services => SERVICE_FIELDS,
            Self::ReplicationControllers => RC_FIELDS,
            Self::PersistentVolumeClaims | Self::MetaOnly => META_FIELDS,
            Self::Custom { cluster_scoped: false } => META_FIELDS,
            Self::Custom { cluster_scoped: true } => CLUSTER_META_FIELDS,
        }
    }

    /// The fields the apiserver's watch cache keeps an index of for this resource (the
    /// registry's `Indexers` and its predicate's `IndexFields`: pods by `spec.nodeName`, so that
    /// every kubelet's list of its own pods is cheap). A list at the latest state whose selector
    /// pins one of them with `=` is served from that index, which decides when a full page gets
    /// a continue token (see `cache::select`).
    pub fn index_fields(self) -> &'static [&'static str] {
        match self {
            Self::Pods => &["spec.nodeName"],
            _ => &[],
        }
    }

    /// The list handler's `FieldSelector.Transform(ConvertFieldLabel)`: the first term (in the
    /// selector's order) whose field is refused gives the 400; accepted terms come back with
    /// their canonical field name.
    pub fn convert(self, selector: &FieldSelector) -> Result<FieldSelector, SelectorError> {
        let mut out = Vec::with_capacity(selector.requirements().len());
        for r in selector.requirements() {
            let field = self.convert_label(&r.field)?;
            out.push(FieldRequirement { field: field.to_owned(), ..r.clone() });
        }
        Ok(FieldSelector::from_requirements(out))
    }

    fn convert_label(self, label: &str) -> Result<&str, SelectorError> {
        if self == Self::Pods && label == "spec.host" {
            // Backwards compatibility with old v1 clients (pkg/apis/core/v1/conversion.go).
            return Ok("spec.nodeName");
        }
        if self.supported_fields().contains(&label) {
            return Ok(label);
        }
        Err(match self {
            Self::PersistentVolumeClaims | Self::MetaOnly => {
                SelectorError::FieldNotKnown(label.to_owned())
            }
            _ => SelectorError::FieldNotSupported(label.to_owned()),
        })
    }

    /// The value `field` has in the object's apiserver field set, formatted as the apiserver
    /// formats it (booleans and counts as text, defaults for absent fields); `None` when the
    /// set has no such field, which a selector reads as "".
    pub fn field_value(self, obj: &(impl FieldSource + ?Sized), field: &str) -> Option<String> {
        let s = |path: &[&str]| str_at(obj, path);
        let namespaced =
            !matches!(self, Self::Nodes | Self::Namespaces | Self::Custom { cluster_scoped: true });
        match field {
            "metadata.name" => return Some(s(&["metadata", "name"])),
            "metadata.namespace" if namespaced => return Some(s(&["metadata", "namespace"])),
            _ => {}
        }
        let value = match (self, field) {
            (Self::Pods, "spec.nodeName") => s(&["spec", "nodeName"]),
            (Self::Pods, "spec.restartPolicy") => s(&["spec", "restartPolicy"]),
            (Self::Pods, "spec.schedulerName") => s(&["spec", "schedulerName"]),
            // v1 `serviceAccount` is the deprecated alias, used when the new field is empty.
            (Self::Pods, "spec.serviceAccountName") => Some(s(&["spec", "serviceAccountName"]))
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| s(&["spec", "serviceAccount"])),
            (Self::Pods, "spec.hostNetwork") => bool_at(obj, &["spec", "hostNetwork"]),
            (Self::Pods, "status.phase") => s(&["status", "phase"]),
            (Self::Pods, "status.podIP") => pod_ip(obj),
            (Self::Pods, "status.nominatedNodeName") => s(&["status", "nominatedNodeName"]),
            (Self::Nodes, "spec.unschedulable") => bool_at(obj, &["spec", "unschedulable"]),
            (Self::Namespaces, "status.phase") => s(&["status", "phase"]),
            // "name" is in these field sets as a kept-for-compatibility bug; the conversion
            // refuses it, so only a caller skipping `convert` could ever ask for it.
            (Self::Namespaces | Self::PersistentVolumeClaims, "name") => s(&["metadata", "name"]),
            (Self::Secrets, "type") => s(&["type"]),
            (Self::Events, _) => event_field(obj, field)?,
            (Self::Services, "spec.clusterIP") => s(&["spec", "clusterIP"]),
            (Self::Services, "spec.type") => s(&["spec", "type"]),
            (Self::ReplicationControllers, "status.replicas") => {
                obj.i64_at(&["status", "replicas"]).unwrap_or(0).to_string()
            }
            _ => return None,
        };
        Some(value)
    }
}

/// `FieldRules::for_resource(group, resource).supported_fields()`.
pub fn supported_fields(group: &str, resource: &str) -> &'static [&'static str] {
    FieldRules::for_resource(group, resource).supported_fields()
}

/// Whether the apiserver accepts the selector's fields for this resource; the error's `Display`
/// is its 400 message. Use [`FieldRules::convert`] to also get the canonical field names.
pub fn validate(
    group: &str,
    resource: &str,
    selector: &FieldSelector,
) -> Result<(), SelectorError> {
    FieldRules::for_resource(group, resource).convert(selector).map(|_| ())
}

/// `FieldRules::for_resource(group, resource).field_value(obj, field)`.
pub fn field_value(
    group: &str,
    resource: &str,
    obj: &(impl FieldSource + ?Sized),
    field: &str,
) -> Option<String> {
    FieldRules::for_resource(group, resource).field_value(obj, field)
}

/// The v1 fields of one object that [`FieldRules::field_value`] reads, by JSON path (object
/// members by name; a numeric segment is an index into an array, as in `status.podIPs.0.ip`).
/// Each method answers `None` when the field is absent or of another type, which the field set
/// reads as the Go zero value.
pub trait FieldSource {
    fn str_at(&self, path: &[&str]) -> Option<&str>;
    fn bool_at(&self, path: &[&str]) -> Option<bool>;
    fn i64_at(&self, path: &[&str]) -> Option<i64>;
}

impl FieldSource for Value {
    fn str_at(&self, path: &[&str]) -> Option<&str> {
        json_at(self, path)?.as_str()
    }

    fn bool_at(&self, path: &[&str]) -> Option<bool> {
        json_at(self, path)?.as_bool()
    }

    fn i64_at(&self, path: &[&str]) -> Option<i64> {
        json_at(self, path)?.as_i64()
    }
}

fn json_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| match v {
        Value::Array(items) => items.get(k.parse::<usize>().ok()?),
        _ => v.get(k),
    })
}

/// A string field of the v1 object, "" when absent (the Go struct's zero value).
fn str_at(obj: &(impl FieldSource + ?Sized), path: &[&str]) -> String {
    obj.str_at(path).unwrap_or_default().to_owned()
}

/// A bool field as `strconv.FormatBool` prints it, "false" when absent.
fn bool_at(obj: &(impl FieldSource + ?Sized), path: &[&str]) -> String {
    obj.bool_at(path).unwrap_or(false).to_string()
}

/// The internal pod's `Status.PodIPs[0].IP`: conversion from v1 makes `podIP` authoritative
/// when set, and falls back to `podIPs[0].ip`.
fn pod_ip(obj: &(impl FieldSource + ?Sized)) -> String {
    let ip = str_at(obj, &["status", "podIP"]);
    if !ip.is_empty() {
        return ip;
    }
    str_at(obj, &["status", "podIPs", "0", "ip"])
}

/// core/v1 Event's field set (`pkg/registry/core/event/strategy.go`).
fn event_field(obj: &(impl FieldSource + ?Sized), field: &str) -> Option<String> {
    let s = |path: &[&str]| str_at(obj, path);
    Some(match field {
        "involvedObject.kind" => s(&["involvedObject", "kind"]),
        "involvedObject.namespace" => s(&["involvedObject", "namespace"]),
        "involvedObject.name" => s(&["involvedObject", "name"]),
        "involvedObject.uid" => s(&["involvedObject", "uid"]),
        "involvedObject.apiVersion" => s(&["involvedObject", "apiVersion"]),
        "involvedObject.resourceVersion" => s(&["involvedObject", "resourceVersion"]),
        "involvedObject.fieldPath" => s(&["involvedObject", "fieldPath"]),
        "reason" => s(&["reason"]),
        "reportingComponent" => s(&["reportingComponent"]),
        // Events written through events.k8s.io/v1 have no source.component; the apiserver
        // falls back to the reporting controller.
        "source" => Some(s(&["source", "component"]))
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| s(&["reportingComponent"])),
        "type" => s(&["type"]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
