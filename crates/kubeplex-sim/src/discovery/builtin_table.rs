//! The resources the sim serves, as kube-apiserver 1.36 describes them in discovery. Every value
//! (singular names, verbs and their order, short names, categories, hashes, subresources and
//! their kinds) is copied from fixtures `discovery-api-v1` and `discovery-discovery-v1` (no
//! capture of `/apis/apps/v1` is kept: its entries follow pkg/registry/apps' REST storage —
//! `ShortNames`, `Categories`, the `scale` and `status` subresources), from
//! the apiserver's storage-version hash table (events.k8s.io events share the core storage, so
//! the core hash), and for the custom resource from the apiextensions discovery controller.

use super::{ApiResource, Subresource};

/// Verbs of a resource with full REST storage, sorted as the installer lists them.
const ALL: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Namespaces cannot be deleted as a collection.
const NO_COLLECTION: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
/// The verbs of a CRD, in the (unsorted) order the apiextensions discovery controller lists them.
const CRD: &[&str] =
    &["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];
const STATUS: &[&str] = &["get", "patch", "update"];
const PROXY: &[&str] = &["create", "delete", "get", "patch", "update"];
const CONNECT: &[&str] = &["create", "get"];
const CREATE: &[&str] = &["create"];

const fn sub(
    name: &'static str,
    kind: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource { name, group: "", version: "", kind, verbs }
}

/// The `scale` subresource of the apps workloads: an `autoscaling/v1` Scale.
const SCALE: Subresource = Subresource {
    name: "scale",
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
    verbs: STATUS,
};

/// Kept in the order `/api/v1` and `/apis/{g}/{v}` list them (resources sorted by name, each
/// followed by its subresources, also sorted).
pub(super) const RESOURCES: &[ApiResource] = &[
    ApiResource {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        verbs: ALL,
        short_names: &["cm"],
        categories: &[],
        storage_version_hash: "qFsyl6wFWjQ=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        verbs: ALL,
        short_names: &["ep"],
        categories: &[],
        storage_version_hash: "fWeeMqaN/OA=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        verbs: ALL,
        short_names: &["ev"],
        categories: &[],
        storage_version_hash: "r2yiGXH7wu8=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        verbs: NO_COLLECTION,
        short_names: &["ns"],
        categories: &[],
        storage_version_hash: "Q3oi5N2YM8M=",
        protobuf: true,
        custom: false,
        subresources: &[
            sub("finalize", "Namespace", &["update"]),
            sub("status", "Namespace", STATUS),
        ],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        verbs: ALL,
        short_names: &["no"],
        categories: &[],
        storage_version_hash: "XwShjMxG9Fs=",
        protobuf: true,
        custom: false,
        subresources: &[sub("proxy", "NodeProxyOptions", PROXY), sub("status", "Node", STATUS)],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        verbs: ALL,
        short_names: &["po"],
        categories: &["all"],
        storage_version_hash: "xPOwRZ+Yhw8=",
        protobuf: true,
        custom: false,
        subresources: &[
            sub("attach", "PodAttachOptions", CONNECT),
            sub("binding", "Binding", CREATE),
            sub("ephemeralcontainers", "Pod", STATUS),
            Subresource {
                name: "eviction",
                group: "policy",
                version: "v1",
                kind: "Eviction",
                verbs: CREATE,
            },
            sub("exec", "PodExecOptions", CONNECT),
            sub("log", "Pod", &["get"]),
            sub("portforward", "PodPortForwardOptions", CONNECT),
            sub("proxy", "PodProxyOptions", PROXY),
            sub("resize", "Pod", STATUS),
            sub("status", "Pod", STATUS),
        ],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        verbs: ALL,
        short_names: &[],
        categories: &[],
        storage_version_hash: "S6u1pOWzb84=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        verbs: ALL,
        short_names: &["sa"],
        categories: &[],
        storage_version_hash: "pbx9ZvyFpBE=",
        protobuf: true,
        custom: false,
        subresources: &[Subresource {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            verbs: CREATE,
        }],
    },
    ApiResource {
        group: "",
        version: "v1",
        resource: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        verbs: ALL,
        short_names: &["svc"],
        categories: &["all"],
        storage_version_hash: "0/CO1lhkEBI=",
        protobuf: true,
        custom: false,
        subresources: &[
            sub("proxy", "ServiceProxyOptions", PROXY),
            sub("status", "Service", STATUS),
        ],
    },
    ApiResource {
        group: "apps",
        version: "v1",
        resource: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        verbs: ALL,
        short_names: &["deploy"],
        categories: &["all"],
        storage_version_hash: "8aSe+NMegvE=",
        protobuf: true,
        custom: false,
        subresources: &[SCALE, sub("status", "Deployment", STATUS)],
    },
    ApiResource {
        group: "apps",
        version: "v1",
        resource: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        verbs: ALL,
        short_names: &["rs"],
        categories: &["all"],
        storage_version_hash: "P1RzHs8/mWQ=",
        protobuf: true,
        custom: false,
        subresources: &[SCALE, sub("status", "ReplicaSet", STATUS)],
    },
    ApiResource {
        group: "discovery.k8s.io",
        version: "v1",
        resource: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        namespaced: true,
        verbs: ALL,
        short_names: &[],
        categories: &[],
        storage_version_hash: "qgS0xkrxYAI=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        verbs: ALL,
        short_names: &["ev"],
        categories: &[],
        storage_version_hash: "r2yiGXH7wu8=",
        protobuf: true,
        custom: false,
        subresources: &[],
    },
    ApiResource {
        group: "demo.kubeplex.io",
        version: "v1",
        resource: "widgets",
        singular: "widget",
        kind: "Widget",
        namespaced: true,
        verbs: CRD,
        short_names: &["wd"],
        categories: &["all"],
        storage_version_hash: "wF4Y9aA1M1c=",
        protobuf: false,
        custom: true,
        subresources: &[],
    },
];

/// The order `/apis` lists groups in (fixture `discovery-apis`: APIService group priority, then
/// name). Groups not listed are CRD groups (priority 1000, below every built-in group); they
/// follow, by name.
pub(super) const GROUP_ORDER: &[&str] = &[
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];
