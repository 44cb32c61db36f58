//! The node-local mode's authentication and authorization, as one value the request paths
//! hold (its methods are in [`super::authenticate`], [`super::authorize`] and
//! [`super::impersonate`]).

use std::sync::Arc;

use tokio::task::JoinSet;

use super::review::Reviews;
use crate::live::disk::DiskStates;

/// The node-local mode's authentication and authorization.
pub struct NodeAuth {
    pub reviews: Reviews,
    /// Requests without credentials are `system:anonymous` (true) or refused with 401.
    pub anonymous: bool,
    /// How long after a pod's binding its node's reads that depend on it are held
    /// ([`super::graph_lag`]); zero: never.
    pub graph_lag: std::time::Duration,
    /// The upstream authorizes with the Node authorizer, and nothing ahead of it refuses what
    /// it grants: a node's reads it grants by rule are taken without a review
    /// ([`super::node_rules`]).
    pub node_authorizer: bool,
    /// The upstream's authorizers refuse no part of what they grant whole (RBAC, Node, ABAC;
    /// not a webhook that looks at names or selectors): a read narrowed by a name or selector
    /// is granted by a review of the whole resource, an impersonation of one user by a review
    /// of impersonating any ([`super::authorize`], [`super::impersonate`]). Off: each is
    /// reviewed as it is.
    pub authorizers_grant_whole: bool,
    /// The node this kubeplex's credential is bound to (`nodeImpersonation: associated-node`):
    /// its kubelet's requests go upstream as `Impersonate-User: system:node:NAME` alone —
    /// what kube-apiserver 1.36's constrained impersonation grants such a credential for its
    /// own node, and for no other ([`NodeAuth::vouched`]).
    pub bound_node: Option<String>,
    /// Bound ServiceAccount tokens verified here rather than by a TokenReview
    /// (`verifyServiceAccountTokens`, [`super::service_account`]).
    pub tokens: Option<Arc<super::service_account::TokenVerifier>>,
}

impl NodeAuth {
    /// Writes the last review answers to the state directory as often as the caches' states
    /// are written, for a restart during an outage ([`Reviews::save`]), in `tasks`.
    pub fn maintain(self: &Arc<Self>, disk: &Arc<DiskStates>, tasks: &mut JoinSet<()>) {
        let (node, disk) = (self.clone(), disk.clone());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(disk.interval());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                node.reviews.save(&disk).await;
            }
        });
    }
}
