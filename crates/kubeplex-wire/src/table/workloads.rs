//! Row printers of the apps/v1 workloads (pkg/printers/internalversion printDeployment,
//! printReplicaSet).

use serde_json::Value;

use super::fields::{arr_at, at, int_at, present, str_at};
use super::row::Cell;
use crate::selector::LabelSelector;

/// `spec.replicas` as the printers see it: the apiserver decodes stored objects with defaulting,
/// so an unset (nil) pointer reads as 1.
fn desired_replicas(obj: &Value) -> i64 {
    present(obj, &["spec", "replicas"]).and_then(Value::as_i64).unwrap_or(1)
}

/// `layoutContainerCells`: the template's container names and images, each joined by ",".
fn container_cells(obj: &Value) -> (Cell, Cell) {
    let containers = arr_at(obj, &["spec", "template", "spec", "containers"]);
    let join =
        |field: &str| containers.iter().map(|c| str_at(c, &[field])).collect::<Vec<_>>().join(",");
    (Cell::Str(join("name")), Cell::Str(join("image")))
}

/// printDeployment: Name, Ready (`ready/desired`), Up-to-date, Available, Age, then the wide
/// Containers, Images and Selector (`LabelSelectorAsSelector(...).String()`, "<invalid>" on
/// error, "" for an empty selector).
pub(super) fn deployment_cells(obj: &Value, name: Cell, age: Cell) -> Vec<Cell> {
    let status = |field: &str| int_at(obj, &["status", field]);
    let (containers, images) = container_cells(obj);
    let selector = match LabelSelector::from_metav1(at(obj, &["spec", "selector"])) {
        Some(s) => s.to_string(),
        None => "<invalid>".to_string(),
    };
    vec![
        name,
        Cell::Str(format!("{}/{}", status("readyReplicas"), desired_replicas(obj))),
        Cell::Int(status("updatedReplicas")),
        Cell::Int(status("availableReplicas")),
        age,
        containers,
        images,
        Cell::Str(selector),
    ]
}

/// printReplicaSet: Name, Desired, Current, Ready, Age, then the wide Containers, Images and
/// Selector (`metav1.FormatLabelSelector`: "<error>" on error, "<none>" when empty).
pub(super) fn replica_set_cells(obj: &Value, name: Cell, age: Cell) -> Vec<Cell> {
    let (containers, images) = container_cells(obj);
    let selector = match LabelSelector::from_metav1(at(obj, &["spec", "selector"])) {
        Some(s) if s.is_empty() => "<none>".to_string(),
        Some(s) => s.to_string(),
        None => "<error>".to_string(),
    };
    vec![
        name,
        Cell::Int(desired_replicas(obj)),
        Cell::Int(int_at(obj, &["status", "replicas"])),
        Cell::Int(int_at(obj, &["status", "readyReplicas"])),
        age,
        containers,
        images,
        Cell::Str(selector),
    ]
}
