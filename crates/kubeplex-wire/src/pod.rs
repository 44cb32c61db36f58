//! What a Pod names: the ConfigMaps and Secrets its spec references, as the apiserver's Node
//! authorizer's graph links them to the pod (`graph_populator.go` → `Graph.AddPod`, which walks
//! the spec with `podutil.VisitPodConfigmapNames` / `VisitPodSecretNames`,
//! `pkg/api/v1/pod/util.go`), and whether a pod is a mirror pod (whose references the graph
//! never adds: a node must not be able to create a pod that grants it other objects).
//!
//! Two readers: the fake apiserver's Node authorizer, which models the graph, and kubeplex's
//! own node rules (`auth/node_rules.rs`), which grant only what a subset of it surely has —
//! so [`Walk`] says how far to look.

use serde_json::Value;

/// The annotation a kubelet sets on the mirror pod of a static pod (`corev1.MirrorPodAnnotationKey`).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Whether `pod` (a whole object) is a mirror pod.
pub fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_POD_ANNOTATION)).is_some()
}

/// Which objects' names to collect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Referenced {
    ConfigMaps,
    Secrets,
}

/// How far to look into a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Everything the visitors read that a cluster of kubeplex's tests can hold: containers,
    /// init and ephemeral containers, pull secrets, and each volume's sources.
    Graph,
    /// What the graph surely holds for a pod as it is now: no ephemeral containers (added by
    /// a later update of the `ephemeralcontainers` subresource, which the graph may not have
    /// taken in yet), and no volume with more than one source (validation refuses it; the
    /// graph's `switch` takes the first source it knows, so such a volume is left alone rather
    /// than guessed at).
    Settled,
}

/// The non-empty names of the ConfigMaps (or Secrets) `spec` references, in the order the
/// visitors find them (duplicates kept): `imagePullSecrets`; each container's `envFrom` and
/// `env[].valueFrom` (init containers first); and the volumes' `configMap` / `secret`, a
/// projected volume's `configMap` / `secret` sources, and a CSI volume's
/// `nodePublishSecretRef`.
pub fn referenced_names(spec: &Value, what: Referenced, walk: Walk) -> Vec<String> {
    let secret = what == Referenced::Secrets;
    let mut out = Vec::new();
    let mut push = |v: Option<&Value>| {
        if let Some(name) = v.and_then(Value::as_str).filter(|n| !n.is_empty()) {
            out.push(name.to_string());
        }
    };
    if secret {
        for s in items(spec, "imagePullSecrets") {
            push(s.get("name"));
        }
    }
    let (env_from, key_ref) =
        if secret { ("secretRef", "secretKeyRef") } else { ("configMapRef", "configMapKeyRef") };
    let lists: &[&str] = match walk {
        Walk::Graph => &["initContainers", "containers", "ephemeralContainers"],
        Walk::Settled => &["initContainers", "containers"],
    };
    for list in lists {
        for c in items(spec, list) {
            for e in items(c, "envFrom") {
                push(e[env_from].get("name"));
            }
            for e in items(c, "env") {
                push(e["valueFrom"][key_ref].get("name"));
            }
        }
    }
    for volume in items(spec, "volumes") {
        let Some(map) = volume.as_object() else { continue };
        let sources = map.iter().filter(|(k, _)| k.as_str() != "name");
        let sources: Vec<_> = match walk {
            Walk::Graph => sources.collect(),
            Walk::Settled => {
                let mut sources = sources;
                let (Some(only), None) = (sources.next(), sources.next()) else { continue };
                vec![only]
            }
        };
        for (source, v) in sources {
            match (source.as_str(), secret) {
                ("configMap", false) => push(v.get("name")),
                ("secret", true) => push(v.get("secretName")),
                ("csi", true) => push(v["nodePublishSecretRef"].get("name")),
                ("projected", _) => {
                    let kind = if secret { "secret" } else { "configMap" };
                    for s in items(v, "sources") {
                        push(s[kind].get("name"));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The array at `key` of `v` (none when there is no such array).
fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key].as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests;
