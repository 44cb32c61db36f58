use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::cache::testutil::{labeled_pod, pod};

fn pods_info() -> ResourceInfo {
    ResourceInfo {
        group: String::new(),
        version: "v1".into(),
        resource: "pods".into(),
        kind: "Pod".into(),
        namespaced: true,
        verbs: vec!["get".into(), "list".into(), "watch".into()],
    }
}

fn objects() -> Vec<Arc<CachedObject>> {
    vec![
        pod("team-0", "a", 11, "node-0"),
        labeled_pod("team-0", "b", 12, "node-1", &[("tier", "web")]),
        pod("team-1", "c", 13, "node-0"),
    ]
}

fn file() -> Vec<u8> {
    let objs = objects();
    encode(
        &pods_info(),
        Encoding::Json,
        &Scope::everything(),
        13,
        1_700_000_000,
        objs.len(),
        objs.iter().map(|o| o.as_ref()),
    )
}

#[test]
fn a_state_comes_back_byte_for_byte_and_indexed() {
    let info = pods_info();
    let state = decode(Bytes::from(file()), Some((&info, Encoding::Json))).unwrap();
    assert_eq!(state.info, info);
    assert_eq!(state.encoding, Encoding::Json);
    assert_eq!(state.resource_version, 13);
    assert_eq!(state.written_at, 1_700_000_000);
    let want: Vec<CachedObject> = objects().iter().map(|o| (**o).clone()).collect();
    // Every field the cache routes on is derived again, equal to the original's.
    assert_eq!(state.objects, want);
    assert_eq!(state.objects[1].label("tier"), Some("web"));
    assert_eq!(state.objects[2].field("spec.nodeName"), Some("node-0"));
}

#[test]
fn an_empty_state_is_a_state() {
    let info = pods_info();
    let bytes =
        encode(&info, Encoding::Protobuf, &Scope::everything(), 7, 1, 0, std::iter::empty());
    let state = decode(Bytes::from(bytes), Some((&info, Encoding::Protobuf))).unwrap();
    assert!(state.objects.is_empty());
    assert_eq!(state.resource_version, 7);
}

#[test]
fn a_truncated_file_is_refused() {
    let f = file();
    for cut in [0, 10, 40, f.len() / 2, f.len() - 1] {
        let err = decode(Bytes::copy_from_slice(&f[..cut]), None).unwrap_err();
        assert!(
            matches!(err, PersistError::Truncated(_) | PersistError::Checksum),
            "cut at {cut}: {err}"
        );
    }
}

#[test]
fn a_flipped_byte_anywhere_is_refused() {
    let f = file();
    for at in (0..f.len()).step_by(7) {
        let mut g = f.clone();
        g[at] ^= 0x20;
        assert!(decode(Bytes::from(g), None).is_err(), "byte {at} flipped and accepted");
    }
}

#[test]
fn another_format_version_or_foreign_file_is_refused() {
    let mut f = file();
    f[8] = 2;
    assert_eq!(decode(Bytes::from(f), None).unwrap_err(), PersistError::Version(2));
    let mut g = file();
    g[..8].copy_from_slice(b"NOTSTATE");
    assert_eq!(decode(Bytes::from(g), None).unwrap_err(), PersistError::Magic);
}

#[test]
fn another_caches_file_is_refused() {
    let mut cms = pods_info();
    cms.resource = "configmaps".into();
    let err = decode(Bytes::from(file()), Some((&cms, Encoding::Json))).unwrap_err();
    assert!(matches!(err, PersistError::Resource { .. }), "{err}");
    let err = decode(Bytes::from(file()), Some((&pods_info(), Encoding::Protobuf))).unwrap_err();
    assert!(matches!(err, PersistError::Resource { .. }), "{err}");
}

/// A file whose checksum is right but whose contents lie (written by something else, or a bug)
/// is refused too: the structure is checked, not only the sum.
#[test]
fn a_well_summed_file_that_lies_is_refused() {
    // Same-length byte replacements: the framing stays where it was.
    let replaced = |from: &str, to: &str| {
        let (from, to) = (from.as_bytes(), to.as_bytes());
        let mut f = file();
        let at = f.windows(from.len()).position(|w| w == from).unwrap();
        f[at..at + from.len()].copy_from_slice(to);
        f
    };
    let reseal = |mut body: Vec<u8>| {
        body.truncate(body.len() - DIGEST_LEN);
        let sum = ring::digest::digest(&ring::digest::SHA256, &body);
        body.extend_from_slice(sum.as_ref());
        Bytes::from(body)
    };
    // More objects announced than held.
    assert!(matches!(
        decode(reseal(replaced("\"objects\":3", "\"objects\":4")), None),
        Err(PersistError::Object { index: 3, .. })
    ));
    // Fewer: bytes left over.
    let fewer = reseal(replaced("\"objects\":3", "\"objects\":2"));
    assert!(matches!(decode(fewer, None), Err(PersistError::Header(_))));
    // An object that is not one.
    assert!(matches!(
        decode(reseal(replaced("\"name\":\"a\"", "\"nome\":\"a\"")), None),
        Err(PersistError::Object { index: 0, .. })
    ));
}

proptest! {
    /// Garbage never panics, however it is framed: with the magic and version, and resealed
    /// with a valid checksum so that the structure checks are what refuses it.
    #[test]
    fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..600), n in 0u32..5000) {
        let _ = decode(Bytes::from(body.clone()), None);
        let mut framed = Vec::new();
        framed.extend_from_slice(MAGIC);
        framed.extend_from_slice(&1u32.to_le_bytes());
        framed.extend_from_slice(&n.to_le_bytes());
        framed.extend_from_slice(&body);
        let sum = ring::digest::digest(&ring::digest::SHA256, &framed);
        framed.extend_from_slice(sum.as_ref());
        let _ = decode(Bytes::from(framed), Some((&pods_info(), Encoding::Json)));
    }
}
