//! A node's reads in the moment after a pod is bound to it: refused by the Node authorizer
//! until its graph has caught up, and retried here until then rather than handed to the agent.
//!
//! The apiserver's Node authorizer decides a kubelet's reads from a graph it builds from its
//! own informer on pods (`plugin/pkg/auth/authorizer/node`): for a moment after a pod is bound
//! to a node — measured on 1.36: median 0.3 s, at most 0.9–1.6 s — that node's reads of the
//! pod, and of the ConfigMaps, Secrets and claims in the pod's namespace that it uses, are
//! refused ("no relationship found between node ... and this object"). The kubelet starts
//! those reads as soon as it sees the pod, and directly only a part of them meets a refusal
//! (~26% of pods, measured), each retried by the kubelet on its own schedule: the status
//! manager at its next status change or its 10 s sync, a reflector after its 0.8–1.6 s
//! back-off.
//!
//! A read is never delayed before the upstream has refused it: it goes on at once, as any read
//! (holding every such read for the graph's longest lag made every pod's first status 0.8 s
//! late with real kubelets, docs/design.md §7). Only when the upstream refuses it with the graph's
//! reason ([`is_graph_refusal`]) while a cache of pods shows a pod bound to that node that the
//! read may depend on, received less than `nodeGraphLag` ago ([`window_until`]), is it sent
//! again after short, growing back-offs ([`Backoff`]) until it is granted or that window ends;
//! the agent then gets the upstream's last answer. It waits at most as long as the apiserver
//! refuses it plus one back-off step, and a refusal is never answered from memory: every
//! answer is the upstream's own, at that moment. A read whose binding no cache of pods shows
//! (none runs, or the binding came in a relist) is not retried: its refusal goes to the agent
//! as directly. Nor is a WatchList: client-go falls back from a failed one to a list at
//! `resourceVersion=0` at once, faster than the consistent WatchList sent again would be
//! answered, and that list is retried (`serve::graph_retry`).

use std::time::{Duration, Instant};

use http::HeaderMap;

use super::impersonate::requested_impersonation;
use super::node::NodeAuth;
use super::review::{ResourceAttributes, UserInfo};
use crate::cache::resource::ResourceCache;
use crate::cache::CachedObject;
use crate::live::caches::Caches;

/// The Node authorizer's user prefix and group (`nodeidentifier.NodeIdentity`).
const NODE_PREFIX: &str = "system:node:";
const NODES_GROUP: &str = "system:nodes";

/// The core resources the Node authorizer grants a node through its pods, besides the pods
/// themselves (`graph_populator.go`: a pod's Secrets, ConfigMaps, claims and ServiceAccount).
const POD_SOURCES: &[&str] =
    &["configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"];

/// The reason the Node authorizer gives when its graph holds no path from the node to the
/// object (`node_authorizer.go`: "no relationship found between node '%s' and this object"),
/// at the end of the 403's message.
const NO_RELATIONSHIP: &[u8] = b"no relationship found between node '";

/// The first wait before a refused read is sent again, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_millis(25);
const MAX_BACKOFF: Duration = Duration::from_millis(400);

/// A node's read the Node authorizer may refuse for a moment after a binding: who reads, and
/// what.
#[derive(Debug, Clone)]
pub struct GraphRead {
    pub node: String,
    pub attributes: ResourceAttributes,
}

impl NodeAuth {
    /// The read `attributes` describes as the Node authorizer would decide it, if it is one it
    /// may refuse for a moment after a binding (`None`: never retried). The read is the
    /// client's, or that of the user its `Impersonate-*` headers name — taken unchecked here,
    /// as a retry only sends the client's own read again, authorized as any read is.
    pub fn graph_read(
        &self,
        client: Option<&UserInfo>,
        headers: &HeaderMap,
        attributes: ResourceAttributes,
    ) -> Option<GraphRead> {
        if self.graph_lag.is_zero() || !retried_kind(&attributes) {
            return None;
        }
        let impersonated = requested_impersonation(headers);
        let user = match &impersonated {
            Some(target) => target.as_ref()?,
            None => client?,
        };
        Some(GraphRead { node: node_of(user)?.to_string(), attributes })
    }
}

/// The node a user is to the Node authorizer: `system:node:NAME` in the group `system:nodes`.
pub fn node_of(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_PREFIX).filter(|n| !n.is_empty())?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// Whether a 403's body is the Node authorizer's refusal for want of a path in its graph — in
/// JSON or protobuf alike, as the message's bytes are the same in both.
pub fn is_graph_refusal(body: &[u8]) -> bool {
    body.windows(NO_RELATIONSHIP.len()).any(|w| w == NO_RELATIONSHIP)
}

/// Until when `read`, refused with the graph's reason at `now`, is retried: `lag` after the
/// newest binding of a pod to the read's node that a running cache of pods received less than
/// `lag` ago and that the read may depend on (a pod of the read's namespace; for a read of a
/// pod, that pod). `None`: not retried.
pub fn window_until(
    caches: &Caches,
    lag: Duration,
    read: &GraphRead,
    now: Instant,
) -> Option<Instant> {
    let since = now.checked_sub(lag)?;
    let attributes = &read.attributes;
    let on_node = bound_to(&read.node);
    let wanted = |o: &CachedObject| {
        o.namespace() == attributes.namespace
            && (attributes.resource != "pods" || o.name() == attributes.name)
    };
    let newest =
        pod_caches(caches).filter_map(|c| c.entered_since(since, &on_node, wanted)).max()?;
    Some(newest + lag).filter(|until| *until > now)
}

/// The running caches of pods (`core/v1`), whatever their scope.
pub(super) fn pod_caches(caches: &Caches) -> impl Iterator<Item = std::sync::Arc<ResourceCache>> {
    let pods = |c: &std::sync::Arc<ResourceCache>| {
        (c.info().group.as_str(), c.info().resource.as_str()) == ("", "pods")
    };
    caches.running().into_iter().filter(pods)
}

/// Whether a pod is bound to `node` (`spec.nodeName`), as the Node authorizer's graph links it.
pub(super) fn bound_to(node: &str) -> impl Fn(&CachedObject) -> bool + '_ {
    move |o| o.field("spec.nodeName") == Some(node)
}

/// When a refused read is sent again: after 25 ms, then twice as long each time (at most
/// 400 ms), the last time when the window ends — so that the agent's answer is the apiserver's
/// at that moment at the latest, never an older refusal, and comes at most one step after the
/// graph caught up.
#[derive(Debug)]
pub struct Backoff {
    until: Instant,
    step: Duration,
    done: bool,
}

/// One more send of a refused read: when, and whether it is the window's last (its answer is
/// then the agent's, whatever it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub at: Instant,
    pub last: bool,
}

impl Backoff {
    pub fn new(until: Instant) -> Self {
        Backoff { until, step: FIRST_BACKOFF, done: false }
    }

    /// The next send after a refusal at `now`; `None` once the window's last send was made.
    pub fn next(&mut self, now: Instant) -> Option<Retry> {
        if self.done {
            return None;
        }
        let at = (now + self.step).min(self.until).max(now);
        self.step = (self.step * 2).min(MAX_BACKOFF);
        self.done = at >= self.until;
        Some(Retry { at, last: self.done })
    }
}

/// A read of one named object of a kind the graph grants through pods, in a namespace.
fn retried_kind(a: &ResourceAttributes) -> bool {
    let read = matches!(a.verb.as_str(), "get" | "list" | "watch");
    read && a.group.is_empty()
        && a.subresource.is_empty()
        && !a.namespace.is_empty()
        && !a.name.is_empty()
        && (a.resource == "pods" || POD_SOURCES.contains(&a.resource.as_str()))
}

#[cfg(test)]
mod tests;
