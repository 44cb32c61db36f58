use serde_json::json;

use super::*;

fn spec() -> Value {
    json!({
        "imagePullSecrets": [{"name": "pull"}, {"name": ""}],
        "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
        "containers": [{"name": "c",
            "envFrom": [{"secretRef": {"name": "env-secret"}}, {"prefix": "X"}],
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "env-key", "key": "k"}}},
                    {"name": "C", "value": "plain"}]}],
        "ephemeralContainers": [{"name": "e", "envFrom": [{"configMapRef": {"name": "ephemeral"}}]}],
        "volumes": [
            {"name": "a", "configMap": {"name": "vol-cm"}},
            {"name": "b", "secret": {"secretName": "vol-secret"}},
            {"name": "c", "projected": {"sources": [
                {"configMap": {"name": "proj-cm"}}, {"secret": {"name": "proj-secret"}},
                {"serviceAccountToken": {"path": "token"}}]}},
            {"name": "d", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}},
            {"name": "e", "configMap": {"name": "two-sources"}, "secret": {"secretName": "two"}},
            {"name": "f", "emptyDir": {}}
        ]
    })
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// Every place a ConfigMap or Secret is named in containers, init containers, volumes and pull
/// secrets; settled, none of an ephemeral container's or of a volume with two sources.
#[test]
fn a_settled_walk_reads_the_standing_spec() {
    let configmaps = referenced_names(&spec(), Referenced::ConfigMaps, Walk::Settled);
    assert_eq!(sorted(configmaps), ["env-cm", "init-env", "proj-cm", "vol-cm"]);
    let secrets = referenced_names(&spec(), Referenced::Secrets, Walk::Settled);
    assert_eq!(
        sorted(secrets),
        ["csi-secret", "env-key", "env-secret", "proj-secret", "pull", "vol-secret"]
    );
}

/// The graph's walk adds ephemeral containers' references and every source of a volume.
#[test]
fn the_graphs_walk_reads_ephemeral_containers_too() {
    let configmaps = referenced_names(&spec(), Referenced::ConfigMaps, Walk::Graph);
    assert_eq!(
        sorted(configmaps),
        ["env-cm", "ephemeral", "init-env", "proj-cm", "two-sources", "vol-cm"]
    );
    let secrets = referenced_names(&spec(), Referenced::Secrets, Walk::Graph);
    assert_eq!(
        sorted(secrets),
        ["csi-secret", "env-key", "env-secret", "proj-secret", "pull", "two", "vol-secret"]
    );
}

#[test]
fn a_mirror_pod_is_known_by_its_annotation() {
    let mut pod = json!({"metadata": {"name": "p"}, "spec": spec()});
    assert!(!is_mirror(&pod));
    pod["metadata"]["annotations"] = json!({MIRROR_POD_ANNOTATION: "abc"});
    assert!(is_mirror(&pod));
    assert!(referenced_names(&json!("not a spec"), Referenced::Secrets, Walk::Graph).is_empty());
}
