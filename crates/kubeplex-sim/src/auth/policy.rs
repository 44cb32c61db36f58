//! A policy's parts: RBAC rules, subjects and bindings, and a webhook authorizer's denials.

/// One RBAC `PolicyRule`. Empty lists match nothing, except `resource_names` (empty = any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    /// `pods`, `pods/log`, `*`, `*/status`.
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    /// `/healthz`, `/apis/*`, `*` (a trailing `*` is a prefix match).
    pub non_resource_urls: Vec<String>,
}

pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Rule {
    /// `verbs` on `resources` of `api_groups` (`""` is the core group).
    pub fn new(verbs: &[&str], api_groups: &[&str], resources: &[&str]) -> Rule {
        Rule {
            verbs: strings(verbs),
            api_groups: strings(api_groups),
            resources: strings(resources),
            ..Default::default()
        }
    }

    /// get, list and watch (RBAC's "read" verbs) on `resources` of `api_groups`.
    pub fn read(api_groups: &[&str], resources: &[&str]) -> Rule {
        Rule::new(&["get", "list", "watch"], api_groups, resources)
    }

    /// Only the named objects (`resourceNames`).
    pub fn names(mut self, names: &[&str]) -> Rule {
        self.resource_names = strings(names);
        self
    }

    /// `verbs` on non-resource URLs (ClusterRoles only).
    pub fn non_resource(verbs: &[&str], urls: &[&str]) -> Rule {
        Rule { verbs: strings(verbs), non_resource_urls: strings(urls), ..Default::default() }
    }
}

/// An RBAC binding subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

impl Subject {
    pub fn user(name: &str) -> Subject {
        Subject::User(name.into())
    }

    pub fn group(name: &str) -> Subject {
        Subject::Group(name.into())
    }

    pub fn service_account(namespace: &str, name: &str) -> Subject {
        Subject::ServiceAccount { namespace: namespace.into(), name: name.into() }
    }
}

/// What a binding grants: a Role of the binding's namespace or a ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRef {
    Role(String),
    ClusterRole(String),
}

/// A RoleBinding (`namespace: Some`) or ClusterRoleBinding (`namespace: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub namespace: Option<String>,
    pub name: String,
    pub role: RoleRef,
    pub subjects: Vec<Subject>,
}

/// A webhook authorizer as structured authorization configuration runs one
/// (`--authorization-config`, `apiserver.config.k8s.io/v1`, GA since 1.32): the apiserver asks
/// it only about requests its CEL `matchConditions` match, and it may deny (the union authorizer
/// then stops: RBAC is not asked) or have no opinion. Modelled as the policy engines behind such
/// webhooks are written (`forbid ... when resource.name == X`): a list of denials by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Webhook {
    pub deny: Vec<Denial>,
}

/// One denial of a [`Webhook`]: `verbs` (empty: any) of the object `name` of `group`/`resource`,
/// in `namespace` (`None`: any), with the webhook's `status.reason`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Denial {
    pub verbs: Vec<String>,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
    pub reason: String,
}

impl Denial {
    /// Any verb on the object `namespace/name` of `resource` in the core group.
    pub fn named(resource: &str, namespace: &str, name: &str, reason: &str) -> Denial {
        Denial {
            verbs: Vec::new(),
            group: String::new(),
            resource: resource.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
            reason: reason.into(),
        }
    }
}
