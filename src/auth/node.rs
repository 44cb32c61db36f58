//! The node-local mode's authentication and authorization, as one value the request paths
//! hold (its methods are in [`super::authenticate`], [`super::authorize`] and
//! [`super::impersonate`]).

use super::review::Reviews;

/// The node-local mode's authentication and authorization.
pub struct NodeAuth {
    pub reviews: Reviews,
    /// Requests without credentials are `system:anonymous` (true) or refused with 401.
    pub anonymous: bool,
}
