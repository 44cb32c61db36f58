//! Tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl get` asks
//! for) printed from the JSON cache with the apiserver's per-kind printers (`wire::table`).
//!
//! Which reads qualify, and at which state, is decided exactly as for a JSON list or get
//! (`cached.rs`): a Table is only another way of writing the same snapshot. What a Table adds:
//! - only built-in kinds with a printer: other built-ins would need printers kubeplex lacks,
//!   and a custom resource's columns come from its CRD's `additionalPrinterColumns`, which
//!   kubeplex does not know — both pass through;
//! - `includeObject` must be `None`, `Metadata` (the default) or `Object`; any other value is
//!   the apiserver's 400 to word, so the request passes through;
//! - ages (AGE, LAST SEEN, restarts' "ago") are computed at the time of the request, as the
//!   apiserver does, so a Table is never kept in the page cache.
//!
//! Watches (`kubectl get -w`) follow the JSON watch's rules too; see [`TableWatch`].

use std::sync::Arc;

use bytes::Bytes;
use chrono::Utc;
use serde_json::Value;

use crate::cache::CachedObject;
use crate::live::discovery::ResourceInfo;
use crate::wire::meta::{self, ListMeta};
use crate::wire::negotiate::{MediaType, MetaVersion, Negotiated, Representation};
use crate::wire::request::ListOptions;
use crate::wire::table::{self, IncludeObject, ListMetaOut, ListTable};

/// The `includeObject` of a Table request the cache can print, or `None` to pass it through.
pub(super) fn requested(
    info: &ResourceInfo,
    neg: &Negotiated,
    opts: &ListOptions,
) -> Option<IncludeObject> {
    // meta.k8s.io/v1 Tables in JSON only: v1beta1 and protobuf Tables are left upstream.
    if neg.media_type != MediaType::Json
        || neg.representation != Representation::Table(MetaVersion::V1)
    {
        return None;
    }
    if !info.is_builtin() || !table::supports(&info.resource, &info.group) {
        return None;
    }
    IncludeObject::from_query(opts.include_object.as_deref()).ok()
}

/// A get as a Table: one row, the object's resourceVersion as the Table's.
pub(super) fn object(
    info: &ResourceInfo,
    obj: &CachedObject,
    include: IncludeObject,
) -> Result<Vec<u8>, String> {
    let value = parse(info, obj)?;
    Ok(table::table_for_object(&info.resource, &info.group, &value, include, Utc::now()))
}

/// A list (or page) as a Table, with the list's metadata.
pub(super) fn list(
    info: &ResourceInfo,
    items: &[Arc<CachedObject>],
    list_meta: &ListMeta<'_>,
    include: IncludeObject,
) -> Result<Vec<u8>, String> {
    let meta_out = ListMetaOut {
        resource_version: list_meta.resource_version.to_string(),
        continue_token: Some(list_meta.continue_token.to_string()),
        remaining_item_count: list_meta.remaining_item_count,
    };
    let now = Utc::now();
    let mut table =
        ListTable::new(&info.resource, &info.group, &meta_out, include, now, items.len());
    for obj in items {
        // One object parsed at a time and dropped after its row: the printers read arbitrary
        // fields of the object (and `includeObject=Object` writes all of it), so it is parsed
        // once per request; keeping parsed copies in the cache would multiply its memory for
        // a read that only kubectl makes.
        table.push(&parse(info, obj)?);
    }
    Ok(table.finish())
}

/// The cached item as its GET object (kind and apiVersion first, as the apiserver prints it
/// into a row with `includeObject=Object`), parsed.
fn parse(info: &ResourceInfo, obj: &CachedObject) -> Result<Value, String> {
    parse_bytes(info, &obj.body)
}

fn parse_bytes(info: &ResourceInfo, body: &[u8]) -> Result<Value, String> {
    let bytes =
        meta::with_type_meta(body, &info.api_version(), &info.kind).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("cached {} object: {e}", info.kind))
}

/// A Table watch (`kubectl get -w`): the cache's JSON event frames, each object printed on its
/// own for this watcher, as the apiserver's `watchEmbeddedEncoder` converts every event; only
/// the first event carries `columnDefinitions` (it sets `NoHeaders` after it), later ones
/// `null`. The watcher is fed the whole-object JSON frames the fan-out already encodes for
/// JSON watchers, so other watchers pay nothing for it; each Table watcher prints its own
/// events.
pub struct TableWatch {
    info: Arc<ResourceInfo>,
    include: IncludeObject,
    /// No event has been sent yet: the next one carries the column definitions.
    first: bool,
}

/// A Table watch the cache can print, or `None` to pass it through.
pub(super) fn watch(
    info: &Arc<ResourceInfo>,
    neg: &Negotiated,
    opts: &ListOptions,
) -> Option<TableWatch> {
    let include = requested(info, neg, opts)?;
    // A BOOKMARK goes through the same Table conversion as any object in the apiserver
    // (`watchEncoder.doEncode`), a rendering no capture shows: such watches pass through.
    // `kubectl get -w` does not ask for bookmarks.
    if opts.allow_watch_bookmarks {
        return None;
    }
    Some(TableWatch { info: info.clone(), include, first: true })
}

impl TableWatch {
    /// The ADDED event of an object of the initial state (a cached item's bytes).
    pub(super) fn initial(&mut self, body: &[u8]) -> Result<Bytes, String> {
        let object = parse_bytes(&self.info, body)?;
        Ok(Bytes::from(self.event("ADDED", &object)))
    }

    /// Queued frames (whole-object JSON events, one line each) as Table events. A frame that
    /// cannot be read is left out and logged, as the fan-out does with an object it cannot
    /// encode.
    pub(super) fn frames<'a>(&mut self, frames: impl Iterator<Item = &'a [u8]>) -> Bytes {
        let mut out = Vec::new();
        for frame in frames {
            match self.frame(frame) {
                Ok(printed) => out.extend_from_slice(&printed),
                Err(error) => {
                    tracing::error!(%error, "cannot print a watch event as a Table; not sent")
                }
            }
        }
        Bytes::from(out)
    }

    fn frame(&mut self, frame: &[u8]) -> Result<Vec<u8>, String> {
        let event = meta::parse_watch_event_json(frame).map_err(|e| e.to_string())?;
        // A Status (the ERROR of an ended watch) is not converted (`doTransformObject`).
        if event.event_type == "ERROR" {
            return Ok(frame.to_vec());
        }
        let object: Value =
            serde_json::from_slice(event.object).map_err(|e| format!("watch event object: {e}"))?;
        Ok(self.event(&event.event_type, &object))
    }

    fn event(&mut self, event_type: &str, object: &Value) -> Vec<u8> {
        let first = std::mem::replace(&mut self.first, false);
        let (resource, group) = (&self.info.resource, &self.info.group);
        let table =
            table::table_for_watch_event(resource, group, object, self.include, Utc::now(), first);
        meta::watch_event_json(event_type, &table)
    }
}
