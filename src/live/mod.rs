//! The live layer: the caches kept current over the connection to the upstream
//! (`crate::upstream`), which it uses and which never names it (docs/architecture.md).
//!
//! - [`caches`]: the running caches (state, reflector, sweeper, proofs), started on first use,
//!   within the cost rule and the memory budget;
//! - [`reflector`]: the list+watch loop toward the upstream for one cache, which yields what it
//!   learns as [`feed::Feed`] events;
//! - [`feed`]: those events, and how they are applied to a cache;
//! - [`mirror`]: caches fed by another encoding's cache of the same resource (one upstream
//!   watch per resource, whatever the encodings read);
//! - [`freshness`]: proving a cache current for consistent reads (metadata lists and bookmark
//!   probes);
//! - [`disk`]: caches' states written to disk and read back at start;
//! - [`discovery`]: what the upstream serves (its discovery documents: resources, kinds,
//!   scopes, verbs), kept through outages, and the documents' bytes clients are answered with;
//! - [`metrics`]: the upstream calls and relists, by cache.

pub mod caches;
pub mod discovery;
pub mod disk;
pub mod feed;
pub mod freshness;
pub mod metrics;
pub mod mirror;
pub mod reflector;
