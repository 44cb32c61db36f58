//! Authentication, in the apiserver's order: a verified client certificate, then a bearer token
//! (by a TokenReview), then anonymous (or 401).

use http::{header, HeaderMap};

use super::identity::Identity;
use super::node::NodeAuth;
use super::refusal::Refusal;
use super::review::{TokenIdentity, UserInfo};

/// The group of every authenticated user.
const AUTHENTICATED: &str = "system:authenticated";

impl NodeAuth {
    /// Who sent a request, or the 401 the apiserver would answer.
    pub async fn authenticate(
        &self,
        extensions: &http::Extensions,
        headers: &HeaderMap,
    ) -> Result<Identity, Refusal> {
        if let Some(cert) = extensions.get::<kubeplex_net::ClientCert>() {
            // The apiserver adds `system:authenticated` to every user an authenticator
            // accepted (`AuthenticatedGroupAdder`): what is granted to all authenticated users
            // (discovery, for one) is granted to a certificate's user too (fixture
            // `sar-node-pods`: a kubelet's groups are system:nodes and system:authenticated).
            let mut groups = cert.groups.clone();
            if !groups.iter().any(|g| g == AUTHENTICATED) {
                groups.push(AUTHENTICATED.to_string());
            }
            return Ok(Identity::Certificate(UserInfo {
                username: cert.user.clone(),
                uid: cert.uid.clone().unwrap_or_default(),
                groups,
                ..UserInfo::default()
            }));
        }
        let rejected = extensions.get::<kubeplex_net::RejectedClientCert>().is_some();
        if let Some(token) = bearer_token(headers) {
            // A ServiceAccount token bound to a pod, verified here as the apiserver would:
            // no TokenReview (`auth::service_account`).
            if let Some(user) = self.tokens.as_ref().and_then(|t| t.verify(token)) {
                self.reviews.verified_locally();
                self.reviews.remember_token(token, &user).await;
                return Ok(Identity::Token(user));
            }
            return match self.reviews.authenticate(token).await {
                Ok(TokenIdentity::User(user)) => Ok(Identity::Token(user)),
                // Not replayed: the upstream answers the request itself (its 401, or a grant
                // for a token it has come to accept since).
                Ok(TokenIdentity::Invalid) => Ok(Identity::Unreviewed),
                Err(e) => {
                    tracing::warn!(error = %e, "token review failed; passing the request through as it is");
                    Ok(Identity::Unreviewed)
                }
            };
        }
        if rejected || !self.anonymous {
            return Err(Refusal::Unauthorized);
        }
        Ok(Identity::Anonymous)
    }
}

/// The `Authorization: Bearer` token, as the apiserver's bearer authenticator reads it.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests;
