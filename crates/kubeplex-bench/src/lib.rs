//! `kubeplex-bench`: load against any apiserver — the upstream directly, or kubeplex in front of
//! it — so the two can be compared side by side in one run (issue 5).
//!
//! - [`target`]: who is measured (kubeconfig or URL; loopback only unless allowed), and the
//!   readings taken from the outside: `/metrics` call counts, a process's RSS from `/proc`;
//! - [`hist`]: a log-bucketed latency histogram (percentiles within 1 %, fixed memory);
//! - [`seed`]: creating and removing the objects a run reads;
//! - [`list`]: concurrent clients repeating a list;
//! - [`watch`]: concurrent watchers while a writer changes objects at a fixed rate, measuring
//!   delivery latency from a timestamp the writer puts in each object, and lost events;
//! - [`mix`]: a realistic set of nodes' clients ([`informer`]: how client-go's informers and
//!   kubectl read) started together, and the LIST/WATCH calls that reached the upstream;
//! - [`node`]: N nodes whose kubelet, kube-proxy, CNI-like and log-agent-like clients read and
//!   write as the 1.36 agents do, against a fake apiserver with the Node authorizer, directly
//!   and through a tier of N kubeplex processes, and what the apiserver served in each case;
//! - [`scale`]: thousands of emulated nodes (many per process) against an apiserver — the real
//!   one, or the fake — directly and through pool replicas: the apiserver's and the pool's cost,
//!   delivery times, and every node's view checked.
//!
//! Every run is bounded in time and in count.
#![forbid(unsafe_code)]

pub mod hist;
pub mod informer;
pub mod list;
pub mod mix;
pub mod node;
pub mod scale;
pub mod seed;
pub mod target;
pub mod watch;

use serde::Serialize;

/// Prints a report as text or, with `--json`, as one JSON document.
pub fn print<T: Serialize + std::fmt::Display>(report: &T, json: bool) {
    if json {
        match serde_json::to_string(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("cannot encode the report: {e}"),
        }
    } else {
        println!("{report}");
    }
}
