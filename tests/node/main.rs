//! The node-local mode (TLS listener, the Node authorizer, TokenReview and SubjectAccessReview)
//! in front of the fake apiserver with RBAC, one test binary: identities, outages, and real
//! clients (kube-rs, kubectl, client-go informers) configured as a node's agents are. Each module
//! is one former `tests/*.rs` file.

mod node_clients;
mod node_rules;
mod node_tier_bounds;
mod proxy_node;
mod proxy_node_outage;
