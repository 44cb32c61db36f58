//! Node mode's gate in front of the cache: a read from the cache is answered only once the
//! upstream grants it to the client (`NodeAuth::may_read_cached`; for a watch, and for a read
//! sent again after a refusal, asking a remembered denial again). A
//! denial or a failed review sends the read upstream, where the apiserver answers it — a
//! refusal included — as it would without kubeplex. The serving layer asks it as a step of its
//! own (`serve::route`), once the cache could answer the read and before any cache is read or
//! started.

use http::HeaderMap;

use super::authorize::Verdict;
use super::node::NodeAuth;
use super::node_rules::{self, Grant};
use super::refusal::Refusal;
use super::review::{ResourceAttributes, UserInfo};
use crate::live::caches::Caches;

/// One read's gate: who reads (in node mode), and what.
pub struct Gate<'a> {
    /// The node-mode authorizer, the client's user and the read's attributes
    /// (`authorize::read_attributes`); `None` outside node mode, where the gate is open (the
    /// cache answers with kubeplex's identity only clients that share it).
    pub node: Option<(&'a NodeAuth, UserInfo, &'a ResourceAttributes)>,
    /// The request's headers when they ask to act as someone else: the read is then that
    /// user's, once the upstream agrees the client may impersonate them (the apiserver's
    /// impersonation filter: `impersonate` on each part) — as a node tier vouches for its
    /// kubelet at a pool tier. A refusal, or a failed check, keeps the gate shut.
    pub impersonation: Option<&'a HeaderMap>,
    /// A watch: reviewed afresh, as a read sent again is.
    pub watch: bool,
    /// The caches, whose pods show what the Node authorizer's graph holds
    /// (`nodeAuthorizer: true`, [`node_rules`]).
    pub caches: &'a Caches,
}

/// What the gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The upstream grants the read: the cache may answer it.
    Granted,
    /// The upstream's review refused it: the read goes upstream, for the apiserver's answer.
    Denied,
    /// Not positively authorized (an impersonation not vouched for, or its check failed): the
    /// read goes upstream.
    Unverified,
    /// The upstream throttled a review the read needed (429): the read is answered 429, as
    /// the overloaded apiserver would answer it, not passed on to it.
    Throttled,
}

impl Gate<'_> {
    /// Whether the read may be answered from the cache. `afresh`: a remembered denial is asked
    /// again rather than taken (a read sent again after a refusal).
    pub async fn open(&self, afresh: bool) -> Decision {
        let Some((node, client, attributes)) = &self.node else { return Decision::Granted };
        let target;
        let user = match self.impersonation {
            Some(headers) => match node.impersonation(client, headers, Some(attributes)).await {
                Ok(Some(t)) => {
                    target = t;
                    &target
                }
                Err(Refusal::Throttled) => return Decision::Throttled,
                _ => return Decision::Unverified,
            },
            None => client,
        };
        // A node's read the upstream's Node authorizer grants by a rule kubeplex can apply
        // itself: no review (`node_rules`; only a grant is taken, anything else is reviewed).
        if node.node_authorizer {
            let now = std::time::Instant::now();
            match node_rules::granted(self.caches, node.graph_lag, user, attributes, now) {
                Some(Grant::Rule(_)) => {
                    node.reviews.granted_by_node_rules();
                    node.reviews.remember_grant(user, attributes).await;
                    return Decision::Granted;
                }
                Some(Grant::Above) => return Decision::Unverified,
                None => {}
            }
        }
        match node.may_read_cached(user, attributes, self.watch || afresh).await {
            Verdict::Granted => Decision::Granted,
            Verdict::NotGranted => Decision::Denied,
            Verdict::Throttled => Decision::Throttled,
            Verdict::Overloaded if self.watch => Decision::Throttled,
            Verdict::Overloaded => Decision::Denied,
        }
    }
}
