//! The hyper accept loop shared by kubeplex's listeners and the fake apiserver's: HTTP/1.1 and
//! HTTP/2 (prior knowledge) on one listener, upgrades allowed, every connection a task owned by
//! the loop (aborting the loop's task ends them all). [`serve_tls_limited`] is the same over TLS, with
//! the client certificate's user in every request's extensions ([`identity`]).
//!
//! `scratch` (a throwaway PKI and scratch directories, with the `scratch` feature) is for
//! tests and the load tool, never the proxy.
#![forbid(unsafe_code)]

mod body;
pub mod files;
pub mod identity;
pub mod limits;
#[cfg(any(test, feature = "scratch"))]
pub mod scratch;
mod serve;
mod timed;
pub mod tls;

pub use identity::{ClientCert, RejectedClientCert};
pub use limits::{ConnObserver, Limits};
pub use tls::{serve_tls_limited, TlsAcceptor, TlsConfig, TlsError};

pub use body::{Body, BoxError};
pub use files::FileStamp;
pub use serve::{accept_limited, serve, serve_limited, with_hyper_limited, Drain, DrainSignal};
