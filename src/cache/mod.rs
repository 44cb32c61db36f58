//! The resource cache: per resource type and wire encoding, the objects exactly as the upstream
//! sent them, kept as point-in-time states so every page of a list is served at one
//! resourceVersion.
//!
//! - [`object`]: one cached object (bytes + the fields it is routed and filtered by);
//! - [`store`]: the current state, the RV the cache is at, and a window of past states;
//! - [`index`]: secondary indexes carried by every state (pods by node, objects by name);
//! - [`select`]: a list page from a state, as kube-apiserver's watch cache answers it;
//! - [`history`]: the ring of recent events watches resume from;
//! - [`fanout`]: the downstream watchers of a cache, their bounded queues, and dispatch;
//! - [`frames`]: watch stream frames (JSON lines, protobuf frames) for a resource;
//! - `relist`: a relist's differences as watch events;
//! - [`resource`]: one cache's state behind its locks — the store, the RV readers wait on, load
//!   epochs, the fan-out — which the live layer (`live::caches`, the reflector) feeds;
//! - [`scope`]: what part of a resource a cache holds (namespace, selectors), and whether a
//!   read lies within it;
//! - [`transcode`]: an object in the other encoding, rendered with the schema (for a cache fed
//!   by another encoding's: `live::mirror`);
//! - [`metrics`]: the caches' Prometheus series, registered into the process's registry.
//!
//! No I/O and no tasks: the modules above `resource` are plain data the caller serialises;
//! `resource` guards them with locks. Only `wire` is imported (checked by `tests/layers.rs`).

pub mod clock;
pub mod fanout;
pub mod frames;
pub mod history;
pub mod index;
pub mod metrics;
pub mod object;
pub mod persist;
mod relist;
pub mod resource;
pub mod scope;
pub mod select;
pub mod store;
pub mod transcode;

pub use index::{FieldIndex, Indexes};
pub use object::{CachedObject, Encoding, Key, ObjectError};
pub use scope::Scope;
pub use select::{select, Page, Query};
pub use store::{Applied, ApplyError, Change, Snapshot, SnapshotError, Store, StoreLimits};

#[cfg(test)]
mod custom_resource_tests;
#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testutil;
