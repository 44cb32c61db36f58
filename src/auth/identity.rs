//! Who a request comes from.

use super::review::UserInfo;

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The sidecar mode: every client shares kubeplex's identity (a loopback listener in one
    /// pod); clients with credentials of their own are passed through with them.
    Shared,
    /// Authenticated by a verified client certificate.
    Certificate(UserInfo),
    /// Authenticated by its bearer token.
    Token(UserInfo),
    /// No credentials.
    Anonymous,
    /// The token could not be reviewed (the upstream is unreachable, or answered oddly), or the
    /// upstream did not accept it: the request is passed through as it is, and the upstream
    /// decides (a 401 is the upstream's to give, when it gives it).
    Unreviewed,
}

impl Identity {
    /// The user a SubjectAccessReview asks about; `None` when the cache must not answer.
    pub fn user(&self) -> Option<UserInfo> {
        match self {
            Identity::Certificate(u) | Identity::Token(u) => Some(u.clone()),
            Identity::Anonymous => Some(UserInfo::anonymous()),
            Identity::Shared | Identity::Unreviewed => None,
        }
    }

    /// The user's name for the access log: empty for the shared identity, `?` for a token
    /// that could not be reviewed.
    pub fn user_name(&self) -> String {
        match self {
            Identity::Certificate(u) | Identity::Token(u) => u.username.clone(),
            Identity::Anonymous => UserInfo::anonymous().username,
            Identity::Shared => String::new(),
            Identity::Unreviewed => "?".to_string(),
        }
    }
}
