//! `auth`: who a client is, and whether it may read what it asks the cache for — the node-local
//! mode (`--mode node`), where many agents with different identities share one kubeplex. The
//! layer between `upstream` (whose apiserver it asks) and `serve` (which asks it); it decides,
//! and `serve` writes the answers ([`Refusal`]).
//!
//! Authentication follows the apiserver's union of authenticators, in its order:
//! 1. a client certificate verified against the client CA (`kubeplex_net::ClientCert`: user =
//!    CN, groups = O) — the x509 authenticator runs first, so a valid certificate wins over a
//!    token;
//! 2. a bearer token, by a TokenReview against the upstream ([`review`]);
//! 3. neither: `system:anonymous`, as with the apiserver's `--anonymous-auth` (or 401 when
//!    anonymous requests are switched off). A certificate that failed verification, or a token
//!    the upstream does not know, is 401 — never anonymous.
//!
//! Authorization: before anything from the cache is sent, a SubjectAccessReview asks the
//! upstream whether the identity may do that read — verb, resource, namespace, name, and the
//! request's field and label selectors, which the Node authorizer decides on. Watches are
//! authorized once, when they start, as the apiserver does.
//!
//! **Only a grant is acted on.** A read kubeplex cannot positively authorize — a denial, a
//! token the upstream did not accept, a review that failed — is passed through as the client
//! (its token as it is; a certificate's user impersonated), so that the apiserver gives its
//! *current* answer. A refusal is never replayed from kubeplex's memory: the Node authorizer
//! refuses a node's read of a pod for a moment after the pod is bound to it (its graph catches
//! up: median 0.3 s, up to ~0.9 s measured on 1.36), and a remembered refusal would outlive the
//! apiserver's own by the length of its TTL (docs/design.md §7). Remembered denials only decide that
//! a read goes upstream, which costs the upstream exactly what the client would directly.

//!
//! The parts, a file each: [`identity`] (who a request comes from), [`authenticate`],
//! [`authorize`] (reads from the cache), [`gate`] (the step in front of the cache that asks
//! it), [`graph_lag`] (a node's reads right after a binding), [`node_rules`] (the Node
//! authorizer's grants kubeplex decides itself),
//! [`impersonate`] (what passes through as whom),
//! [`refusal`] (what the apiserver would answer instead), [`review`] (the review client,
//! its answers' cache, outage policy and persistence), and [`service_account`] (bound
//! ServiceAccount tokens verified here, without a TokenReview).

pub mod authenticate;
pub mod authorize;
pub mod gate;
pub mod graph_lag;
pub mod identity;
pub mod impersonate;
pub mod node;
pub mod node_rules;
pub mod refusal;
pub mod review;
pub mod service_account;

pub use self::identity::Identity;
pub use self::node::NodeAuth;
pub use self::refusal::Refusal;
pub use self::review::{ReviewConfig, ReviewMetrics, Reviews, UserInfo};
