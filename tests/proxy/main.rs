//! kubeplex in front of the fake apiserver (and a scripted upstream), over real loopback sockets,
//! one test binary: reads and watches byte for byte against the apiserver's own answers, Tables,
//! protobuf fields, freshness, scoped and namespaced caches, outages, states on disk, budgets,
//! guardrails and listener limits, shutdown, passthrough, hostile input, and the lean HTTP/1.1
//! server against hyper. Each module is one former `tests/*.rs` file.

mod hostile_input;
mod lean_http1;
mod proxy_budget;
mod proxy_crd_lifecycle;
mod proxy_debug;
mod proxy_disk_state;
mod proxy_encodings;
mod proxy_failover;
mod proxy_freshness;
mod proxy_guardrails;
mod proxy_lean_http1;
mod proxy_listener_limits;
mod proxy_namespace_scope;
mod proxy_outage;
mod proxy_passthrough;
mod proxy_protobuf_fields;
mod proxy_reads;
mod proxy_scopes;
mod proxy_shutdown;
mod proxy_soak;
mod proxy_tables;
mod proxy_tiers;
mod proxy_upstream_gzip;
mod proxy_watch;
mod proxy_watch_rules;
