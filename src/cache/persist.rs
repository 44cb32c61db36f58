//! A cache's state on disk: what lets a kubeplex restarted while the apiserver is unreachable (a
//! node rebooted during an outage) serve its last state until the upstream answers (issue 13).
//! The live layer (`live::disk`) decides when to write and read; this is only the format.
//!
//! One file per cache:
//!
//! ```text
//! "KPXSTATE"  magic (8 bytes)
//! u32 LE      format version (1)
//! u32 LE      header length, then the header (JSON: the resource as discovery described it,
//!             the encoding, the state's resourceVersion, the object count, when written)
//! per object: u32 LE length, then the object's bytes exactly as cached (JSON list item or
//!             bare protobuf message; never re-serialized)
//! 32 bytes    SHA-256 of everything before it
//! ```
//!
//! Reading checks everything before trusting anything: a truncated, corrupt, foreign or
//! other-version file is refused with a [`PersistError`], never a panic and never a partial
//! state. Objects are indexed again on load from their bytes, as from a list.

use bytes::{BufMut, Bytes, BytesMut};
use ring::digest;
use serde::{Deserialize, Serialize};

use super::object::{CachedObject, Encoding, ObjectError};
use super::scope::Scope;
use crate::wire::resource::ResourceInfo;

const MAGIC: &[u8; 8] = b"KPXSTATE";
const FORMAT_VERSION: u32 = 1;
const DIGEST_LEN: usize = 32;
/// Magic, version, header length.
const PREAMBLE: usize = 16;
/// A header is a few hundred bytes; refuse anything absurd before parsing it.
const MAX_HEADER: usize = 64 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PersistError {
    #[error("too short to be a state file ({0} bytes)")]
    Truncated(usize),
    #[error("not a kubeplex state file")]
    Magic,
    #[error("state file format {0}, this kubeplex reads {FORMAT_VERSION}")]
    Version(u32),
    #[error("checksum mismatch: the file is corrupt or was cut short")]
    Checksum,
    #[error("bad header: {0}")]
    Header(String),
    #[error("object {index}: {error}")]
    Object { index: usize, error: String },
    #[error("the file holds {found}, not {expected}")]
    Resource { found: String, expected: String },
}

/// What the header says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Header {
    group: String,
    version: String,
    resource: String,
    kind: String,
    namespaced: bool,
    verbs: Vec<String>,
    encoding: String,
    resource_version: u64,
    objects: usize,
    /// Unix seconds.
    written_at: u64,
    /// The cache's scope; absent for the whole resource (and in files written before scopes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<ScopeHeader>,
}

/// A cache's scope as its header writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScopeHeader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label_selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    field_selector: Option<String>,
}

/// A cache's state as read back from disk.
#[derive(Debug, Clone)]
pub struct DiskState {
    /// The resource as discovery described it when the state was written (so that it can be
    /// served before discovery answers again).
    pub info: ResourceInfo,
    pub encoding: Encoding,
    /// The scope of the cache it was written from.
    pub scope: Scope,
    pub resource_version: u64,
    /// Unix seconds.
    pub written_at: u64,
    pub objects: Vec<CachedObject>,
}

/// The file of a cache's state at `rv`: its `count` objects' bytes as they are.
pub fn encode<'a>(
    info: &ResourceInfo,
    encoding: Encoding,
    scope: &Scope,
    rv: u64,
    written_at: u64,
    count: usize,
    objects: impl Iterator<Item = &'a CachedObject>,
) -> Vec<u8> {
    let header = Header {
        group: info.group.clone(),
        version: info.version.clone(),
        resource: info.resource.clone(),
        kind: info.kind.clone(),
        namespaced: info.namespaced,
        verbs: info.verbs.clone(),
        encoding: encoding.as_str().to_string(),
        resource_version: rv,
        objects: count,
        written_at,
        scope: (*scope != Scope::everything()).then(|| ScopeHeader {
            namespace: scope.namespace().map(str::to_string),
            label_selector: scope.label_selector(),
            field_selector: scope.field_selector(),
        }),
    };
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut out = BytesMut::new();
    out.put_slice(MAGIC);
    out.put_u32_le(FORMAT_VERSION);
    out.put_u32_le(header.len() as u32);
    out.put_slice(&header);
    for o in objects {
        out.put_u32_le(o.body.len() as u32);
        out.put_slice(&o.body);
    }
    let sum = digest::digest(&digest::SHA256, &out);
    out.put_slice(sum.as_ref());
    out.to_vec()
}

/// Reads a state file; `expect` names the cache it must belong to, if known.
pub fn decode(
    file: Bytes,
    expect: Option<(&ResourceInfo, Encoding)>,
) -> Result<DiskState, PersistError> {
    if file.len() < PREAMBLE + DIGEST_LEN {
        return Err(PersistError::Truncated(file.len()));
    }
    if &file[..8] != MAGIC {
        return Err(PersistError::Magic);
    }
    let version = u32_at(&file, 8);
    if version != FORMAT_VERSION {
        return Err(PersistError::Version(version));
    }
    let body_end = file.len() - DIGEST_LEN;
    let sum = digest::digest(&digest::SHA256, &file[..body_end]);
    if sum.as_ref() != &file[body_end..] {
        return Err(PersistError::Checksum);
    }
    let header_len = u32_at(&file, 12) as usize;
    if header_len > MAX_HEADER || PREAMBLE + header_len > body_end {
        return Err(PersistError::Header(format!("length {header_len}")));
    }
    let header: Header = serde_json::from_slice(&file[PREAMBLE..PREAMBLE + header_len])
        .map_err(|e| PersistError::Header(e.to_string()))?;
    let encoding = match header.encoding.as_str() {
        "json" => Encoding::Json,
        "protobuf" => Encoding::Protobuf,
        other => return Err(PersistError::Header(format!("encoding {other:?}"))),
    };
    let info = ResourceInfo {
        group: header.group,
        version: header.version,
        resource: header.resource,
        kind: header.kind,
        namespaced: header.namespaced,
        verbs: header.verbs,
    };
    let scope = match &header.scope {
        None => Scope::everything(),
        Some(s) => Scope::parse(
            &info.group,
            &info.resource,
            s.namespace.as_deref(),
            s.label_selector.as_deref(),
            s.field_selector.as_deref(),
        )
        .map_err(|e| PersistError::Header(format!("scope: {e}")))?,
    };
    if let Some((want, want_encoding)) = expect {
        let same = want.group == info.group
            && want.version == info.version
            && want.resource == info.resource
            && want_encoding == encoding;
        if !same {
            return Err(PersistError::Resource {
                found: describe(&info, encoding),
                expected: describe(want, want_encoding),
            });
        }
    }
    // The count is checked against what the file holds before anything is allocated for it.
    let mut at = PREAMBLE + header_len;
    let mut objects = Vec::with_capacity(header.objects.min((body_end - at) / 4));
    for index in 0..header.objects {
        let bad = |error: String| PersistError::Object { index, error };
        if at + 4 > body_end {
            return Err(bad("cut short".into()));
        }
        let len = u32_at(&file, at) as usize;
        at += 4;
        if len > body_end - at {
            return Err(bad(format!("length {len} past the end")));
        }
        let bytes = file.slice(at..at + len);
        at += len;
        let object = CachedObject::from_list_item(&info, encoding, bytes)
            .map_err(|e: ObjectError| bad(e.to_string()))?;
        objects.push(object);
    }
    if at != body_end {
        return Err(PersistError::Header(format!(
            "{} bytes after the last of {} objects",
            body_end - at,
            header.objects
        )));
    }
    Ok(DiskState {
        info,
        encoding,
        scope,
        resource_version: header.resource_version,
        written_at: header.written_at,
        objects,
    })
}

/// The file name of a cache's state: one per (group, version, resource, encoding, scope),
/// readable — `core_v1_pods_protobuf.state`; one namespace's `..._json.ns-team-0.state`; with
/// selectors, a digest of the scope (`..._protobuf.s-1a2b3c4d5e6f.state`), since selectors hold
/// characters no file name should.
pub fn file_name(info: &ResourceInfo, encoding: Encoding, scope: &Scope) -> String {
    let group = if info.group.is_empty() { "core" } else { &info.group };
    let base = format!("{group}_{}_{}_{}", info.version, info.resource, encoding.as_str());
    match (scope.has_selectors(), scope.namespace().filter(|_| info.namespaced)) {
        (false, None) => format!("{base}.state"),
        (false, Some(ns)) => format!("{base}.ns-{ns}.state"),
        (true, _) => {
            let sum = digest::digest(&digest::SHA256, scope.to_string().as_bytes());
            let short: String = sum.as_ref()[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("{base}.s-{short}.state")
        }
    }
}

fn describe(info: &ResourceInfo, encoding: Encoding) -> String {
    format!("{}/{}/{} ({})", info.group, info.version, info.resource, encoding.as_str())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(word)
}

#[cfg(test)]
mod tests;
