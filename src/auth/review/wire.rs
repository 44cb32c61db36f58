//! The review API's objects as kubeplex sends and reads them: `authentication.k8s.io/v1`
//! TokenReview and `authorization.k8s.io/v1` SubjectAccessReview (with the 1.31+ field and
//! label selectors of `resourceAttributes`), and what their answers mean.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Who a client is (`authentication/v1.UserInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A request without credentials, as the apiserver's anonymous authenticator names it.
    pub fn anonymous() -> Self {
        UserInfo {
            username: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..UserInfo::default()
        }
    }
}

/// What a bearer token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenIdentity {
    User(UserInfo),
    /// `authenticated: false`: the apiserver answers such a request 401.
    Invalid,
}

/// The read a client asks for (`authorization/v1.ResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceAttributes {
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The request's `fieldSelector` as sent (`rawSelector`), if any.
    pub field_selector: Option<String>,
    /// The request's `labelSelector` as sent, if any.
    pub label_selector: Option<String>,
    /// A request for a path that is not a resource (a discovery document): the review asks
    /// `nonResourceAttributes` {path, verb} and nothing else.
    pub non_resource_path: Option<String>,
}

impl ResourceAttributes {
    /// `verb` of the non-resource `path` (`get` of `/api/v1`).
    pub fn non_resource(verb: &str, path: &str) -> Self {
        ResourceAttributes {
            verb: verb.into(),
            non_resource_path: Some(path.into()),
            ..ResourceAttributes::default()
        }
    }
}

/// An authorization decision and the authorizers' reason (appended to a 403's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// A review that could not be done.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    #[error("review request failed: {0}")]
    Transport(String),
    /// Sent, but not answered within the review timeout.
    #[error("review request failed: {0}")]
    Timeout(String),
    #[error("upstream answered the review {status}")]
    Status { status: u16 },
    #[error("malformed review answer: {0}")]
    Decode(String),
}

impl ReviewError {
    /// Nothing upstream could decide: no connection, no answer in time, or 502/503/504.
    pub fn unreachable(&self) -> bool {
        match self {
            ReviewError::Transport(_) | ReviewError::Timeout(_) => true,
            ReviewError::Status { status } => matches!(status, 502..=504),
            ReviewError::Decode(_) => false,
        }
    }

    /// The upstream refused the review with 429 (priority and fairness: more reviews than
    /// their share): it is overloaded, and a read passed on to it would cost it more.
    pub fn throttled(&self) -> bool {
        matches!(self, ReviewError::Status { status: 429 })
    }

    /// The upstream took the review but did not decide it in time, or answered 503/504: it is
    /// overloaded — or down, when a read passed on would fail as well. A watch is then answered
    /// 429 too rather than passed on (`Verdict::Overloaded`): at 1,000 node tiers starting at
    /// once, ~31,000 reviews of their kubelets' named watches went unanswered for 10 s and
    /// ~10,000 of those watches were passed on to the already overloaded apiserver, each held
    /// there for minutes.
    pub fn overloaded(&self) -> bool {
        matches!(self, ReviewError::Timeout(_) | ReviewError::Status { status: 503 | 504 })
    }
}

/// The TokenReview that asks who `token` belongs to.
pub fn token_review(token: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "spec": {"token": token},
    })
}

/// What a TokenReview's answer says of the token.
pub fn token_identity(answer: TokenReview) -> TokenIdentity {
    match answer.status {
        Some(TokenReviewStatus { authenticated: true, user: Some(user), .. }) => {
            TokenIdentity::User(user)
        }
        _ => TokenIdentity::Invalid,
    }
}

/// The SubjectAccessReview that asks whether `user` may do `a`.
pub fn access_review(user: &UserInfo, a: &ResourceAttributes) -> serde_json::Value {
    let mut spec = match &a.non_resource_path {
        Some(path) => serde_json::json!({"nonResourceAttributes": {"path": path, "verb": a.verb}}),
        None => serde_json::json!({"resourceAttributes": resource_attributes(a)}),
    };
    spec["user"] = serde_json::json!(user.username);
    if !user.uid.is_empty() {
        spec["uid"] = serde_json::json!(user.uid);
    }
    if !user.groups.is_empty() {
        spec["groups"] = serde_json::json!(user.groups);
    }
    if !user.extra.is_empty() {
        spec["extra"] = serde_json::json!(user.extra);
    }
    serde_json::json!({
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": spec,
    })
}

/// `resourceAttributes`, with the fields the apiserver omits when empty left out.
fn resource_attributes(a: &ResourceAttributes) -> serde_json::Value {
    let mut attributes = serde_json::json!({
        "verb": a.verb,
        "group": a.group,
        "version": a.version,
        "resource": a.resource,
    });
    for (key, value) in
        [("namespace", &a.namespace), ("name", &a.name), ("subresource", &a.subresource)]
    {
        if !value.is_empty() {
            attributes[key] = serde_json::json!(value);
        }
    }
    if let Some(s) = &a.field_selector {
        attributes["fieldSelector"] = serde_json::json!({"rawSelector": s});
    }
    if let Some(s) = &a.label_selector {
        attributes["labelSelector"] = serde_json::json!({"rawSelector": s});
    }
    attributes
}

/// The decision a SubjectAccessReview's answer gives: `denied` is an explicit refusal; not
/// allowed and not denied is "no opinion", which the apiserver (with no authorizer left to ask)
/// refuses too.
pub fn decision(answer: AccessReview) -> Decision {
    let status = answer.status.unwrap_or_default();
    Decision { allowed: status.allowed && !status.denied, reason: status.reason }
}

#[derive(Deserialize)]
pub struct TokenReview {
    status: Option<TokenReviewStatus>,
}

#[derive(Deserialize)]
pub struct TokenReviewStatus {
    #[serde(default)]
    authenticated: bool,
    user: Option<UserInfo>,
}

#[derive(Deserialize)]
pub struct AccessReview {
    status: Option<AccessReviewStatus>,
}

#[derive(Deserialize, Default)]
pub struct AccessReviewStatus {
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    denied: bool,
    #[serde(default)]
    reason: String,
}
