//! Impersonation: the checks the apiserver's impersonation filter makes when a client asks to
//! act as someone else, and the headers with which kubeplex vouches upstream for a client
//! certificate's identity.

use http::{header, HeaderMap, HeaderValue};

use super::node::NodeAuth;
use super::refusal::Refusal;
use super::review::{ResourceAttributes, UserInfo};
use crate::wire::names::is_dns1123_subdomain;
use crate::wire::request::go_url::unescape_path;

/// The extra naming the node a ServiceAccount token is bound to (`serviceaccount.NodeNameKey`).
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
/// The extra an associated-node check authorizes a ServiceAccount with, in place of its own
/// extras (`associatedNodeImpersonationRequestorUserInfo`): the list of their keys.
const ASSOCIATED_NODE_KEYS: &str = "authentication.kubernetes.io/associated-node-keys";
const NODES_GROUP: &str = "system:nodes";
const AUTHENTICATED_GROUP: &str = "system:authenticated";
use crate::wire::status::{Refused, Status};

impl NodeAuth {
    /// The identity a certificate-authenticated client's own `Impersonate-*` headers ask for,
    /// once the upstream agrees that the client may impersonate each part of it (the
    /// apiserver's impersonation filter: `impersonate` on `users` — or the ServiceAccount —,
    /// `groups`, `uids` and `userextras/KEY`). `Ok(None)` when there are no such headers.
    ///
    /// `read`: the read from the cache the client asks for as that user, if it is one. A
    /// ServiceAccount bound to node NAME (a node tier's token) asking for `system:node:NAME` by
    /// name alone is then checked as kube-apiserver 1.36's constrained impersonation checks it
    /// ([`NodeAuth::associated_node`]) — shared by every node tier of that ServiceAccount.
    pub async fn impersonation(
        &self,
        client: &UserInfo,
        headers: &HeaderMap,
        read: Option<&ResourceAttributes>,
    ) -> Result<Option<UserInfo>, Refusal> {
        let Some(target) = requested_impersonation(headers) else { return Ok(None) };
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let Some(target) = target else {
            // Groups, a uid or extras without a user: the apiserver's filter refuses that as
            // an internal error.
            return Err(Refusal::Status(Status::internal(
                "requested impersonation of groups, a uid or extras without impersonating a user",
            )));
        };
        if let Some(read) = read {
            if let Some(node) = self.associated_node(client, &target, read).await {
                return Ok(Some(node));
            }
        }
        for attributes in impersonation_checks(&target) {
            if self.may_impersonate_any(client, &attributes).await {
                continue;
            }
            // A refusal here is kubeplex's answer to the client, so it must be the upstream's
            // current one: a remembered denial is asked again.
            let refused = match self.reviews.authorize_afresh(client, &attributes).await {
                Ok(d) if d.allowed => continue,
                Ok(d) => d.reason,
                // Overloaded (unanswered in time, 503/504): answered as throttled, so that the
                // client comes back later rather than have its reads passed on meanwhile.
                Err(e) if e.throttled() || e.overloaded() => return Err(Refusal::Throttled),
                Err(e) => {
                    tracing::warn!(error = %e, "impersonation review failed");
                    return Err(Refusal::Status(Status::service_unavailable(
                        "error trying to reach the upstream to review an impersonation",
                    )));
                }
            };
            let status = refusal(client, &attributes, &refused);
            return Err(Refusal::Forbidden { status, accept: accept.map(str::to_string) });
        }
        Ok(Some(target))
    }
}

impl NodeAuth {
    /// kube-apiserver 1.36's constrained impersonation in its associated-node mode
    /// (`endpoints/filters/impersonation/mode.go`), for a read from the cache: `client`, a
    /// ServiceAccount whose token is bound to node NAME (its one `node-name` extra), asks to be
    /// `system:node:NAME` by user name alone. The apiserver then asks its authorizers
    /// `impersonate-on:associated-node:VERB` on the read itself and `impersonate:associated-node`
    /// on `nodes` (`authentication.k8s.io`) named `*`, both for the client with its extras
    /// replaced by the list of their keys — so the answers hold for that ServiceAccount on
    /// every node, and kubeplex asks exactly those reviews: one pair for all the node tiers of
    /// a DaemonSet. The user is then `system:node:NAME` in `system:nodes`. The read's own review
    /// is asked whole, without its name and selectors, when the authorizers grant whole
    /// (`authorizersGrantWhole`). `None` when it does not apply or is not granted: the
    /// apiserver's other modes (and the legacy verb) are the caller's to try.
    async fn associated_node(
        &self,
        client: &UserInfo,
        target: &UserInfo,
        read: &ResourceAttributes,
    ) -> Option<UserInfo> {
        let node = target.username.strip_prefix("system:node:")?;
        let only_name =
            target.uid.is_empty() && target.groups.is_empty() && target.extra.is_empty();
        let bound = client.extra.get(NODE_NAME_KEY).filter(|v| v.len() == 1)?;
        let service_account = client.username.starts_with("system:serviceaccount:");
        if !only_name || !service_account || bound[0] != node || !is_dns1123_subdomain(node) {
            return None;
        }
        let keys: Vec<String> = client.extra.keys().cloned().collect();
        let keyed = UserInfo {
            extra: [(ASSOCIATED_NODE_KEYS.to_string(), keys)].into_iter().collect(),
            ..client.clone()
        };
        let on = ResourceAttributes {
            verb: format!("impersonate-on:associated-node:{}", read.verb),
            ..read.clone()
        };
        let whole = ResourceAttributes {
            name: String::new(),
            field_selector: None,
            label_selector: None,
            ..on.clone()
        };
        let granted = |d: Result<super::review::Decision, _>| matches!(d, Ok(d) if d.allowed);
        let on_whole = self.authorizers_grant_whole
            && whole != on
            && granted(self.reviews.authorize(&keyed, &whole).await);
        if !on_whole && !granted(self.reviews.authorize(&keyed, &on).await) {
            return None;
        }
        let associated = ResourceAttributes {
            verb: "impersonate:associated-node".into(),
            group: "authentication.k8s.io".into(),
            version: "v1".into(),
            resource: "nodes".into(),
            name: "*".into(),
            ..ResourceAttributes::default()
        };
        if !granted(self.reviews.authorize(&keyed, &associated).await) {
            return None;
        }
        Some(UserInfo {
            username: target.username.clone(),
            groups: vec![NODES_GROUP.into(), AUTHENTICATED_GROUP.into()],
            ..UserInfo::default()
        })
    }

    /// Whom kubeplex vouches for upstream when it passes a certificate client's request on:
    /// its own user and groups (the legacy `impersonate` verb on each) — or, bound to a node
    /// (`nodeImpersonation: associated-node`), that node's kubelet by user name alone, the
    /// form constrained impersonation grants a credential bound to that node (the apiserver
    /// then gives it `system:nodes` itself). Any other certificate client keeps its user and
    /// groups: the upstream refuses it unless RBAC grants the legacy verb.
    pub fn vouched(&self, user: UserInfo) -> UserInfo {
        let kubelet = self
            .bound_node
            .as_deref()
            .is_some_and(|n| user.username.strip_prefix("system:node:") == Some(n))
            && user.uid.is_empty()
            && user.extra.is_empty()
            && user.groups.iter().all(|g| g == NODES_GROUP || g == AUTHENTICATED_GROUP)
            && user.groups.iter().any(|g| g == NODES_GROUP);
        match kubelet {
            true => UserInfo { username: user.username, ..UserInfo::default() },
            false => user,
        }
    }

    /// Whether `client` may impersonate every user, which answers `check` (impersonating one
    /// user) without a review of its own: a SubjectAccessReview's empty name means all names
    /// (`ResourceAttributes.name`), and RBAC cannot narrow users but by whole names — so a
    /// node tier allowed to impersonate any user (components/legacy-impersonation),
    /// is reviewed once for all the kubelets it vouches for rather than once per node (at
    /// 2,000 nodes, ~2,000 reviews a minute for their Lease renewals alone). Only a grant is
    /// acted on: a denial (a cluster that names the users) or a failed review leaves the named
    /// check to decide, as before.
    ///
    /// Only when the upstream's authorizers grant a resource whole (`authorizersGrantWhole`): a
    /// webhook may refuse impersonating one user by name that RBAC grants for all.
    async fn may_impersonate_any(&self, client: &UserInfo, check: &ResourceAttributes) -> bool {
        if !self.authorizers_grant_whole
            || check.resource != "users"
            || !check.group.is_empty()
            || check.name.is_empty()
        {
            return false;
        }
        let any = ResourceAttributes { name: String::new(), ..check.clone() };
        matches!(self.reviews.authorize(client, &any).await, Ok(d) if d.allowed)
    }
}

/// The apiserver's 403 for `user` refused `attributes`, with the authorizers' reason.
fn refusal(user: &UserInfo, attributes: &ResourceAttributes, reason: &str) -> Status {
    let refused = Refused {
        user: &user.username,
        verb: &attributes.verb,
        group: &attributes.group,
        resource: &attributes.resource,
        subresource: &attributes.subresource,
        namespace: &attributes.namespace,
        name: &attributes.name,
        path: None,
    };
    Status::forbidden_request(&refused, reason)
}
/// The identity `Impersonate-*` headers ask for: `None` without such headers, `Some(None)`
/// when they name groups, a uid or extras but no user.
pub(super) fn requested_impersonation(headers: &HeaderMap) -> Option<Option<UserInfo>> {
    let mut any = false;
    let mut user = UserInfo::default();
    let mut has_user = false;
    for (name, value) in headers {
        let name = name.as_str();
        let Some(what) = name.strip_prefix("impersonate-") else { continue };
        any = true;
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match what {
            "user" => {
                has_user = true;
                user.username = value;
            }
            "group" => user.groups.push(value),
            "uid" => user.uid = value,
            _ => {
                if let Some(key) = what.strip_prefix("extra-") {
                    // Header names carry extra keys percent-encoded (`Impersonate-Extra-%2F`),
                    // which the apiserver reads with `url.PathUnescape`.
                    let key: String =
                        unescape_path(key).unwrap_or_else(|| key.to_string()).to_lowercase();
                    user.extra.entry(key).or_default().push(value);
                }
            }
        }
    }
    any.then(|| has_user.then_some(user))
}

/// The checks the apiserver's impersonation filter makes for `target`.
fn impersonation_checks(target: &UserInfo) -> Vec<ResourceAttributes> {
    let check = |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| {
        ResourceAttributes {
            verb: "impersonate".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..ResourceAttributes::default()
        }
    };
    let mut checks = Vec::new();
    // A ServiceAccount is impersonated as the `serviceaccounts` object it names.
    match target.username.strip_prefix("system:serviceaccount:").and_then(|r| r.split_once(':')) {
        Some((namespace, name)) => checks.push(check("", "serviceaccounts", "", namespace, name)),
        None => checks.push(check("", "users", "", "", &target.username)),
    }
    for g in &target.groups {
        checks.push(check("", "groups", "", "", g));
    }
    if !target.uid.is_empty() {
        checks.push(check("authentication.k8s.io", "uids", "", "", &target.uid));
    }
    for (key, values) in &target.extra {
        for v in values {
            checks.push(check("authentication.k8s.io", "userextras", key, "", v));
        }
    }
    checks
}

/// The `Impersonate-*` headers that make the upstream treat a request as `user`'s (kubeplex's
/// ServiceAccount holds the `impersonate` permission for that). The apiserver adds
/// `system:authenticated` to an impersonated user itself, so it is not sent.
pub fn impersonation_headers(user: &UserInfo) -> Vec<(String, HeaderValue)> {
    let mut out = Vec::new();
    let mut push = |name: String, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            out.push((name, v));
        }
    };
    push("impersonate-user".into(), &user.username);
    for g in user.groups.iter().filter(|g| g.as_str() != "system:authenticated") {
        push("impersonate-group".into(), g);
    }
    if !user.uid.is_empty() {
        push("impersonate-uid".into(), &user.uid);
    }
    for (key, values) in &user.extra {
        let key: String = key
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        for v in values {
            push(format!("impersonate-extra-{key}"), v);
        }
    }
    out
}

#[cfg(test)]
mod tests;
