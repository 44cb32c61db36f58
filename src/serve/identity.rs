//! Who a client is, and whether it may read what it asks the cache for: the node-local mode
//! (`--mode node`), where many agents with different identities share one kubeplex.
//!
//! Authentication follows the apiserver's union of authenticators, in its order:
//! 1. a client certificate verified against the client CA (`kubeplex_net::ClientCert`: user =
//!    CN, groups = O) — the x509 authenticator runs first, so a valid certificate wins over a
//!    token;
//! 2. a bearer token, by a TokenReview against the upstream (`upstream::review`);
//! 3. neither: `system:anonymous`, as with the apiserver's `--anonymous-auth` (or 401 when
//!    anonymous requests are switched off). A certificate that failed verification, or a token
//!    the upstream does not know, is 401 — never anonymous.
//!
//! Authorization: before anything from the cache is sent, a SubjectAccessReview asks the
//! upstream whether the identity may do that read — verb, resource, namespace, name, and the
//! request's field and label selectors, which the Node authorizer decides on. Watches are
//! authorized once, when they start, as the apiserver does.
//!
//! **Only a grant is acted on.** A read kubeplex cannot positively authorize — a denial, a
//! token the upstream did not accept, a review that failed — is passed through as the client
//! (its token as it is; a certificate's user impersonated), so that the apiserver gives its
//! *current* answer. A refusal is never replayed from kubeplex's memory: the Node authorizer
//! refuses a node's read of a pod for a moment after the pod is bound to it (its graph catches
//! up: median 0.3 s, up to ~0.9 s measured on 1.36), and a remembered refusal would outlive the
//! apiserver's own by the length of its TTL (DESIGN.md §7). Remembered denials only decide that
//! a read goes upstream, which costs the upstream exactly what the client would directly.

use std::sync::Arc;

use http::{header, HeaderMap, HeaderValue, Response};

use super::body::{self, Body};
use super::stack::{Class, Verb};
use crate::upstream::review::{ResourceAttributes, Reviews, TokenIdentity, UserInfo};
use crate::wire::negotiate::{self, MediaType};
use crate::wire::request::go_url::unescape_path;
use crate::wire::request::ResourcePath;
use crate::wire::selector::field::FieldSelector;
use crate::wire::status::{Refused, Status};

/// The node-local mode's authentication and authorization.
pub struct NodeAuth {
    pub reviews: Reviews,
    /// Requests without credentials are `system:anonymous` (true) or refused with 401.
    pub anonymous: bool,
}

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The sidecar mode: every client shares kubeplex's identity (a loopback listener in one
    /// pod); clients with credentials of their own are passed through with them.
    Shared,
    /// Authenticated by a verified client certificate.
    Certificate(UserInfo),
    /// Authenticated by its bearer token.
    Token(UserInfo),
    /// No credentials.
    Anonymous,
    /// The token could not be reviewed (the upstream is unreachable, or answered oddly), or the
    /// upstream did not accept it: the request is passed through as it is, and the upstream
    /// decides (a 401 is the upstream's to give, when it gives it).
    Unreviewed,
}

impl Identity {
    /// The user a SubjectAccessReview asks about; `None` when the cache must not answer.
    pub fn user(&self) -> Option<UserInfo> {
        match self {
            Identity::Certificate(u) | Identity::Token(u) => Some(u.clone()),
            Identity::Anonymous => Some(UserInfo::anonymous()),
            Identity::Shared | Identity::Unreviewed => None,
        }
    }

    /// The user's name for the access log: empty for the shared identity, `?` for a token
    /// that could not be reviewed.
    pub fn user_name(&self) -> String {
        match self {
            Identity::Certificate(u) | Identity::Token(u) => u.username.clone(),
            Identity::Anonymous => UserInfo::anonymous().username,
            Identity::Shared => String::new(),
            Identity::Unreviewed => "?".to_string(),
        }
    }
}

impl NodeAuth {
    /// Who sent a request, or the 401 the apiserver would answer.
    pub async fn authenticate(
        &self,
        extensions: &http::Extensions,
        headers: &HeaderMap,
    ) -> Result<Identity, Box<Response<Body>>> {
        if let Some(cert) = extensions.get::<kubeplex_net::ClientCert>() {
            return Ok(Identity::Certificate(UserInfo {
                username: cert.user.clone(),
                uid: cert.uid.clone().unwrap_or_default(),
                groups: cert.groups.clone(),
                ..UserInfo::default()
            }));
        }
        let rejected = extensions.get::<kubeplex_net::RejectedClientCert>().is_some();
        if let Some(token) = bearer_token(headers) {
            return match self.reviews.authenticate(token).await {
                Ok(TokenIdentity::User(user)) => Ok(Identity::Token(user)),
                // Not replayed: the upstream answers the request itself (its 401, or a grant
                // for a token it has come to accept since).
                Ok(TokenIdentity::Invalid) => Ok(Identity::Unreviewed),
                Err(e) => {
                    tracing::warn!(error = %e, "token review failed; passing the request through as it is");
                    Ok(Identity::Unreviewed)
                }
            };
        }
        if rejected || !self.anonymous {
            return Err(Box::new(unauthorized()));
        }
        Ok(Identity::Anonymous)
    }

    /// Whether `user` may be answered the read `class` describes from the cache: only when the
    /// upstream grants it. A denial (fresh or remembered) or a failed review means the read is
    /// passed through, and the upstream answers it — a refusal included — as it would directly.
    pub async fn may_read_cached(&self, user: &UserInfo, class: &Class, rp: &ResourcePath) -> bool {
        let attributes = read_attributes(class, rp);
        match self.reviews.authorize(user, &attributes).await {
            Ok(d) => d.allowed,
            Err(e) => {
                tracing::warn!(error = %e, "access review failed; passing the read through");
                false
            }
        }
    }

    /// The upstream answered a read of `user`'s that was passed through with success: a
    /// denial remembered for it is out of date (the Node authorizer's graph caught up with a
    /// new pod, a RoleBinding was added), so the next such read is reviewed again rather than
    /// sent upstream on the strength of the old denial.
    pub async fn upstream_allowed(&self, user: &UserInfo, class: &Class, rp: &ResourcePath) {
        self.reviews.forget_denial(user, &read_attributes(class, rp)).await;
    }

    /// The identity a certificate-authenticated client's own `Impersonate-*` headers ask for,
    /// once the upstream agrees that the client may impersonate each part of it (the
    /// apiserver's impersonation filter: `impersonate` on `users` — or the ServiceAccount —,
    /// `groups`, `uids` and `userextras/KEY`). `Ok(None)` when there are no such headers.
    pub async fn impersonation(
        &self,
        client: &UserInfo,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, Box<Response<Body>>> {
        let Some(target) = requested_impersonation(headers) else { return Ok(None) };
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let Some(target) = target else {
            // Groups, a uid or extras without a user: the apiserver's filter refuses that as
            // an internal error.
            return Err(Box::new(body::status(&Status::internal(
                "requested impersonation of groups, a uid or extras without impersonating a user",
            ))));
        };
        for attributes in impersonation_checks(&target) {
            // A refusal here is kubeplex's answer to the client, so it must be the upstream's
            // current one: a remembered denial is asked again.
            let refused = match self.reviews.authorize_afresh(client, &attributes).await {
                Ok(d) if d.allowed => continue,
                Ok(d) => d.reason,
                Err(e) => {
                    tracing::warn!(error = %e, "impersonation review failed");
                    return Err(Box::new(body::status(&Status::service_unavailable(
                        "error trying to reach the upstream to review an impersonation",
                    ))));
                }
            };
            return Err(Box::new(forbidden(&refusal(client, &attributes, &refused), accept)));
        }
        Ok(Some(target))
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

/// The `Authorization: Bearer` token, as the apiserver's bearer authenticator reads it.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The attributes of a read, as the apiserver's `RequestInfoFactory` derives them: a GET of a
/// named object is `get` (even with `watch=1`); of a collection `list` or `watch`, named by a
/// `metadata.name=X` field selector when it has one.
fn read_attributes(class: &Class, rp: &ResourcePath) -> ResourceAttributes {
    let options = class.options.as_ref();
    let field_selector = options.and_then(|o| o.field_selector.clone()).filter(|s| !s.is_empty());
    let label_selector = options.and_then(|o| o.label_selector.clone()).filter(|s| !s.is_empty());
    let (verb, name) = match &rp.name {
        Some(name) => ("get", name.clone()),
        None => {
            let verb = if class.verb == Verb::Watch { "watch" } else { "list" };
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
    }
}

/// The identity `Impersonate-*` headers ask for: `None` without such headers, `Some(None)`
/// when they name groups, a uid or extras but no user.
fn requested_impersonation(headers: &HeaderMap) -> Option<Option<UserInfo>> {
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

/// 401, as the apiserver's authentication filter writes it (JSON whatever was negotiated:
/// fixture `err-unauthorized`).
pub fn unauthorized() -> Response<Body> {
    body::status(&Status::unauthorized())
}

/// A 403 in the encoding the client negotiated for errors, with the authorization filter's
/// `X-Content-Type-Options: nosniff` (fixtures `err-forbidden-list`, `err-forbidden-get-protobuf`).
pub fn forbidden(status: &Status, accept: Option<&str>) -> Response<Body> {
    let mut resp = match negotiate::negotiate_error(accept) {
        Some(MediaType::Protobuf) => {
            body::respond(status.code, body::PROTOBUF, status.to_protobuf())
        }
        _ => body::status(status),
    };
    resp.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    resp
}

/// Shared so the stack's layers can hold it.
pub type SharedNodeAuth = Arc<NodeAuth>;

#[cfg(test)]
mod tests;
