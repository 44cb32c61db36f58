//! The registry rules of `apps/v1` deployments and replicasets that a client can see: the
//! defaults applied to every write (pkg/apis/apps/v1 `SetDefaults_Deployment`,
//! `SetDefaults_ReplicaSet`), status dropped on create, and which updates bump
//! `metadata.generation` (pkg/registry/apps/{deployment,replicaset}/strategy.go).
//!
//! Where the sim simplifies: no deployment or replicaset controller runs, so a deployment never
//! gets replicasets, a replicaset never gets pods, `status` and the
//! `deployment.kubernetes.io/revision` annotation stay as the last writer left them (tests write
//! them through the `Sim` handle, as a controller would through `/status`); the pod template is
//! not defaulted (the sim defaults no pod spec); nothing is validated (a selector that does not
//! match the template's labels is stored); `deployments/scale` and `replicasets/scale` are
//! listed by discovery but not served (404).

use serde_json::{json, Map, Value};

use super::kinds::Kind;

/// Which workload a kind is, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    Deployment,
    ReplicaSet,
}

fn workload(kind: &Kind) -> Option<Workload> {
    match (kind.group.as_str(), kind.resource.as_str()) {
        ("apps", "deployments") => Some(Workload::Deployment),
        ("apps", "replicasets") => Some(Workload::ReplicaSet),
        _ => None,
    }
}

/// Sets what the apiserver's defaulting sets when it decodes a write of a deployment or a
/// replicaset (every create and update, so a PUT that drops `spec.replicas` stores 1 again).
pub(super) fn apply_defaults(kind: &Kind, v: &mut Value) {
    let Some(w) = workload(kind) else { return };
    let Some(obj) = v.as_object_mut() else { return };
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else { return };
    // Both: `replicas` is a pointer, nil (absent or null) becomes 1.
    set_if_unset(spec, "replicas", json!(1));
    if w == Workload::ReplicaSet {
        return;
    }
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        if strategy.get("type").and_then(Value::as_str).unwrap_or_default().is_empty() {
            strategy.insert("type".into(), json!("RollingUpdate"));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
            if rolling.is_null() {
                *rolling = json!({});
            }
            if let Some(rolling) = rolling.as_object_mut() {
                set_if_unset(rolling, "maxUnavailable", json!("25%"));
                set_if_unset(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    set_if_unset(spec, "revisionHistoryLimit", json!(10));
    set_if_unset(spec, "progressDeadlineSeconds", json!(600));
}

/// `PrepareForCreate`: a new deployment or replicaset starts with an empty status, whatever
/// the client sent (only a controller writes it, through `/status`).
pub(super) fn clear_status_on_create(kind: &Kind, v: &mut Value) {
    if workload(kind).is_some() {
        if let Some(obj) = v.as_object_mut() {
            obj.insert("status".into(), json!({}));
        }
    }
}

/// `PrepareForUpdate`: whether an update bumps `metadata.generation`. Deployments count
/// annotation changes too, because the controller copies annotations to its replicasets.
pub(super) fn bumps_generation(kind: &Kind, prev: &Value, next: &Value) -> bool {
    let differs = |k: &str| prev.get(k) != next.get(k);
    match workload(kind) {
        Some(Workload::Deployment) => {
            differs("spec")
                || prev.pointer("/metadata/annotations") != next.pointer("/metadata/annotations")
        }
        _ => differs("spec"),
    }
}

/// Go's defaulting of a nil pointer field: absent or null becomes `val`.
fn set_if_unset(map: &mut Map<String, Value>, key: &str, val: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), val);
    }
}
