//! Which API groups kube-apiserver serves itself (as opposed to CRDs and aggregated APIs).

/// The API groups built into kube-apiserver 1.36. Anything else is a custom resource (served
/// by the apiextensions-apiserver: JSON-only, unstructured) or an aggregated API. Discovery does
/// not say which is which, and CRDs can live under `*.k8s.io` too (Gateway API, snapshots).
pub const BUILTIN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

pub fn is_builtin(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}
