use super::*;

#[test]
fn pod_lists_merge_by_their_go_tags() {
    let pod = root("", "pods").expect("pods are served");
    let spec = pod.lookup("spec");
    assert_eq!(spec.strategy, Strategy::None);
    let containers = spec.schema.lookup("containers");
    assert_eq!((containers.strategy, containers.merge_key), (Strategy::Merge, "name"));
    let ports = containers.schema.lookup("ports");
    assert_eq!((ports.strategy, ports.merge_key), (Strategy::Merge, "containerPort"));
    let env = containers.schema.lookup("env");
    assert_eq!((env.strategy, env.merge_key), (Strategy::Merge, "name"));
    let mounts = containers.schema.lookup("volumeMounts");
    assert_eq!((mounts.strategy, mounts.merge_key), (Strategy::Merge, "mountPath"));
    let volumes = spec.schema.lookup("volumes");
    assert_eq!((volumes.strategy, volumes.merge_key), (Strategy::MergeRetainKeys, "name"));
    assert_eq!(volumes.strategy.merging(), Strategy::Merge);
    // Tolerations have no strategy: replaced as a whole.
    assert_eq!(spec.schema.lookup("tolerations").strategy, Strategy::None);
    let conditions = pod.lookup("status").schema.lookup("conditions");
    assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
}

#[test]
fn object_meta_lists() {
    for (group, resource) in [("", "configmaps"), ("events.k8s.io", "events"), ("", "nodes")] {
        let meta = root(group, resource).expect("served").lookup("metadata").schema;
        let owners = meta.lookup("ownerReferences");
        assert_eq!((owners.strategy, owners.merge_key), (Strategy::Merge, "uid"));
        let finalizers = meta.lookup("finalizers");
        assert_eq!((finalizers.strategy, finalizers.merge_key), (Strategy::Merge, ""));
        assert_eq!(finalizers.element_name, "string");
        assert_eq!(meta.lookup("managedFields").strategy, Strategy::None);
    }
}

#[test]
fn other_served_kinds() {
    let svc = root("", "services").expect("served");
    let ports = svc.lookup("spec").schema.lookup("ports");
    assert_eq!((ports.strategy, ports.merge_key), (Strategy::Merge, "port"));
    let conditions = svc.lookup("status").schema.lookup("conditions");
    assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
    let node = root("", "nodes").expect("served");
    let addresses = node.lookup("status").schema.lookup("addresses");
    assert_eq!((addresses.strategy, addresses.merge_key), (Strategy::Merge, "type"));
    let cidrs = node.lookup("spec").schema.lookup("podCIDRs");
    assert_eq!((cidrs.strategy, cidrs.merge_key), (Strategy::Merge, ""));
    let sa = root("", "serviceaccounts").expect("served");
    assert_eq!(sa.lookup("secrets").merge_key, "name");
    let ns = root("", "namespaces").expect("served");
    assert_eq!(ns.lookup("spec").schema.lookup("finalizers").strategy, Strategy::None);
    assert_eq!(root("demo.kubeplex.io", "widgets"), None);
    // Workloads merge their template's containers by name, their conditions by type.
    for resource in ["deployments", "replicasets"] {
        let w = root("apps", resource).expect("served");
        let template = w.lookup("spec").schema.lookup("template").schema;
        let containers = template.lookup("spec").schema.lookup("containers");
        assert_eq!((containers.strategy, containers.merge_key), (Strategy::Merge, "name"));
        let conditions = w.lookup("status").schema.lookup("conditions");
        assert_eq!((conditions.strategy, conditions.merge_key), (Strategy::Merge, "type"));
    }
    assert_eq!(root("apps", "daemonsets"), None);
}

#[test]
fn every_struct_reference_resolves() {
    for (_, fields) in table::STRUCTS {
        for f in *fields {
            if !f.ty.is_empty() {
                assert!(table::STRUCTS.iter().any(|(n, _)| *n == f.ty), "{}", f.ty);
            }
        }
    }
    for (_, _, ty) in table::ROOTS {
        assert!(table::STRUCTS.iter().any(|(n, _)| n == ty), "{ty}");
    }
}
