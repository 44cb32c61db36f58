//! The Node authorizer's grants kubeplex can decide for itself (`nodeAuthorizer: true`): a
//! node's reads that the apiserver's Node authorizer grants by a fixed rule, or through a pod
//! its graph has long known bound to that node, answered from the cache without a review.
//!
//! Why: a pool tier in front of thousands of nodes reviews each kubelet's reads one by one —
//! its pods, its Node, services, RuntimeClasses and CSIDrivers, and one ConfigMap or Secret by
//! name per object its pods use — and every node's reads differ by the user alone, so no
//! review answers another node's. At 2,000 nodes that was ~36,000 distinct
//! SubjectAccessReviews when the pool started, the first thing that gave way (BENCHMARKS.md,
//! "N = 2,000 through the pool"). Each of them the Node authorizer answers from rules kubeplex
//! can apply itself, with what its own caches show.
//!
//! The rules are 1.36's (`plugin/pkg/auth/authorizer/node/node_authorizer.go`, with
//! `AuthorizeNodeWithSelectors`, GA since 1.34), for a user `system:node:NAME` in the group
//! `system:nodes`, a read (`get`, `list`, `watch`) without a subresource:
//! - **its own Node** (`authorizeNode`): the name is NAME (`get`, or `metadata.name=NAME`);
//! - **its own pods** (`authorizePod`): `list`/`watch` whose field selector requires
//!   `spec.nodeName=NAME`; and a pod by name (`get`, or `metadata.name=X`) bound to NAME (the
//!   graph's edge from the pod to its node, as below);
//! - **the static node rules** for the kinds the switch does not subdivide (`NodeRules`, the
//!   `system:node` role's reads): services, RuntimeClasses and CSIDrivers (`get`, `list`,
//!   `watch`), endpoints (`get`);
//! - **a ConfigMap or Secret a pod bound to NAME uses** (`authorizeReadNamespacedObject`, the
//!   graph built by `graph_populator.go` with `podutil.VisitPodConfigmapNames` /
//!   `VisitPodSecretNames`): named (`get`, or `metadata.name=X`), in the pod's namespace. Only
//!   once kubeplex's own cache of pods has held the pod bound to NAME for
//!   [`graph_settled`] — twice `nodeGraphLag`, at least 3 s — so the apiserver's graph, which
//!   lags a watcher's view of a binding (median 0.3 s, at most 0.9–1.6 s measured on 1.36), has
//!   the edge; a pod loaded at a cache's start was bound before it, so a pool that restarts
//!   grants its nodes' reads 3 s after its caches load. Kubeplex looks at a subset of the
//!   graph's references — volumes with one source (`configMap`, `secret`, a projected volume's
//!   `configMap` and `secret`, a CSI volume's `nodePublishSecretRef`), containers' and init
//!   containers' `env` and `envFrom`, `imagePullSecrets` — never at a mirror pod's (the graph
//!   adds no edges for them) or at ephemeral containers' (added later, by an update): the
//!   wire crate's walk of a Pod spec, [`Walk::Settled`](crate::wire::pod::Walk::Settled).
//!
//! Only a grant is taken: anything else — another node's object, a pod bound a moment ago, a
//! reference kubeplex does not read, a cache of pods not running — is reviewed as before, and a
//! refusal is always the apiserver's. What this assumes, and why it is a setting: the upstream
//! authorizes with the Node authorizer and nothing ahead of it refuses such reads
//! (`--authorization-mode=Node,RBAC`, as kubeadm and the managed clusters run it).
//!
//! **A grant is only as current as the view it comes from.** The apiserver's graph drops a
//! pod's edges as soon as its informer sees the deletion; kubeplex's cache sees it as soon as
//! its own watch does — but only while that watch runs. So the rules that go through a pod
//! (a pod by name, a ConfigMap or Secret it uses) are applied only through a cache of pods
//! whose view is live ([`through_pods`]): its watch of the apiserver has run without a gap — no failed,
//! refused or throttled watch, no relist — for at least [`graph_settled`] (a relist replaces
//! what the cache knew, and a pod deleted and created again under the same name during the
//! gap comes back as changed, not new), and it heard from the upstream within
//! [`HEARD_WITHIN`](crate::cache::resource::HEARD_WITHIN) (a watch that stopped carrying what the apiserver sends would otherwise
//! look current). A state read back from disk grants nothing until its first load from the
//! upstream. A cache that watches a tier above kubeplex (a node tier's, fed by a pool) cannot
//! tell whether that tier's own watch is in a gap: a read such a view would grant goes up to
//! that tier unreviewed ([`Grant::Above`]), which decides it from its own view. Through a live view a grant outlives the pod by the watch's delay (milliseconds),
//! as a reviewed grant outlives a revocation by its TTL (`accessReviewAllowedTtl`, a minute);
//! an apiserver whose graph is still filling after its own restart would refuse for a moment
//! what its rule grants.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::graph_lag::{bound_to, node_of, pod_caches};
use super::review::{ResourceAttributes, UserInfo};
use crate::cache::resource::{ResourceCache, View, HEARD_WITHIN};
use crate::cache::{CachedObject, Encoding};
use crate::live::caches::Caches;
use crate::wire::codec;
use crate::wire::pod::{self, Referenced, Walk};
use crate::wire::selector::field::{FieldOperator, FieldSelector};

/// The rule a read was granted by (the metrics' `source="node_rules"` counts them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRule {
    OwnNode,
    OwnPods,
    /// A pod by name, bound to the node (the graph's pod → node edge).
    BoundPod,
    Static,
    /// A ConfigMap or Secret a pod bound to the node uses (secret/configmap → pod → node).
    PodReference,
}

/// The least time kubeplex's cache of pods must have held a binding before the graph's rule
/// is taken for it.
const MIN_GRAPH_SETTLED: Duration = Duration::from_secs(3);

/// How long kubeplex's cache must have held a pod bound to a node before the Node authorizer's
/// graph is taken to have its edges: twice `nodeGraphLag`, at least 3 s.
pub fn graph_settled(graph_lag: Duration) -> Duration {
    (graph_lag * 2).max(MIN_GRAPH_SETTLED)
}

/// What kubeplex makes of a node's read by the Node authorizer's rules ([`granted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Granted by this rule: the cache answers without a review.
    Rule(NodeRule),
    /// The rule would grant it through a pod that only a cache watching a tier above kubeplex
    /// (a pool) shows: that tier, which watches the apiserver itself, knows whether its view
    /// is live, and this one cannot. The read goes up to it as the client's, unreviewed here
    /// (it grants by the same rule from its own live view, or reviews it).
    Above,
}

/// What the Node authorizer's rules make of `user`'s read `a`, from what `caches` show at
/// `now` (module documentation); `None`: the read is reviewed.
pub fn granted(
    caches: &Caches,
    graph_lag: Duration,
    user: &UserInfo,
    a: &ResourceAttributes,
    now: Instant,
) -> Option<Grant> {
    let node = node_of(user)?;
    let rule = rule_for(node, a)?;
    let settled = || now.checked_sub(graph_settled(graph_lag));
    let through = match rule {
        NodeRule::BoundPod => bound_pod(caches, node, a, settled()?),
        NodeRule::PodReference => used_by_a_pod_of(caches, node, a, settled()?),
        _ => return Some(Grant::Rule(rule)),
    };
    match through? {
        Through::Live => Some(Grant::Rule(rule)),
        Through::Tier => Some(Grant::Above),
    }
}

/// The rule that grants `node` the read `a`, if one may: [`NodeRule::BoundPod`] and
/// [`NodeRule::PodReference`] only through a pod bound to `node`, which [`granted`] looks for.
fn rule_for(node: &str, a: &ResourceAttributes) -> Option<NodeRule> {
    let read = matches!(a.verb.as_str(), "get" | "list" | "watch");
    if !read || a.non_resource_path.is_some() || !a.subresource.is_empty() {
        return None;
    }
    match (a.group.as_str(), a.resource.as_str()) {
        ("", "nodes") => (a.name == node).then_some(NodeRule::OwnNode),
        ("", "pods") if own_pods(a, node) => Some(NodeRule::OwnPods),
        ("", "pods") => {
            (!a.namespace.is_empty() && !a.name.is_empty()).then_some(NodeRule::BoundPod)
        }
        ("", "configmaps" | "secrets") => {
            (!a.namespace.is_empty() && !a.name.is_empty()).then_some(NodeRule::PodReference)
        }
        ("", "services") | ("node.k8s.io", "runtimeclasses") | ("storage.k8s.io", "csidrivers") => {
            Some(NodeRule::Static)
        }
        ("", "endpoints") => (a.verb == "get").then_some(NodeRule::Static),
        _ => None,
    }
}

/// `authorizePod`'s grant of a list or watch: its field selector requires `spec.nodeName=NODE`
/// (`=` or `==`, which `fields.ParseSelector` both reads as `selection.Equals`). A selector
/// that does not parse grants nothing (the apiserver's requirements are then empty).
fn own_pods(a: &ResourceAttributes, node: &str) -> bool {
    if a.verb == "get" {
        return false;
    }
    let Some(selector) = a.field_selector.as_deref().and_then(|s| FieldSelector::parse(s).ok())
    else {
        return false;
    };
    selector.requirements().iter().any(|r| {
        r.field == "spec.nodeName" && r.operator == FieldOperator::Equals && r.value == node
    })
}

/// Through which view of pods a rule holds.
enum Through {
    /// A cache whose watch of the apiserver has run without a gap since the binding settled.
    Live,
    /// Only a cache watching a tier above kubeplex.
    Tier,
}

/// Whether a synced cache of pods shows what `holds` looks for, through which view: one that
/// is live since `settled` at the latest comes first (`ResourceCache::view`). A deletion the
/// apiserver's graph has already acted on may be missing from any other view — a watch failing,
/// refused or throttled, a relist, a state read back from disk, a watch silent past
/// [`HEARD_WITHIN`](crate::cache::resource::HEARD_WITHIN) — for as long as that lasts: those grant nothing.
fn through_pods(
    caches: &Caches,
    settled: Instant,
    holds: impl Fn(&ResourceCache) -> bool,
) -> Option<Through> {
    let mut via_tier = false;
    for cache in pod_caches(caches).filter(|c| c.is_synced()) {
        match cache.view(HEARD_WITHIN) {
            View::Live(since) if since <= settled && holds(&cache) => return Some(Through::Live),
            View::ViaTier if !via_tier => via_tier = holds(&cache),
            _ => {}
        }
    }
    via_tier.then_some(Through::Tier)
}

/// Whether a cache of pods holds the pod `a` names bound to `node` since `settled` at the
/// latest (`authorizeGet` of a pod: the graph's edge from the pod to its node; a mirror pod's
/// too), and through which view.
fn bound_pod(
    caches: &Caches,
    node: &str,
    a: &ResourceAttributes,
    settled: Instant,
) -> Option<Through> {
    let key = format!("{}/{}", a.namespace, a.name);
    through_pods(caches, settled, |cache| cache.held_since(&key, settled, bound_to(node)))
}

/// Whether a cache of pods holds a pod of `a`'s namespace bound to `node` since `settled` at
/// the latest that uses the ConfigMap or Secret `a` names, and through which view.
fn used_by_a_pod_of(
    caches: &Caches,
    node: &str,
    a: &ResourceAttributes,
    settled: Instant,
) -> Option<Through> {
    let secret = a.resource == "secrets";
    through_pods(caches, settled, |cache| {
        candidates(cache, &a.namespace, node).into_iter().any(|pod| {
            // Cheap first: the name's bytes are in the pod's, in either encoding (a name
            // is a DNS subdomain: JSON writes it unescaped).
            contains(&pod.body, a.name.as_bytes())
                && references(cache.encoding(), &pod.body, secret).contains(&a.name)
                && cache.held_since(&pod.key, settled, bound_to(node))
        })
    })
}

/// The pods of `namespace` bound to `node` in the cache now: through its `spec.nodeName`
/// index when it keeps one.
fn candidates(cache: &ResourceCache, namespace: &str, node: &str) -> Vec<Arc<CachedObject>> {
    let snapshot = cache.current();
    let prefix = format!("{namespace}/");
    let from = (Bound::Included(prefix.as_str()), Bound::Unbounded);
    let bound = bound_to(node);
    let on_node = |o: &&Arc<CachedObject>| bound(o);
    match snapshot.indexes().get("spec.nodeName") {
        Some(index) => index
            .keys(node)
            .into_iter()
            .flat_map(|keys| keys.range(from))
            .take_while(|k| k.starts_with(&prefix))
            .filter_map(|k| snapshot.get(k))
            .filter(on_node)
            .cloned()
            .collect(),
        None => snapshot
            .items()
            .range::<_, str>(from)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(_, o)| o)
            .filter(on_node)
            .cloned()
            .collect(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The ConfigMaps (or Secrets) a cached pod uses that the Node authorizer's graph links to it
/// (the subset in the module's documentation); none for a mirror pod, or one that cannot be
/// read.
fn references(encoding: Encoding, body: &[u8], secret: bool) -> Vec<String> {
    let object = match encoding {
        Encoding::Json => serde_json::from_slice::<Value>(body).ok(),
        Encoding::Protobuf => {
            codec::type_for("v1", "Pod").and_then(|t| codec::from_protobuf(t, body).ok())
        }
    };
    let Some(object) = object else { return Vec::new() };
    if pod::is_mirror(&object) {
        return Vec::new();
    }
    let what = if secret { Referenced::Secrets } else { Referenced::ConfigMaps };
    pod::referenced_names(&object["spec"], what, Walk::Settled)
}

#[cfg(test)]
mod tests;
