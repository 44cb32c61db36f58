//! The authorizer chain: privileged groups, the Node authorizer, RBAC — `--authorization-mode=
//! Node,RBAC` behind the apiserver's `system:masters` short cut, joined like its union
//! authorizer (the first allow wins; otherwise the reasons of every "no opinion", one per line).

use serde_json::Value;

use super::{
    quote, Auth, Binding, Denial, RoleRef, Rule, Subject, UserInfo, Webhook, MASTERS, NODES,
};
use crate::wire::pod::{self, Referenced, Walk};
use crate::wire::selector::field::{FieldOperator, FieldSelector};

/// `authorizer.Attributes`: what a request (or a SubjectAccessReview) asks to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    /// get, list, watch, create, update, patch, delete, deletecollection, impersonate, ...; for
    /// non-resource requests the lower-cased HTTP method.
    pub verb: String,
    pub resource_request: bool,
    pub namespace: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    /// The object's name; for a list or watch, the value of a `metadata.name=` field selector
    /// (the apiserver's `RequestInfo` does the same, so `resourceNames` rules apply to them).
    pub name: String,
    /// Raw `fieldSelector` / `labelSelector` (of lists, watches and deletecollections only).
    pub field_selector: String,
    pub label_selector: String,
    /// The path of a non-resource request.
    pub path: String,
}

/// A decision and the reason the apiserver would give (SubjectAccessReview `status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// An explicit deny (no built-in authorizer makes one; RBAC and Node only have "no opinion").
    pub denied: bool,
    pub reason: String,
}

/// The objects the Node authorizer's graph is built from (the apiserver keeps a graph of pods
/// and what they reference; the sim reads its store instead).
pub trait Objects {
    /// The pods of `namespace`.
    fn pods(&self, namespace: &str) -> Vec<Value>;

    /// The core `resource`'s object `namespace/name` as stored now.
    fn object(&self, _resource: &str, _namespace: &str, _name: &str) -> Option<Value> {
        None
    }
}

/// A cluster without pods.
pub struct NoObjects;

impl Objects for NoObjects {
    fn pods(&self, _: &str) -> Vec<Value> {
        Vec::new()
    }
}

enum Verdict {
    Allow(String),
    /// An explicit deny: the union authorizer stops at it (only a webhook makes one here).
    Deny(String),
    NoOpinion(String),
}

impl Auth {
    /// Authorizes `attrs` as kube-apiserver 1.36 would with this policy.
    pub fn authorize(&self, attrs: &Attributes, objects: &dyn Objects) -> Decision {
        // The privileged-group authorizer runs before the configured modes.
        if attrs.user.in_group(MASTERS) {
            return Decision { allowed: true, denied: false, reason: String::new() };
        }
        let mut reasons = Vec::new();
        // `--authorization-config` with Node, the webhooks, RBAC (in that order), or the
        // flags' Node,RBAC without webhooks.
        let chain = std::iter::once(node_authorize(attrs, objects))
            .chain(self.webhooks.iter().map(|w| w.authorize(attrs)))
            .chain(std::iter::once(self.rbac(attrs)));
        for verdict in chain {
            match verdict {
                Verdict::Allow(reason) => return Decision { allowed: true, denied: false, reason },
                Verdict::Deny(reason) => {
                    reasons.push(reason);
                    return Decision { allowed: false, denied: true, reason: reasons.join("\n") };
                }
                Verdict::NoOpinion(reason) if !reason.is_empty() => reasons.push(reason),
                Verdict::NoOpinion(_) => {}
            }
        }
        Decision { allowed: false, denied: false, reason: reasons.join("\n") }
    }

    fn rules_of<'a>(&'a self, binding: &'a Binding) -> Option<(&'static str, &'a str, &'a [Rule])> {
        match (&binding.role, &binding.namespace) {
            (RoleRef::ClusterRole(name), _) => {
                self.cluster_roles.get(name).map(|r| ("ClusterRole", name.as_str(), r.as_slice()))
            }
            (RoleRef::Role(name), Some(ns)) => self
                .roles
                .get(&(ns.clone(), name.clone()))
                .map(|r| ("Role", name.as_str(), r.as_slice())),
            (RoleRef::Role(_), None) => None,
        }
    }

    /// RBAC's `Authorize`: ClusterRoleBindings, then the RoleBindings of the request's
    /// namespace; the first rule that allows names its binding in the reason
    /// (`RBAC: allowed by RoleBinding "reader/fx2" of Role "reader" to ServiceAccount
    /// "reader/fx2"`, fixture `sar-list-allowed`). A denial has no reason (`sar-list-denied`).
    fn rbac(&self, attrs: &Attributes) -> Verdict {
        let cluster = self.bindings.iter().filter(|b| b.namespace.is_none());
        let namespaced = self.bindings.iter().filter(|b| {
            !attrs.namespace.is_empty() && b.namespace.as_deref() == Some(attrs.namespace.as_str())
        });
        for binding in cluster.chain(namespaced) {
            let ns = binding.namespace.as_deref().unwrap_or("");
            let Some(subject) = binding.subjects.iter().find(|s| applies_to(&attrs.user, s, ns))
            else {
                continue;
            };
            let Some((role_kind, role_name, rules)) = self.rules_of(binding) else {
                continue;
            };
            if rules.iter().any(|r| rule_allows(attrs, r)) {
                let source = match &binding.namespace {
                    None => format!(
                        "ClusterRoleBinding {} of {role_kind} {} to {}",
                        quote(&binding.name),
                        quote(role_name),
                        describe(subject)
                    ),
                    Some(ns) => format!(
                        "RoleBinding {} of {role_kind} {} to {}",
                        quote(&format!("{}/{ns}", binding.name)),
                        quote(role_name),
                        describe(subject)
                    ),
                };
                return Verdict::Allow(format!("RBAC: allowed by {source}"));
            }
        }
        Verdict::NoOpinion(String::new())
    }
}

impl Webhook {
    /// The webhook's verdict: no opinion on what its `matchConditions` do not match (the
    /// apiserver does not call it), a deny for what one of its denials names.
    fn authorize(&self, attrs: &Attributes) -> Verdict {
        match self.deny.iter().find(|d| d.matches(attrs)) {
            Some(d) => Verdict::Deny(d.reason.clone()),
            None => Verdict::NoOpinion(String::new()),
        }
    }
}

impl Denial {
    /// `has(request.resourceAttributes) && request.resourceAttributes.name == NAME && ...`:
    /// a SubjectAccessReview's (or request's) name is set for a named object, and for a list
    /// or watch narrowed by `metadata.name=NAME` (`RequestInfo`); a review of the whole
    /// collection has none, so it never matches.
    fn matches(&self, attrs: &Attributes) -> bool {
        attrs.resource_request
            && (self.verbs.is_empty() || self.verbs.contains(&attrs.verb))
            && attrs.group == self.group
            && attrs.resource == self.resource
            && self.namespace.as_ref().is_none_or(|ns| *ns == attrs.namespace)
            && attrs.name == self.name
    }
}

/// RBAC's `appliesToUser`.
fn applies_to(user: &UserInfo, subject: &Subject, _binding_ns: &str) -> bool {
    match subject {
        Subject::User(name) => user.username == *name,
        Subject::Group(name) => user.in_group(name),
        Subject::ServiceAccount { namespace, name } => {
            user.username == format!("system:serviceaccount:{namespace}:{name}")
        }
    }
}

/// `describeSubject`: `ServiceAccount "name/ns"`, `User "u"`, `Group "g"`.
fn describe(subject: &Subject) -> String {
    match subject {
        Subject::User(n) => format!("User {}", quote(n)),
        Subject::Group(n) => format!("Group {}", quote(n)),
        Subject::ServiceAccount { namespace, name } => {
            format!("ServiceAccount {}", quote(&format!("{name}/{namespace}")))
        }
    }
}

/// RBAC's `RuleAllows` (`rbacv1helpers.VerbMatches`, `APIGroupMatches`, `ResourceMatches`,
/// `ResourceNameMatches`, `NonResourceURLMatches`).
pub(crate) fn rule_allows(attrs: &Attributes, rule: &Rule) -> bool {
    let verb = rule.verbs.iter().any(|v| v == "*" || *v == attrs.verb);
    if !verb {
        return false;
    }
    if attrs.resource_request {
        let combined = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let group = rule.api_groups.iter().any(|g| g == "*" || *g == attrs.group);
        let resource = rule.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!attrs.subresource.is_empty() && *r == format!("*/{}", attrs.subresource))
        });
        let name = rule.resource_names.is_empty()
            || (!attrs.name.is_empty() && rule.resource_names.contains(&attrs.name));
        group && resource && name
    } else {
        rule.non_resource_urls.iter().any(|u| {
            u == "*"
                || *u == attrs.path
                || u.strip_suffix('*').is_some_and(|prefix| attrs.path.starts_with(prefix))
        })
    }
}

/// The node a user is, by `nodeidentifier.NodeIdentity`: `system:node:NAME` in `system:nodes`.
fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix("system:node:")?;
    user.in_group(NODES).then_some(name)
}

/// The Node authorizer (`plugin/pkg/auth/authorizer/node`) with `AuthorizeNodeWithSelectors`,
/// for what kubelet-like clients read through kubeplex:
/// - pods: get of a pod bound to the node; list/watch only with `spec.nodeName=NODE` (or of one
///   pod bound to it, named by `metadata.name=`); create/delete (mirror pods), status
///   update/patch, eviction create;
/// - nodes: get/list/watch of its own Node only (the name, or `metadata.name=NODE` on a list);
///   create/update/patch, status update/patch;
/// - configmaps and secrets: get/list/watch of one object (named) that a pod bound to the node
///   references (volumes, projected volumes, env, envFrom, imagePullSecrets), unless it is a
///   mirror pod;
/// - leases (`authorizeLease`): get/create/update/patch/delete in `kube-node-lease` of the
///   lease named after the node (create whatever the name: the authorizer cannot see it, the
///   NodeRestriction admission plugin checks it, which the sim does not model);
/// - the static `NodeRules` the sim serves: read services, runtimeclasses and csidrivers;
///   create/update/patch events; create tokenreviews and subjectaccessreviews.
///
/// Left out (no opinion here, so RBAC decides): persistentvolumeclaims, persistentvolumes,
/// resourceclaims and resourceslices, volumeattachments, csinodes, serviceaccount tokens,
/// certificatesigningrequests and the other static rules — the sim serves none of them; and
/// the graph's edges through PVCs and resource claims.
fn node_authorize(attrs: &Attributes, objects: &dyn Objects) -> Verdict {
    let Some(node) = node_name(&attrs.user) else {
        return Verdict::NoOpinion(String::new());
    };
    if node.is_empty() {
        return Verdict::NoOpinion(format!(
            "unknown node for user {}",
            quote(&attrs.user.username)
        ));
    }
    if attrs.resource_request {
        match (attrs.group.as_str(), attrs.resource.as_str()) {
            ("", "pods") => return authorize_pod(node, attrs, objects),
            ("", "nodes") => return authorize_node(node, attrs),
            ("", "configmaps" | "secrets") => return authorize_referenced(node, attrs, objects),
            ("coordination.k8s.io", "leases") => return authorize_lease(node, attrs),
            _ => {}
        }
    }
    let static_rules = [
        Rule::new(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        Rule::new(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        Rule::read(&[""], &["services"]),
        Rule::new(&["create", "update", "patch"], &["", "events.k8s.io"], &["events"]),
        Rule::read(&["node.k8s.io"], &["runtimeclasses"]),
        Rule::read(&["storage.k8s.io"], &["csidrivers"]),
    ];
    if static_rules.iter().any(|r| rule_allows(attrs, r)) {
        Verdict::Allow(String::new())
    } else {
        Verdict::NoOpinion(String::new())
    }
}

fn no_relationship(node: &str) -> Verdict {
    Verdict::NoOpinion(format!("no relationship found between node '{node}' and this object"))
}

fn pod_node(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("")
}

fn pod_name(pod: &Value) -> &str {
    pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

/// `authorize` of a pod: named, and bound to the node (the graph's pod → node edge).
fn pod_related(node: &str, attrs: &Attributes, objects: &dyn Objects) -> Verdict {
    if attrs.name.is_empty() {
        return Verdict::NoOpinion("No Object name found".into());
    }
    let bound = objects
        .pods(&attrs.namespace)
        .iter()
        .any(|p| pod_name(p) == attrs.name && pod_node(p) == node);
    if bound {
        Verdict::Allow(String::new())
    } else {
        no_relationship(node)
    }
}

fn authorize_pod(node: &str, attrs: &Attributes, objects: &dyn Objects) -> Verdict {
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "get") => pod_related(node, attrs, objects),
        ("", "list" | "watch") => {
            // AuthorizeNodeWithSelectors: a list/watch scoped to the node's pods by field
            // selector; a selector that does not parse gives no requirements.
            let reqs = FieldSelector::parse(&attrs.field_selector).unwrap_or_default();
            let scoped = reqs.requirements().iter().any(|r| {
                r.field == "spec.nodeName" && r.operator == FieldOperator::Equals && r.value == node
            });
            if scoped {
                Verdict::Allow(String::new())
            } else if !attrs.name.is_empty() {
                pod_related(node, attrs, objects)
            } else {
                Verdict::NoOpinion(
                    "can only list/watch pods with spec.nodeName field selector".into(),
                )
            }
        }
        ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => {
            Verdict::Allow(String::new())
        }
        _ => Verdict::NoOpinion(String::new()),
    }
}

fn authorize_node(node: &str, attrs: &Attributes) -> Verdict {
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "create" | "update" | "patch") | ("status", "update" | "patch") => {
            Verdict::Allow(String::new())
        }
        ("", "get" | "list" | "watch") => {
            if attrs.name == node {
                Verdict::Allow(String::new())
            } else if attrs.name.is_empty() {
                Verdict::NoOpinion(format!(
                    "node '{node}' cannot read all nodes, only its own Node object"
                ))
            } else {
                Verdict::NoOpinion(format!(
                    "node '{node}' cannot read '{}', only its own Node object",
                    attrs.name
                ))
            }
        }
        _ => Verdict::NoOpinion(String::new()),
    }
}

/// `authorizeLease`: a node may only handle its own Lease, in the node lease namespace.
fn authorize_lease(node: &str, attrs: &Attributes) -> Verdict {
    if !matches!(attrs.verb.as_str(), "get" | "create" | "update" | "patch" | "delete") {
        return Verdict::NoOpinion(
            "can only get, create, update, patch, or delete a node lease".into(),
        );
    }
    if attrs.namespace != "kube-node-lease" {
        return Verdict::NoOpinion(
            "can only access leases in the \"kube-node-lease\" system namespace".into(),
        );
    }
    // A create names no object the authorizer can see.
    if attrs.verb != "create" && attrs.name != node {
        return Verdict::NoOpinion(
            "can only access node lease with the same name as the requesting node".into(),
        );
    }
    Verdict::Allow(String::new())
}

/// `authorizeReadNamespacedObject` for configmaps and secrets: node ← pod ← object.
fn authorize_referenced(node: &str, attrs: &Attributes, objects: &dyn Objects) -> Verdict {
    if !matches!(attrs.verb.as_str(), "get" | "list" | "watch") {
        return Verdict::NoOpinion("can only read resources of this type".into());
    }
    if !attrs.subresource.is_empty() {
        return Verdict::NoOpinion("cannot read subresource".into());
    }
    if attrs.namespace.is_empty() {
        return Verdict::NoOpinion("can only read namespaced object of this type".into());
    }
    if attrs.name.is_empty() {
        return Verdict::NoOpinion("No Object name found".into());
    }
    let secret = attrs.resource == "secrets";
    let what = if secret { Referenced::Secrets } else { Referenced::ConfigMaps };
    // `Graph.AddPod`: a mirror pod gets its node edge and nothing else (a node must never be
    // able to create a pod that grants it other objects).
    let related = objects
        .pods(&attrs.namespace)
        .iter()
        .filter(|p| pod_node(p) == node && !pod::is_mirror(p))
        .any(|p| pod::referenced_names(&p["spec"], what, Walk::Graph).contains(&attrs.name));
    if related {
        Verdict::Allow(String::new())
    } else {
        no_relationship(node)
    }
}
