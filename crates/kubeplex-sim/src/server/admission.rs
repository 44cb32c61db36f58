//! What the fake apiserver's admission refuses of a node's writes.

use super::SimState;
use crate::auth::{self, UserInfo};
use crate::wire::status::Status;

/// The NodeRestriction admission plugin (`plugin/pkg/admission/noderestriction`), for what
/// the Node authorizer lets every node write but admission limits to its own: a node modifies
/// only its own Node (`admitNode`: "node %q is not allowed to modify node %q"), and a pod's
/// status only for a pod bound to it (`admitPodStatus`). Its other rules (mirror pods, leases,
/// labels, claims) are not modelled.
pub(super) fn node_restriction(
    state: &SimState,
    user: &UserInfo,
    attrs: &auth::Attributes,
) -> Option<Status> {
    let node = user.username.strip_prefix("system:node:").filter(|_| user.in_group(auth::NODES))?;
    if !matches!(attrs.verb.as_str(), "update" | "patch") || !attrs.group.is_empty() {
        return None;
    }
    let forbidden = |resource: &str, why: String| {
        Status::new(403, "Forbidden", format!("{resource} \"{}\" is forbidden: {why}", attrs.name))
            .with_name_and_kind(&attrs.name, resource)
    };
    match (attrs.resource.as_str(), attrs.subresource.as_str()) {
        ("nodes", _) if attrs.name != node => Some(forbidden(
            "nodes",
            format!("node {node:?} is not allowed to modify node {:?}", attrs.name),
        )),
        ("pods", "status") => {
            let kind = state.registry.get("", "pods")?;
            let pod = state.store.get(kind, &attrs.namespace, &attrs.name)?;
            let bound = pod.value.pointer("/spec/nodeName").and_then(serde_json::Value::as_str);
            (bound != Some(node)).then(|| {
                forbidden(
                    "pods",
                    format!(
                        "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                    ),
                )
            })
        }
        _ => None,
    }
}
