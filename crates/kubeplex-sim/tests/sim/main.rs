//! The fake apiserver's tests over real loopback sockets, one test binary: against the
//! kube-apiserver 1.36 captures in `../shared/fixtures` (`sim_fixtures`, `sim_protobuf`,
//! `sim_auth`), its rules for lists, watches, writes and workloads, and the kinds node agents
//! read (`node_kinds`).

mod node_kinds;
mod sim_auth;
mod sim_fixtures;
mod sim_lists;
mod sim_protobuf;
mod sim_watch;
mod sim_workloads;
mod sim_writes;

/// What the modules import as `support`: the raw HTTP/1.1 client, watch readers and fixtures of
/// `kubeplex-test-client`, and the captured objects to seed the fake apiserver with.
mod support {
    pub use kubeplex_test_client::*;

    use serde_json::{json, Value};

    /// The configmaps and pods of namespace `fx` as the captures show them (`cm-list-json`; the
    /// pods decoded from `pod-list-protobuf`, which holds them whole), to seed the fake apiserver
    /// with.
    pub fn captured_fx_objects() -> Vec<Value> {
        let mut out = Vec::new();
        for item in fixture("cm-list-json").json()["items"].as_array().expect("items") {
            let mut o = json!({"kind": "ConfigMap", "apiVersion": "v1"});
            for (k, v) in item.as_object().expect("object") {
                o[k] = v.clone();
            }
            out.push(o);
        }
        let body = fixture("pod-list-protobuf").body;
        let env = kubeplex_wire::proto::decode_unknown(&body).expect("envelope");
        let list_t = kubeplex_wire::codec::type_for("v1", "PodList").expect("PodList type");
        let list = kubeplex_wire::codec::from_protobuf(list_t, env.raw).expect("decode");
        for item in list["items"].as_array().expect("items") {
            let mut o = json!({"kind": "Pod", "apiVersion": "v1"});
            for (k, v) in item.as_object().expect("object") {
                o[k] = v.clone();
            }
            out.push(o);
        }
        out
    }
}
