//! What a cache rendered from the other encoding's (`live::mirror`) serves besides lists of
//! objects — watch events, PartialObjectMetadata lists, Tables — against what a real
//! kube-apiserver 1.36 sent for the same objects (`scripts/realcluster/codec-capture.py`, during
//! a run of real kubelets and kube-proxies, `tests/fixtures/realcluster/<resource>.*`):
//! - `.watch.json` / `.watch.pb`: a WatchList's ADDED events in each encoding, as framed;
//! - `.meta.json` / `.meta.pb`: the list as a PartialObjectMetadataList, at the lists' RV;
//! - `.table.json` (and `.table.date`, its `Date`: when the apiserver computed the ages): the
//!   list as a meta.k8s.io/v1 Table.
//!
//! Each is written here as kubeplex serves it (`cache::frames::Encoder`, `serve::cache_read::encode`,
//! `serve::cache_read::table`: the same wire functions) from objects a cache of the *other* encoding holds,
//! rendered by the [`Transcoder`] — and must be the apiserver's bytes.

use std::collections::BTreeMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{cached, info, CAPTURED};
use crate::cache::frames::Encoder;
use crate::cache::object::{CachedObject, Encoding};
use crate::cache::transcode::Transcoder;
use crate::wire::meta::{self, ListMeta};
use crate::wire::proto;
use crate::wire::resource::ResourceInfo;
use crate::wire::table::{self, IncludeObject, ListMetaOut};

const META_API_VERSION: &str = "meta.k8s.io/v1";

fn kinds() -> impl Iterator<Item = ResourceInfo> {
    CAPTURED.iter().map(|&(r, g, v, k, ns)| info(r, g, v, k, ns))
}

fn captured(info: &ResourceInfo, ext: &str) -> Option<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/realcluster");
    std::fs::read(format!("{dir}/{}.{ext}", info.resource)).ok()
}

/// `namespace/name@rv` of a cached object: an object at one version.
fn version(o: &CachedObject) -> String {
    format!("{}@{}", o.key, o.resource_version)
}

/// A captured JSON watch's ADDED events: each object (as a watch event carries it) and its
/// frame, by object version.
fn json_events(info: &ResourceInfo, body: &[u8]) -> BTreeMap<String, (CachedObject, Vec<u8>)> {
    let mut events = BTreeMap::new();
    for line in body.split_inclusive(|b| *b == b'\n') {
        let event: Value = serde_json::from_slice(line).expect("a JSON watch event");
        assert_eq!(event["type"], "ADDED", "{}: {event}", info.resource);
        // The object's own bytes, as the frame carries them: `{"type":"ADDED","object":{…}}\n`.
        let start = line.windows(10).position(|w| w == b"\"object\":{").expect("an object") + 9;
        let object = Bytes::copy_from_slice(&line[start..line.len() - 2]);
        let o = CachedObject::from_watch_object(info, Encoding::Json, object)
            .unwrap_or_else(|e| panic!("{}: {e}", info.resource));
        events.insert(version(&o), (o, line.to_vec()));
    }
    events
}

/// A captured protobuf watch's ADDED events (length-prefixed frames), by object version.
fn protobuf_events(
    info: &ResourceInfo,
    mut body: &[u8],
) -> BTreeMap<String, (CachedObject, Vec<u8>)> {
    let mut events = BTreeMap::new();
    while body.len() >= 4 {
        let len = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        let (frame, rest) = body.split_at(4 + len);
        body = rest;
        let event = proto::decode_watch_event(&frame[4..]).expect("a protobuf watch event");
        assert_eq!(event.event_type, "ADDED", "{}", info.resource);
        let envelope = proto::decode_unknown(event.object).expect("an envelope");
        assert_eq!(
            (envelope.api_version, envelope.kind),
            (info.api_version().as_str(), info.kind.as_str())
        );
        let raw = Bytes::copy_from_slice(envelope.raw);
        let o = CachedObject::from_watch_object(info, Encoding::Protobuf, raw)
            .unwrap_or_else(|e| panic!("{}: {e}", info.resource));
        events.insert(version(&o), (o, frame.to_vec()));
    }
    assert!(body.is_empty(), "{}: a frame cut short", info.resource);
    events
}

/// Each ADDED event the apiserver sent in one encoding, of an object it also sent in the other
/// at the same resourceVersion: the object as that other encoding's cache holds it, rendered,
/// framed as kubeplex frames a watch event (whole objects, and metadata-only ones), is the
/// apiserver's frame.
#[test]
fn watch_events_of_a_rendered_cache_are_the_apiservers() {
    let mut checked = 0;
    for info in kinds() {
        let (Some(json), Some(protobuf)) =
            (captured(&info, "watch.json"), captured(&info, "watch.pb"))
        else {
            panic!("{}: no watch captured (scripts/realcluster/codec-capture.py)", info.resource);
        };
        let json = json_events(&info, &json);
        let protobuf = protobuf_events(&info, &protobuf);
        let (api_version, kind) = (info.api_version(), info.kind.clone());
        let to_json = Transcoder::new(&info, Encoding::Json).expect("a built-in kind");
        let to_protobuf = Transcoder::new(&info, Encoding::Protobuf).expect("a built-in kind");
        let json_frames = Encoder::new(Encoding::Json, &api_version, &kind, true);
        let protobuf_frames = Encoder::new(Encoding::Protobuf, &api_version, &kind, true);
        for (at, (from_protobuf, protobuf_frame)) in &protobuf {
            let Some((from_json, json_frame)) = json.get(at) else { continue };
            let rendered = to_json.object(from_protobuf).unwrap_or_else(|e| panic!("{at}: {e}"));
            let frame = json_frames.event("ADDED", &rendered.body, false).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&frame),
                String::from_utf8_lossy(json_frame),
                "{} {at}: a JSON watch event rendered from protobuf",
                info.resource
            );
            let rendered = to_protobuf.object(from_json).unwrap_or_else(|e| panic!("{at}: {e}"));
            let frame = protobuf_frames.event("ADDED", &rendered.body, false).unwrap();
            assert!(
                frame.as_ref() == protobuf_frame.as_slice(),
                "{} {at}: a protobuf watch event rendered from JSON",
                info.resource
            );
            // Metadata-only events (`PartialObjectMetadata`), from the rendered objects: the
            // same as from the apiserver's own.
            for (encoder, own, rendered) in [
                (&json_frames, from_json, to_json.object(from_protobuf).unwrap()),
                (&protobuf_frames, from_protobuf, to_protobuf.object(from_json).unwrap()),
            ] {
                assert_eq!(
                    encoder.event("ADDED", &rendered.body, true).unwrap(),
                    encoder.event("ADDED", &own.body, true).unwrap(),
                    "{} {at}: a metadata watch event",
                    info.resource
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 100, "{checked} events in both encodings");
}

/// The captured list's metadata: its resourceVersion, continue token and remaining count.
fn list_meta(body: &[u8]) -> (String, String, Option<i64>) {
    let list: Value = serde_json::from_slice(body).expect("a JSON list");
    let m = &list["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&m["resourceVersion"]), s(&m["continue"]), m["remainingItemCount"].as_i64())
}

/// The captured list as the other encoding's cache holds it, rendered in `to`.
fn rendered(info: &ResourceInfo, to: Encoding) -> Vec<CachedObject> {
    let from = match to {
        Encoding::Json => Encoding::Protobuf,
        Encoding::Protobuf => Encoding::Json,
    };
    let transcoder = Transcoder::new(info, to).expect("a built-in kind");
    cached(info, from)
        .iter()
        .map(|o| transcoder.object(o).unwrap_or_else(|e| panic!("{}: {e}", o.key)))
        .collect()
}

/// A PartialObjectMetadataList of the rendered objects (kubeplex's metadata informers' list)
/// is the apiserver's, in JSON and in protobuf.
#[test]
fn metadata_lists_of_a_rendered_cache_are_the_apiservers() {
    for info in kinds() {
        let list = captured(&info, "json").expect("the JSON list");
        let (rv, continue_token, remaining_item_count) = list_meta(&list);
        let lm = ListMeta {
            resource_version: &rv,
            continue_token: &continue_token,
            remaining_item_count,
        };
        let bodies = |objects: &[CachedObject]| -> Vec<Bytes> {
            objects.iter().map(|o| o.body.clone()).collect()
        };
        let json = rendered(&info, Encoding::Json);
        let mut body =
            meta::partial_object_metadata_list_json(META_API_VERSION, &lm, &bodies(&json)).unwrap();
        if body.last() != Some(&b'\n') {
            body.push(b'\n'); // as `serve::cache_read::encode` finishes a JSON answer
        }
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&captured(&info, "meta.json").expect("meta.json")),
            "{}: a JSON PartialObjectMetadataList rendered from protobuf",
            info.resource
        );
        let protobuf = rendered(&info, Encoding::Protobuf);
        let body =
            proto::partial_object_metadata_list(META_API_VERSION, &lm, &bodies(&protobuf)).unwrap();
        assert!(
            body == captured(&info, "meta.pb").expect("meta.pb"),
            "{}: a protobuf PartialObjectMetadataList rendered from JSON",
            info.resource
        );
    }
}

/// A Table of the rendered objects (what `kubectl get` reads) is the apiserver's, for every
/// kind kubeplex prints, at some instant of the second the apiserver's `Date` names.
#[test]
fn tables_of_a_rendered_cache_are_the_apiservers() {
    let mut tables = 0;
    for info in kinds().filter(|i| table::supports(&i.resource, &i.group)) {
        let Some(expected) = captured(&info, "table.json") else {
            panic!("{}: no Table captured", info.resource)
        };
        let date = captured(&info, "table.date").expect("its Date");
        let date = String::from_utf8_lossy(&date);
        let date: DateTime<Utc> = DateTime::parse_from_rfc2822(date.trim()).expect("a Date").into();
        let (rv, continue_token, remaining_item_count) =
            list_meta(&captured(&info, "json").expect("the JSON list"));
        let objects: Vec<Value> = rendered(&info, Encoding::Json)
            .iter()
            .map(|o| {
                let object = meta::with_type_meta(&o.body, &info.api_version(), &info.kind);
                serde_json::from_slice(&object.unwrap()).unwrap()
            })
            .collect();
        let objects: Vec<&Value> = objects.iter().collect();
        let print = |now| {
            let meta_out = ListMetaOut {
                resource_version: rv.clone(),
                continue_token: Some(continue_token.clone()),
                remaining_item_count,
            };
            let body = table::table_for_list(
                &info.resource,
                &info.group,
                &objects,
                meta_out,
                IncludeObject::Metadata,
                now,
            );
            String::from_utf8(body).unwrap()
        };
        let expected = String::from_utf8_lossy(&expected);
        // The apiserver's clock was within the second its Date names (truncated): some instant
        // of it prints the same ages (an Event's times have microseconds).
        let instants = (0..20).map(|k| date + chrono::Duration::milliseconds(50 * k));
        if !instants.clone().any(|now| print(now) == expected) {
            panic!("{}: {}", info.resource, first_difference(&print(date), &expected));
        }
        tables += 1;
    }
    assert!(tables >= 10, "{tables} tables");
}

/// Where `a` and `b` first differ, with some context of each.
fn first_difference(a: &str, b: &str) -> String {
    let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let around = |s: &str| {
        let from = s.floor_char_boundary(at.saturating_sub(80));
        let to = s.ceil_char_boundary((at + 80).min(s.len()));
        s[from..to].to_string()
    };
    format!("at byte {at}:\n  printed  …{}…\n  expected …{}…", around(a), around(b))
}
