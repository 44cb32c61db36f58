//! List continue tokens, byte-compatible with kube-apiserver's
//! (`staging/src/k8s.io/apiserver/pkg/storage/continue.go`).
//!
//! A token is the unpadded base64url of `{"v":"meta.k8s.io/v1","rv":N,"start":"K"}` as Go's
//! `encoding/json` writes it. `rv` is the resourceVersion every page of the list is served at;
//! `K` is where the next page starts, relative to the list's key prefix: the last key returned
//! plus `\0`, so the next page starts strictly after it. Relative keys are `/<name>` within one
//! namespace or for cluster-scoped resources, and `/<namespace>/<name>` across namespaces.
//!
//! Pages come in key order, and keys compare as bytes: across namespaces that is the order of
//! `"<namespace>/<name>"`, not of the pair `(namespace, name)` (`a-b/x` sorts before `a/x`).
//! [`compare_to_start`] compares the way the apiserver does.
//!
//! What the caller still owns: a token whose `rv` is older than the cache's (or etcd's)
//! compaction gets 410 `Expired` ("The provided continue parameter is too old ..."); a negative
//! `rv` (the apiserver's "inconsistent continue" token from such a 410) means "continue at the
//! latest resourceVersion"; a token together with a `resourceVersion` other than "" or "0" is
//! 400 ("specifying resource version is not allowed when using continue"); and a decode error
//! becomes 400 `BadRequest` with message `invalid continue token: {error}`.

use std::cmp::Ordering;

use base64::Engine as _;

use super::gojson;

/// The token's fields, after the apiserver's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The resourceVersion the list is served at; negative means "latest".
    pub rv: i64,
    /// The start key relative to the list's key prefix, always beginning with `/` (the
    /// apiserver prepends one when the token's key lacks it).
    pub start: String,
}

/// Why a token was refused; `Display` is what follows `invalid continue token: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// Not unpadded base64url (Go's `base64.CorruptInputError`).
    #[error("continue key is not valid: illegal base64 data at input byte {0}")]
    Base64(usize),
    /// Not JSON, or JSON of the wrong shape; holds Go's `encoding/json` message.
    #[error("continue key is not valid: {0}")]
    Json(String),
    #[error("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    ZeroResourceVersion,
    #[error("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStartKey,
    /// The start key is not a clean path (`..`, `//`, a trailing `/`): a client trying to list
    /// outside the prefix it asked for.
    #[error("continue key is not valid: {0}")]
    UncleanStartKey(String),
    #[error("continue key is not valid: server does not recognize this encoded version {0}")]
    UnknownVersion(String),
}

const VERSION: &str = "meta.k8s.io/v1";

/// The token the apiserver would hand out for a page served at `rv` whose next page starts at
/// `start_key` (see [`start_key`]).
pub fn encode(rv: i64, start_key: &str) -> String {
    let mut json = Vec::with_capacity(start_key.len() + 48);
    json.extend_from_slice(br#"{"v":"meta.k8s.io/v1","rv":"#);
    json.extend_from_slice(rv.to_string().as_bytes());
    json.extend_from_slice(br#","start":"#);
    gojson::push_string(&mut json, start_key);
    json.push(b'}');
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// `DecodeContinue`, with the same checks in the same order and the same messages.
pub fn decode(token: &str) -> Result<ContinueToken, ContinueError> {
    let data = go_base64_url_decode(token.as_bytes()).map_err(ContinueError::Base64)?;
    let fields = go_json::unmarshal(&data).map_err(ContinueError::Json)?;
    if fields.version != VERSION {
        return Err(ContinueError::UnknownVersion(fields.version));
    }
    if fields.rv == 0 {
        return Err(ContinueError::ZeroResourceVersion);
    }
    if fields.start.is_empty() {
        return Err(ContinueError::EmptyStartKey);
    }
    let start = if fields.start.starts_with('/') {
        fields.start.clone()
    } else {
        format!("/{}", fields.start)
    };
    // Go compares path.Clean(key) with key; a rooted path is clean exactly when it is "/" or
    // every segment is non-empty and neither "." nor "..".
    let clean = start == "/" || start.split('/').skip(1).all(|s| !matches!(s, "" | "." | ".."));
    if !clean {
        return Err(ContinueError::UncleanStartKey(fields.start));
    }
    Ok(ContinueToken { rv: fields.rv, start })
}

/// The key of an object relative to the list's prefix: `/<name>` when the list is confined to
/// one namespace or the object is cluster-scoped, `/<namespace>/<name>` otherwise.
pub fn relative_key(namespace: Option<&str>, name: &str, list_is_namespaced_scope: bool) -> String {
    match namespace.filter(|ns| !list_is_namespaced_scope && !ns.is_empty()) {
        Some(ns) => format!("/{ns}/{name}"),
        None => format!("/{name}"),
    }
}

/// The start key of the page after the one that ended with this object: its relative key plus
/// `\0`, as the apiserver builds it (fixture cm-list-page1: `/cm-b\u0000`).
pub fn start_key(namespace: Option<&str>, name: &str, list_is_namespaced_scope: bool) -> String {
    let mut key = relative_key(namespace, name, list_is_namespaced_scope);
    key.push('\0');
    key
}

/// Where an object's relative key sorts against a token's start key, without allocating: the
/// next page holds exactly the objects that are not `Less`.
pub fn compare_to_start(
    namespace: Option<&str>,
    name: &str,
    list_is_namespaced_scope: bool,
    start: &str,
) -> Ordering {
    let ns = namespace.filter(|ns| !list_is_namespaced_scope && !ns.is_empty());
    let ns_part = ns.map(|ns| [b"/".as_slice(), ns.as_bytes()]).unwrap_or_default();
    let key = ns_part.into_iter().flatten().chain(b"/").chain(name.as_bytes());
    key.cmp(start.as_bytes().iter())
}

impl ContinueToken {
    /// Whether the object belongs to the pages from this token on.
    pub fn admits(
        &self,
        namespace: Option<&str>,
        name: &str,
        list_is_namespaced_scope: bool,
    ) -> bool {
        compare_to_start(namespace, name, list_is_namespaced_scope, &self.start) != Ordering::Less
    }

    /// The object the previous page ended with, when the start key has the shape the apiserver
    /// gives it (relative key + `\0`): `(namespace, name)`, the namespace only for lists across
    /// namespaces. Hand-made tokens may hold any key; use [`ContinueToken::admits`] for those.
    pub fn last_returned(&self, list_is_namespaced_scope: bool) -> Option<(Option<&str>, &str)> {
        let key = self.start.strip_suffix('\0')?.strip_prefix('/')?;
        if list_is_namespaced_scope {
            return (!key.is_empty() && !key.contains('/')).then_some((None, key));
        }
        match key.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Some((Some(ns), name))
            }
            None if !key.is_empty() => Some((None, key)),
            _ => None,
        }
    }
}

/// Go's `base64.RawURLEncoding.DecodeString`: it skips `\r` and `\n`, does not check the
/// unused trailing bits, and reports the offset of the first bad byte.
fn go_base64_url_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    fn sextet(c: u8) -> Option<u8> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        })
    }
    let mut out = Vec::with_capacity(src.len() * 3 / 4);
    let mut si = 0;
    // One iteration is Go's decodeQuantum: up to four sextets, newlines skipped.
    while si < src.len() {
        let mut quantum = [0u8; 4];
        let mut j = 0;
        while j < 4 {
            let Some(&c) = src.get(si) else {
                if j == 1 {
                    return Err(si - 1);
                }
                break;
            };
            si += 1;
            match sextet(c) {
                Some(v) => {
                    quantum[j] = v;
                    j += 1;
                }
                None if c == b'\n' || c == b'\r' => {}
                // No padding character exists in this encoding, so '=' is as bad as any.
                None => return Err(si - 1),
            }
        }
        let [a, b, c, d] = quantum.map(u32::from);
        let val = a << 18 | b << 12 | c << 6 | d;
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(bytes.get(..j.saturating_sub(1)).unwrap_or_default());
    }
    Ok(out)
}

mod go_json;

#[cfg(test)]
mod tests;
