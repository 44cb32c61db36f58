//! The `Authorization` header for each upstream request, kept current: token files are
//! re-read when they change, exec plugins re-run when their credential expires.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::HeaderValue;
use kubeplex_net::FileStamp;

use super::config::AuthConfig;
use super::exec::{ExecAuth, ExecCredentials, ExecError};

/// Why a configured credential cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("the {0} contains characters not allowed in an http header")]
    InvalidHeader(&'static str),
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// The runtime form of an [`AuthConfig`].
pub(super) enum Credentials {
    None,
    Static(HeaderValue),
    TokenFile(TokenFile),
    Exec(ExecAuth),
}

/// The credential for one request.
pub(super) struct Current {
    pub(super) authorization: Option<HeaderValue>,
    /// Set for exec plugins: the credential used, to invalidate on 401 and to know its
    /// client certificate.
    pub(super) exec: Option<Arc<ExecCredentials>>,
}

impl Credentials {
    pub(super) fn new(auth: &AuthConfig, reload_interval: Duration) -> Result<Self, AuthError> {
        Ok(match auth {
            AuthConfig::None => Self::None,
            AuthConfig::Token(token) => Self::Static(bearer(token)?),
            AuthConfig::Basic { username, password } => {
                let pair = format!("{username}:{password}");
                let value =
                    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
                Self::Static(sensitive(&value, "basic credential")?)
            }
            AuthConfig::TokenFile { path, initial } => Self::TokenFile(TokenFile {
                path: path.clone(),
                interval: reload_interval,
                state: Mutex::new(TokenState {
                    header: bearer(initial)?,
                    checked: None,
                    stamp: None,
                }),
            }),
            AuthConfig::Exec(exec) => Self::Exec(ExecAuth::new(exec.clone())),
        })
    }

    pub(super) async fn current(&self) -> Result<Current, AuthError> {
        Ok(match self {
            Self::None => Current { authorization: None, exec: None },
            Self::Static(value) => Current { authorization: Some(value.clone()), exec: None },
            Self::TokenFile(file) => Current { authorization: Some(file.header()), exec: None },
            Self::Exec(exec) => {
                let creds = exec.get().await?;
                let authorization = creds.token.as_deref().map(bearer).transpose()?;
                Current { authorization, exec: Some(creds) }
            }
        })
    }

    /// Called when the apiserver answered 401 to a request sent with `used`.
    pub(super) async fn unauthorized(&self, used: &Current) {
        if let (Self::Exec(exec), Some(creds)) = (self, &used.exec) {
            exec.invalidate(creds).await;
        }
    }
}

/// A token file, re-read when its mtime or size changes, checked at most once per `interval`.
pub(super) struct TokenFile {
    path: PathBuf,
    interval: Duration,
    state: Mutex<TokenState>,
}

struct TokenState {
    header: HeaderValue,
    checked: Option<Instant>,
    /// Of the content in `header`; `None` until the file was read once.
    stamp: Option<FileStamp>,
}

impl TokenFile {
    /// The current header. The file is small and the check rare, so it is read inline; the
    /// lock is never held across an await.
    fn header(&self) -> HeaderValue {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if state.checked.is_some_and(|at| now.duration_since(at) < self.interval) {
            return state.header.clone();
        }
        state.checked = Some(now);
        match self.reload(&state) {
            Ok(Some((header, stamp))) => {
                tracing::info!(path = %self.path.display(), "reloaded the bearer token file");
                state.header = header;
                state.stamp = Some(stamp);
            }
            Ok(None) => {}
            // client-go keeps the last good token when a re-read fails; so do we.
            Err(reason) => {
                tracing::warn!(path = %self.path.display(), %reason, "keeping the previous bearer token");
            }
        }
        state.header.clone()
    }

    fn reload(&self, state: &TokenState) -> Result<Option<(HeaderValue, FileStamp)>, String> {
        // Stat'ed before reading, so that a write racing the read is seen at the next check.
        let stamp = FileStamp::stat(&self.path).map_err(|e| e.to_string())?;
        if state.stamp == Some(stamp) {
            return Ok(None);
        }
        let bytes = std::fs::read(&self.path).map_err(|e| e.to_string())?;
        let token = String::from_utf8_lossy(&bytes).trim().to_owned();
        // A half-written file reads empty; leave the stamp unset so the next check retries.
        if token.is_empty() {
            return Err("the token file is empty".to_owned());
        }
        let header = bearer(&token).map_err(|e| e.to_string())?;
        Ok(Some((header, stamp)))
    }
}

fn bearer(token: &str) -> Result<HeaderValue, AuthError> {
    sensitive(&format!("Bearer {token}"), "bearer token")
}

/// Marked sensitive so HTTP/2 never puts it in the HPACK dynamic table.
fn sensitive(value: &str, what: &'static str) -> Result<HeaderValue, AuthError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| AuthError::InvalidHeader(what))?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests;
