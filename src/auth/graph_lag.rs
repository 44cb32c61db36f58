//! A node's reads in the moment after a pod is bound to it: held until the Node authorizer's
//! graph has caught up, rather than sent to be refused.
//!
//! The apiserver's Node authorizer decides a kubelet's reads from a graph it builds from its
//! own informer on pods (`plugin/pkg/auth/authorizer/node`): for a moment after a pod is bound
//! to a node — measured on 1.36: median 0.3 s, at most 0.9 s — that node's reads of the pod, and
//! of the ConfigMaps, Secrets and claims in the pod's namespace that it uses, are refused ("no
//! relationship found between node ... and this object"). The kubelet starts those reads as
//! soon as it sees the pod, so directly its first tries are refused and retried after its
//! reflector's back-off (0.8–1.6 s); through kubeplex each refusal is passed through (a refusal
//! is never answered from memory, [`crate::auth`]) and costs the apiserver a request.
//!
//! Node mode holds such a read instead: a node's read of one named pod, ConfigMap, Secret,
//! PersistentVolumeClaim or ServiceAccount, in a namespace where a pod was bound to that node
//! (as a cache of pods shows it) less than `nodeGraphLag` ago, waits until that long after
//! kubeplex received the binding, then goes on as any read — to the cache if the upstream
//! grants it, upstream otherwise. Nothing is answered that the upstream would not answer at
//! that moment; the read reaches the upstream once, when the graph has caught up, instead of
//! being refused and retried, and the kubelet has it sooner than after its back-off. A read
//! whose binding no cache of pods shows (none runs, or the binding came in a relist) is not
//! held: it goes as before.

use std::time::{Duration, Instant};

use http::HeaderMap;

use super::impersonate::requested_impersonation;
use super::node::NodeAuth;
use super::review::{ResourceAttributes, UserInfo};
use crate::cache::CachedObject;
use crate::upstream::caches::Caches;

/// The Node authorizer's user prefix and group (`nodeidentifier.NodeIdentity`).
const NODE_PREFIX: &str = "system:node:";
const NODES_GROUP: &str = "system:nodes";

/// The core resources the Node authorizer grants a node through its pods, besides the pods
/// themselves (`graph_populator.go`: a pod's Secrets, ConfigMaps, claims and ServiceAccount).
const POD_SOURCES: &[&str] =
    &["configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"];

impl NodeAuth {
    /// Until when a read described by `attributes` is held (the module's rule), if at all. The
    /// read is the client's, or that of the user its `Impersonate-*` headers name — taken
    /// unchecked here, as a hold only delays the client's own read, which is then authorized
    /// as any read is.
    pub fn graph_hold(
        &self,
        caches: &Caches,
        client: Option<&UserInfo>,
        headers: &HeaderMap,
        attributes: &ResourceAttributes,
    ) -> Option<Instant> {
        let impersonated = requested_impersonation(headers);
        let user = match &impersonated {
            Some(target) => target.as_ref()?,
            None => client?,
        };
        hold_until(caches, self.graph_lag, node_of(user)?, attributes, Instant::now())
    }
}

/// The node a user is to the Node authorizer: `system:node:NAME` in the group `system:nodes`.
pub fn node_of(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_PREFIX).filter(|n| !n.is_empty())?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// Until when `node`'s read `attributes` is held: `lag` after the newest binding of a pod to
/// `node` that a running cache of pods received less than `lag` ago and that the read may
/// depend on (a pod of the read's namespace; for a read of a pod, that pod). `None`: not held.
pub fn hold_until(
    caches: &Caches,
    lag: Duration,
    node: &str,
    attributes: &ResourceAttributes,
    now: Instant,
) -> Option<Instant> {
    if lag.is_zero() || !held_kind(attributes) {
        return None;
    }
    let since = now.checked_sub(lag)?;
    let on_node = |o: &CachedObject| o.field("spec.nodeName") == Some(node);
    let wanted = |o: &CachedObject| {
        o.namespace == attributes.namespace
            && (attributes.resource != "pods" || o.name == attributes.name)
    };
    let newest = caches
        .running()
        .iter()
        .filter(|c| (c.info().group.as_str(), c.info().resource.as_str()) == ("", "pods"))
        .filter_map(|c| c.entered_since(since, on_node, wanted))
        .max()?;
    Some(newest + lag).filter(|until| *until > now)
}

/// A read of one named object of a kind the graph grants through pods, in a namespace.
fn held_kind(a: &ResourceAttributes) -> bool {
    let read = matches!(a.verb.as_str(), "get" | "list" | "watch");
    read && a.group.is_empty()
        && a.subresource.is_empty()
        && !a.namespace.is_empty()
        && !a.name.is_empty()
        && (a.resource == "pods" || POD_SOURCES.contains(&a.resource.as_str()))
}

#[cfg(test)]
mod tests;
