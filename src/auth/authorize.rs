//! Authorization of reads from the cache: **only a grant is acted on** (the module's rule in
//! [`crate::auth`]).

use super::graph_lag::node_of;
use super::node::NodeAuth;
use super::review::{ResourceAttributes, UserInfo};
use crate::wire::request::{ListOptions, ResourcePath};
use crate::wire::selector::field::FieldSelector;

/// What the upstream's review said of a read from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Granted: the cache may answer it.
    Granted,
    /// Refused, or not decided (the review failed): the read is passed through, for the
    /// upstream's own answer.
    NotGranted,
    /// The upstream refused the review with 429: it is overloaded. The read is answered as
    /// the apiserver answers a request beyond its share — 429 with `Retry-After` — rather than
    /// passed on to it (a watch or a list passed on costs it far more than the review did;
    /// at 2,000 node tiers moving to one pool replica at once, ~460 reads whose reviews were
    /// refused so went to the apiserver as watches).
    Throttled,
    /// The review went unanswered in time, or was answered 503/504 (`ReviewError::overloaded`):
    /// a watch is answered 429 as for [`Verdict::Throttled`] (passed on, it would hold the
    /// overloaded apiserver for minutes); a get or list is passed through, as for a failure.
    Overloaded,
}

impl NodeAuth {
    /// Whether `user` may be answered the read `attributes` describes ([`read_attributes`])
    /// from the cache: only when the upstream grants it. A denial (fresh or remembered) or a
    /// failed review means the read is passed through, and the upstream answers it — a refusal
    /// included — as it would directly; a review the upstream throttled, that the read is
    /// answered 429 ([`Verdict::Throttled`]).
    ///
    /// `afresh` (a watch, or a read sent again after a refusal): a denial remembered for it is
    /// asked again rather than taken. A watch passed through holds an apiserver watch for its
    /// whole life (minutes), so one refused a moment ago — the Node authorizer's graph catching
    /// up with a pod just bound — is worth a fresh review when it is retried: granted now, the
    /// cache answers it. A grant remembered is used as for any read.
    pub async fn may_read_cached(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
        afresh: bool,
    ) -> Verdict {
        if self.may_read_all(user, attributes).await {
            return Verdict::Granted;
        }
        let decision = match afresh {
            true => self.reviews.authorize_afresh(user, attributes).await,
            false => self.reviews.authorize(user, attributes).await,
        };
        match decision {
            Ok(d) if d.allowed => Verdict::Granted,
            Ok(_) => Verdict::NotGranted,
            Err(e) if e.throttled() => {
                tracing::debug!(error = %e, "access review throttled; answering 429");
                Verdict::Throttled
            }
            Err(e) if e.overloaded() => {
                tracing::debug!(error = %e, "access review not answered in time");
                Verdict::Overloaded
            }
            Err(e) => {
                tracing::warn!(error = %e, "access review failed; passing the read through");
                Verdict::NotGranted
            }
        }
    }

    /// Whether `user` may do the read `attributes` describes without its name and selectors —
    /// the same verb of every object of the resource in the namespace — which answers the
    /// narrower read without a review of its own, when the upstream's authorizers grant a
    /// resource whole (`authorizersGrantWhole`): a client that may read all of them may then be
    /// shown any of them. RBAC grants a resource whole or by names, never by selectors, and the
    /// Node authorizer and ABAC refuse no part of what they grant whole; a webhook authorizer
    /// may (structured authorization configuration: CEL `matchConditions` see the name and the
    /// selectors, and a review of the whole matches none of them), so it is a setting, off by
    /// default. One identity that reads with a selector per node (a CNI agent's pods of its
    /// node) is then reviewed once, not once per node (at 2,000 node tiers behind a pool,
    /// ~4,000 reviews at its start). Likewise for a ServiceAccount whose token names the pod
    /// and node it is bound to and the credential (`extra`; every node tier's and every
    /// DaemonSet agent's token differs so): the review asks for the ServiceAccount without
    /// them — RBAC, Node and ABAC decide on the user and its groups alone. Not for a node: the Node authorizer grants a node only the
    /// narrower reads, so its wider review would be one more refused review per node. Only a
    /// grant is acted on: a denial, remembered or not, or a failed review leaves the read's
    /// own review to decide.
    async fn may_read_all(&self, user: &UserInfo, attributes: &ResourceAttributes) -> bool {
        if !self.authorizers_grant_whole {
            return false;
        }
        let narrowed = !attributes.name.is_empty()
            || attributes.field_selector.is_some()
            || attributes.label_selector.is_some();
        // One of a ServiceAccount's credentials: its token names the pod and node it is bound
        // to and the credential itself (`extra`), different on every node of a DaemonSet.
        let one_credential =
            user.username.starts_with("system:serviceaccount:") && !user.extra.is_empty();
        if !(narrowed || one_credential)
            || attributes.non_resource_path.is_some()
            || node_of(user).is_some()
        {
            return false;
        }
        let all = ResourceAttributes {
            name: String::new(),
            field_selector: None,
            label_selector: None,
            ..attributes.clone()
        };
        let any_credential = UserInfo { extra: Default::default(), ..user.clone() };
        matches!(self.reviews.authorize(&any_credential, &all).await, Ok(d) if d.allowed)
    }

    /// The upstream answered a read of `user`'s that was passed through with success: a
    /// denial remembered for it is out of date (the Node authorizer's graph caught up with a
    /// new pod, a RoleBinding was added), so the next such read is reviewed again rather than
    /// sent upstream on the strength of the old denial.
    pub async fn upstream_allowed(&self, user: &UserInfo, attributes: &ResourceAttributes) {
        self.reviews.forget_denial(user, attributes).await;
    }
}

/// The attributes of a read, as the apiserver's `RequestInfoFactory` derives them: a GET of a
/// named object is `get` (even with `watch=1`); of a collection `list` or `watch`, named by a
/// `metadata.name=X` field selector when it has one. `watch`: the request is a watch.
pub fn read_attributes(
    rp: &ResourcePath,
    options: Option<&ListOptions>,
    watch: bool,
) -> ResourceAttributes {
    let field_selector = options.and_then(|o| o.field_selector.clone()).filter(|s| !s.is_empty());
    let label_selector = options.and_then(|o| o.label_selector.clone()).filter(|s| !s.is_empty());
    let (verb, name) = match &rp.name {
        Some(name) => ("get", name.clone()),
        None => {
            let verb = if watch { "watch" } else { "list" };
            let named = field_selector
                .as_deref()
                .and_then(|s| FieldSelector::parse(s).ok())
                .and_then(|f| f.exact_value("metadata.name").map(str::to_string))
                .filter(|n| !n.is_empty() && n != "." && n != ".." && !n.contains(['/', '%']))
                .unwrap_or_default();
            (verb, named)
        }
    };
    ResourceAttributes {
        verb: verb.into(),
        group: rp.group.clone(),
        version: rp.version.clone(),
        resource: rp.resource.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        namespace: rp.namespace.clone().unwrap_or_default(),
        name,
        field_selector,
        label_selector,
        non_resource_path: None,
    }
}

#[cfg(test)]
mod tests;
