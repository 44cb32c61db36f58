//! `serve`: the proxy's downstream side — accepts clients (HTTP/1.1 and HTTP/2), answers the
//! reads the cache can answer exactly, passes everything else through, and exposes admin
//! endpoints.
//!
//! Two request paths, each a tower stack built in one function, one layer per line
//! (docs/style.md rule 1):
//! 1. [`stack::client`], every request: span, panic guard, classification into the typed
//!    [`request::Class`], metrics, authentication, then [`route`]: a GET of a resource
//!    collection or object (not a subresource) whose resource supports list+watch is offered
//!    to the cache — `cached` (gets, lists) or `watch` (watches) answers it when the cache can
//!    do so exactly, for a client that may read it (`read`: node mode's gate) — and everything
//!    else goes down the second stack;
//! 2. [`passthrough::stack`]: whose identity goes upstream (impersonation), admission, the
//!    body limit, then [`passthrough::forward`] streams the request to the upstream and back.
//!
//! [`Proxy`] ([`proxy`]) binds the listeners and builds the state every connection shares
//! ([`ProxyState`]); `admin` serves `/metrics`, `/healthz`, `/readyz` and `/debug/caches`.

mod admin;
mod around;
pub mod body;
mod cache_read;
mod graph_retry;
pub mod guardrails;
pub mod metrics;
pub mod passthrough;
mod proxy;
pub mod request;
mod route;
pub mod stack;
mod state;

pub use self::proxy::{BindError, Http1Server, Mode, NodeConfig, Proxy, ProxyBuilder, StartError};
pub use self::state::ProxyState;
pub use crate::live::caches::CacheSpec;
