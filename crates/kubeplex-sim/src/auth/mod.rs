//! Identities and authorization, modelled on kube-apiserver 1.36 with `--authorization-mode=
//! Node,RBAC` and anonymous authentication on (its defaults under kubeadm).
//!
//! **No policy, no checks.** A sim started without [`Auth`] lets every request through and
//! ignores credentials and `Impersonate-*` headers: that is the sidecar model, where kubeplex
//! talks to the apiserver with its own (privileged) identity and every existing test keeps its
//! behaviour. A test about identities configures a policy ([`crate::SimBuilder::auth`] or
//! [`crate::Sim::set_auth`]); from then on the sim authenticates, impersonates and authorizes
//! every request as the real apiserver does, and serves TokenReview and SubjectAccessReview
//! with the same decisions (`reviews`).
//!
//! The pieces, in the apiserver's filter order:
//! - authentication (`request::authenticate`): `Authorization: Bearer T` is looked up in the
//!   policy's tokens (an unknown token is 401, fixture `err-unauthorized`); no credentials is
//!   `system:anonymous` in `system:unauthenticated`; every authenticated user gets
//!   `system:authenticated` (the apiserver's `AuthenticatedGroupAdder`);
//! - impersonation (`request::impersonate`): `Impersonate-User`/`-Group`/`-Uid`/`-Extra-KEY`,
//!   each checked for the `impersonate` verb (the `WithImpersonation` filter);
//! - authorization ([`Auth::authorize`]): the privileged-group authorizer (`system:masters`),
//!   the Node authorizer with `AuthorizeNodeWithSelectors` (GA since 1.34), then RBAC, joined
//!   like the apiserver's union authorizer. A refusal is the apiserver's 403 `Status`
//!   (`request::forbidden`, fixtures `err-forbidden-*`, `err-anonymous`).

mod authorize;
mod policy;
pub(crate) mod request;
pub(crate) mod reviews;
pub mod tokens;

use std::collections::{BTreeMap, HashMap};

pub use authorize::{Attributes, Decision, NoObjects, Objects};
use policy::strings;
pub use policy::{Binding, Denial, RoleRef, Rule, Subject, Webhook};

/// `system:authenticated`: every authenticated user is in it.
pub const AUTHENTICATED: &str = "system:authenticated";
/// `system:unauthenticated`: the group of `system:anonymous`.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of a request without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The privileged group: the apiserver allows it everything before asking any authorizer.
pub const MASTERS: &str = "system:masters";
/// The group of kubelets' identities (the Node authorizer's `NodeIdentity`).
pub const NODES: &str = "system:nodes";
/// The audience of tokens the apiserver accepts when a TokenReview names none
/// (`--api-audiences`, by default the service account issuer; fixture `tokenreview-valid`).
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc";
/// The `user.extra` key naming the node a ServiceAccount token is bound to
/// (`serviceaccount.NodeNameKey`).
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
/// The `user.extra` key naming the credential that authenticated a user (`user.CredentialIDKey`).
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// Who a request is (`user.Info`; TokenReview's `status.user`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Keys are lower case, as the apiserver's authenticators and impersonation produce them.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(username: impl Into<String>) -> Self {
        UserInfo { username: username.into(), ..Default::default() }
    }

    /// A ServiceAccount's identity as its token authenticates (`serviceaccount.UserInfo`):
    /// `system:serviceaccount:NS:NAME` in `system:serviceaccounts` and
    /// `system:serviceaccounts:NS` (`system:authenticated` is added on authentication).
    pub fn service_account(namespace: &str, name: &str) -> Self {
        UserInfo {
            username: format!("system:serviceaccount:{namespace}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            extra: BTreeMap::new(),
        }
    }

    /// A kubelet's identity (its client certificate: CN `system:node:NAME`, O `system:nodes`).
    pub fn node(name: &str) -> Self {
        UserInfo {
            username: format!("system:node:{name}"),
            groups: vec![NODES.into()],
            ..Default::default()
        }
    }

    /// The identity of a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            username: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }

    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.groups.push(group.into());
        self
    }

    pub fn with_extra(mut self, key: &str, values: &[&str]) -> Self {
        self.extra.insert(key.to_ascii_lowercase(), values.iter().map(|v| v.to_string()).collect());
        self
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// A bearer token the sim's authenticator knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub user: UserInfo,
    /// The token's audiences (a ServiceAccount token's `aud`); by default the apiserver's.
    pub audiences: Vec<String>,
    /// A ServiceAccount token bound to a pod: valid only while the pod and the ServiceAccount
    /// exist with the uids it names ([`tokens`]).
    pub bound: Option<tokens::Bound>,
}

/// The sim's identity and authorization policy: tokens, roles and bindings, with the
/// apiserver's bootstrap ClusterRoles and ClusterRoleBindings built in ([`Auth::new`]).
#[derive(Debug, Clone)]
pub struct Auth {
    pub(crate) tokens: HashMap<String, Token>,
    pub(crate) cluster_roles: BTreeMap<String, Vec<Rule>>,
    pub(crate) roles: BTreeMap<(String, String), Vec<Rule>>,
    /// In the order they were added; ClusterRoleBindings are visited before RoleBindings, each
    /// kind in this order (RBAC's `VisitRulesFor`), which decides the `reason` an allow names.
    pub(crate) bindings: Vec<Binding>,
    /// `--anonymous-auth` (on by default).
    pub(crate) anonymous: bool,
    /// `--api-audiences`.
    pub(crate) audiences: Vec<String>,
    /// Webhook authorizers between the Node authorizer and RBAC, in order.
    pub(crate) webhooks: Vec<Webhook>,
    /// The ServiceAccount signing key ([`tokens`]).
    pub(crate) signer: std::sync::Arc<tokens::Signer>,
    grants: usize,
}

impl Default for Auth {
    fn default() -> Self {
        Self::new()
    }
}

impl Auth {
    /// A policy with only the apiserver's bootstrap RBAC (`plugin/pkg/auth/authorizer/rbac/
    /// bootstrappolicy`), reduced to what the sim serves:
    /// - `system:discovery` (get `/api`, `/api/*`, `/apis`, `/apis/*`, `/openapi`,
    ///   `/openapi/*`, `/version`, health) bound to `system:authenticated` only — since 1.14
    ///   anonymous users cannot read discovery;
    /// - `system:public-info-viewer` (get `/version`, `/healthz`, `/livez`, `/readyz`) bound to
    ///   `system:authenticated` and `system:unauthenticated`;
    /// - `system:basic-user` (create self-reviews) bound to `system:authenticated`;
    /// - `system:monitoring` (get `/metrics`, health) bound to group `system:monitoring`;
    /// - `cluster-admin` (everything) bound to `system:masters` (who are also allowed before any
    ///   authorizer runs);
    /// - `system:auth-delegator` (create tokenreviews and subjectaccessreviews), bound to
    ///   nobody: bind it to whoever should call the review APIs, as kubeplex's deployment does;
    /// - `system:node-proxier` (kube-proxy's: list/watch services and endpoints, read nodes,
    ///   write events, list/watch endpointslices and servicecidrs), bound to nobody: kubeadm
    ///   binds it to the ServiceAccount kube-system/kube-proxy.
    pub fn new() -> Auth {
        let health = ["/healthz", "/livez", "/readyz"];
        let mut discovery = vec![
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/openapi",
            "/openapi/*",
            "/version",
            "/version/",
        ];
        discovery.extend(health);
        let mut public = vec!["/version", "/version/"];
        public.extend(health);
        let mut monitoring = vec!["/metrics", "/metrics/slis"];
        monitoring.extend(health);
        monitoring.extend(["/livez/*", "/readyz/*", "/healthz/*"]);
        let auth = Auth {
            tokens: HashMap::new(),
            cluster_roles: BTreeMap::new(),
            roles: BTreeMap::new(),
            bindings: Vec::new(),
            anonymous: true,
            audiences: vec![DEFAULT_AUDIENCE.into()],
            webhooks: Vec::new(),
            signer: tokens::Signer::new(),
            grants: 0,
        };
        auth.cluster_role("system:discovery", vec![Rule::non_resource(&["get"], &discovery)])
            .cluster_role("system:public-info-viewer", vec![Rule::non_resource(&["get"], &public)])
            .cluster_role(
                "system:basic-user",
                vec![
                    Rule::new(
                        &["create"],
                        &["authorization.k8s.io"],
                        &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ),
                    Rule::new(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
                ],
            )
            .cluster_role("system:monitoring", vec![Rule::non_resource(&["get"], &monitoring)])
            .cluster_role(
                "system:service-account-issuer-discovery",
                vec![Rule::non_resource(
                    &["get"],
                    &[
                        "/.well-known/openid-configuration",
                        "/.well-known/openid-configuration/",
                        "/openid/v1/jwks",
                        "/openid/v1/jwks/",
                    ],
                )],
            )
            .cluster_role(
                "cluster-admin",
                vec![Rule::new(&["*"], &["*"], &["*"]), Rule::non_resource(&["*"], &["*"])],
            )
            .cluster_role(
                "system:auth-delegator",
                vec![
                    Rule::new(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                    Rule::new(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
                ],
            )
            .cluster_role(
                "system:node-proxier",
                vec![
                    Rule::new(&["list", "watch"], &[""], &["services", "endpoints"]),
                    Rule::read(&[""], &["nodes"]),
                    Rule::new(&["create", "patch", "update"], &["", "events.k8s.io"], &["events"]),
                    Rule::new(&["list", "watch"], &["discovery.k8s.io"], &["endpointslices"]),
                    Rule::new(&["list", "watch"], &["networking.k8s.io"], &["servicecidrs"]),
                ],
            )
            .cluster_role_binding("cluster-admin", "cluster-admin", vec![Subject::group(MASTERS)])
            .cluster_role_binding(
                "system:basic-user",
                "system:basic-user",
                vec![Subject::group(AUTHENTICATED)],
            )
            .cluster_role_binding(
                "system:discovery",
                "system:discovery",
                vec![Subject::group(AUTHENTICATED)],
            )
            .cluster_role_binding(
                "system:monitoring",
                "system:monitoring",
                vec![Subject::group("system:monitoring")],
            )
            .cluster_role_binding(
                "system:service-account-issuer-discovery",
                "system:service-account-issuer-discovery",
                vec![Subject::group("system:serviceaccounts")],
            )
            .cluster_role_binding(
                "system:public-info-viewer",
                "system:public-info-viewer",
                vec![Subject::group(AUTHENTICATED), Subject::group(UNAUTHENTICATED)],
            )
    }

    /// A bearer token that authenticates as `user` (with the apiserver's audiences).
    pub fn token(mut self, token: &str, user: UserInfo) -> Self {
        let audiences = self.audiences.clone();
        self.tokens.insert(token.to_string(), Token { user, audiences, bound: None });
        self
    }

    /// `token`, a signed ServiceAccount token bound to a pod ([`tokens`]), authenticating as
    /// `user` while what it is bound to exists.
    pub fn bound_token(mut self, token: &str, user: UserInfo, bound: tokens::Bound) -> Self {
        let audiences = self.audiences.clone();
        self.tokens.insert(token.to_string(), Token { user, audiences, bound: Some(bound) });
        self
    }

    /// The ServiceAccount signing key.
    pub fn signer(&self) -> &tokens::Signer {
        &self.signer
    }

    /// A bearer token with its own audiences (a projected token for another audience).
    pub fn token_with_audiences(mut self, token: &str, user: UserInfo, audiences: &[&str]) -> Self {
        let audiences = strings(audiences);
        self.tokens.insert(token.to_string(), Token { user, audiences, bound: None });
        self
    }

    /// A ServiceAccount token: `token` authenticates as `system:serviceaccount:NS:NAME`, with
    /// the id of the credential in `extra`, as the apiserver reports every token it issued
    /// (`authentication.kubernetes.io/credential-id: JTI=...`, fixture `tokenreview-valid`):
    /// two tokens of one ServiceAccount (two pods of a DaemonSet) are two users to a webhook
    /// authorizer, and their reviews differ.
    pub fn service_account_token(self, token: &str, namespace: &str, name: &str) -> Self {
        let jti = format!("JTI={}", uuid::Uuid::new_v4());
        let user = UserInfo::service_account(namespace, name).with_extra(CREDENTIAL_ID, &[&jti]);
        self.token(token, user)
    }

    /// A webhook authorizer after the Node authorizer and before RBAC (structured
    /// authorization configuration: `authorizers: [Node, Webhook, RBAC]`).
    pub fn webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// A ServiceAccount token bound to a pod on a node — the token the kubelet projects into
    /// a pod (`TokenRequest` with a Pod `boundObjectRef`): it authenticates as the
    /// ServiceAccount, and kube-apiserver 1.36 names the pod, its node and the credential in
    /// the user's extras (`ServiceAccountTokenPodNodeInfo`, GA since 1.32; a TokenReview
    /// answers with them, as the real one did for `scripts/realcluster/
    /// capture-impersonation.py`'s token). Uids are derived from the names.
    pub fn bound_service_account_token(
        self,
        token: &str,
        namespace: &str,
        name: &str,
        pod: &str,
        node: &str,
    ) -> Self {
        let jti = format!("JTI={}", uuid::Uuid::new_v4());
        let user = UserInfo::service_account(namespace, name)
            .with_uid(format!("uid-serviceaccount-{namespace}-{name}"))
            .with_extra(CREDENTIAL_ID, &[&jti])
            .with_extra(NODE_NAME_KEY, &[node])
            .with_extra("authentication.kubernetes.io/node-uid", &[&format!("uid-node-{node}")])
            .with_extra("authentication.kubernetes.io/pod-name", &[pod])
            .with_extra("authentication.kubernetes.io/pod-uid", &[&format!("uid-pod-{pod}")]);
        self.token(token, user)
    }

    /// `--anonymous-auth`: off makes requests without credentials 401.
    pub fn anonymous(mut self, enabled: bool) -> Self {
        self.anonymous = enabled;
        self
    }

    /// The policy without any binding of `subject` (its bindings to others stay).
    pub fn without_bindings_of(mut self, subject: &Subject) -> Self {
        for binding in &mut self.bindings {
            binding.subjects.retain(|s| s != subject);
        }
        self.bindings.retain(|b| !b.subjects.is_empty());
        self
    }

    pub fn cluster_role(mut self, name: &str, rules: Vec<Rule>) -> Self {
        self.cluster_roles.insert(name.to_string(), rules);
        self
    }

    pub fn role(mut self, namespace: &str, name: &str, rules: Vec<Rule>) -> Self {
        self.roles.insert((namespace.to_string(), name.to_string()), rules);
        self
    }

    pub fn cluster_role_binding(
        mut self,
        name: &str,
        cluster_role: &str,
        subjects: Vec<Subject>,
    ) -> Self {
        self.bindings.push(Binding {
            namespace: None,
            name: name.to_string(),
            role: RoleRef::ClusterRole(cluster_role.to_string()),
            subjects,
        });
        self
    }

    pub fn role_binding(
        mut self,
        namespace: &str,
        name: &str,
        role: RoleRef,
        subjects: Vec<Subject>,
    ) -> Self {
        self.bindings.push(Binding {
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
            role,
            subjects,
        });
        self
    }

    /// Shorthand: `rules` for `subject` in `namespace` (a Role and RoleBinding) or cluster-wide
    /// (`None`: a ClusterRole and ClusterRoleBinding), both named `grant-N`.
    pub fn grant(mut self, subject: Subject, namespace: Option<&str>, rules: Vec<Rule>) -> Self {
        self.grants += 1;
        let name = format!("grant-{}", self.grants);
        match namespace {
            Some(ns) => self.role(ns, &name, rules).role_binding(
                ns,
                &name,
                RoleRef::Role(name.clone()),
                vec![subject],
            ),
            None => {
                self.cluster_role(&name, rules).cluster_role_binding(&name, &name, vec![subject])
            }
        }
    }

    /// kubeplex's own identity in the node-local mode, as its deployment grants it: the
    /// ServiceAccount `namespace/name` authenticated by `token`, allowed `reads` cluster-wide
    /// (its caches' list+watch; a ClusterRole and ClusterRoleBinding named `name`), bound to
    /// `system:auth-delegator` (TokenReview, SubjectAccessReview) and allowed to impersonate
    /// what it forwards for certificate-authenticated clients: users, groups and
    /// serviceaccounts, and every `authentication.k8s.io` resource (uids, userextras/KEY —
    /// RBAC has no `userextras/*` wildcard, only `*`).
    pub fn proxy_service_account(
        self,
        token: &str,
        namespace: &str,
        name: &str,
        reads: Vec<Rule>,
    ) -> Self {
        let sa = Subject::service_account(namespace, name);
        let impersonator = format!("{name}-impersonator");
        self.service_account_token(token, namespace, name)
            .cluster_role(name, reads)
            .cluster_role_binding(name, name, vec![sa.clone()])
            .cluster_role_binding(
                &format!("{name}-auth-delegator"),
                "system:auth-delegator",
                vec![sa.clone()],
            )
            .cluster_role(
                &impersonator,
                vec![
                    Rule::new(&["impersonate"], &[""], &["users", "groups", "serviceaccounts"]),
                    Rule::new(&["impersonate"], &["authentication.k8s.io"], &["*"]),
                ],
            )
            .cluster_role_binding(&impersonator, &impersonator, vec![sa])
    }

    /// The user a bearer token authenticates as, with `system:authenticated` added, or `None`
    /// for a token the apiserver would answer with 401.
    pub fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        self.authenticate_token_in(token, &NoObjects)
    }

    /// [`Auth::authenticate_token`] with the cluster's `objects`: a token bound to a pod is
    /// valid only while the pod and its ServiceAccount exist with the uids it names (the
    /// validator's lookups; a deletion's grace is not modelled).
    pub fn authenticate_token_in(&self, token: &str, objects: &dyn Objects) -> Option<UserInfo> {
        let t = self.tokens.get(token)?;
        if let Some(b) = &t.bound {
            let uid = |resource: &str, name: &str| {
                objects.object(resource, &b.namespace, name).and_then(|o| {
                    o.pointer("/metadata/uid").and_then(|u| u.as_str().map(String::from))
                })
            };
            if uid("pods", &b.pod.0).as_deref() != Some(b.pod.1.as_str())
                || uid("serviceaccounts", &b.service_account.0).as_deref()
                    != Some(b.service_account.1.as_str())
            {
                return None;
            }
        }
        Some(with_authenticated(t.user.clone()))
    }
}

/// The `AuthenticatedGroupAdder`: every authenticated user is in `system:authenticated` unless
/// it names it (or `system:unauthenticated`) already.
pub(crate) fn with_authenticated(mut user: UserInfo) -> UserInfo {
    if !user.in_group(AUTHENTICATED) && !user.in_group(UNAUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

/// Go's `%q` (`strconv.Quote`), as the apiserver's messages quote names.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
