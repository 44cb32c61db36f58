//! Table output (`kubectl get`) for the sim's objects, through the printers in `wire::table`.
//!
//! Simplification: leases, runtimeclasses, csidrivers and servicecidrs have printers in the
//! apiserver (Holder; Handler; AttachRequired, PodInfoOnMount, ...; CIDRs) that `wire::table`
//! lacks, so their Tables get the printer-less layout (Name, Age). No node agent asks for them,
//! and kubeplex passes Tables without a printer through (`wire::table::supports`).

use std::sync::Arc;

use super::ListMeta;
use crate::kinds::Kind;
use crate::store::Obj;
use crate::wire::request::ListOptions;
use crate::wire::status::Status;
use crate::wire::table::{self, IncludeObject, ListMetaOut};

fn include(opts: &ListOptions) -> Result<IncludeObject, Status> {
    IncludeObject::from_query(opts.include_object.as_deref())
        .map_err(|e| Status::bad_request(e.to_string()))
}

pub fn object(k: &Kind, o: &Obj, opts: &ListOptions) -> Result<Vec<u8>, Status> {
    let now = chrono::Utc::now();
    Ok(table::table_for_object(&k.resource, &k.group, &o.value, include(opts)?, now))
}

pub fn list(
    k: &Kind,
    items: &[Arc<Obj>],
    m: &ListMeta,
    opts: &ListOptions,
) -> Result<Vec<u8>, Status> {
    let values: Vec<&serde_json::Value> = items.iter().map(|o| &o.value).collect();
    let meta = ListMetaOut {
        resource_version: m.resource_version.clone(),
        continue_token: m.continue_token.clone(),
        remaining_item_count: m.remaining,
    };
    Ok(table::table_for_list(
        &k.resource,
        &k.group,
        &values,
        meta,
        include(opts)?,
        chrono::Utc::now(),
    ))
}

pub fn watch_event(k: &Kind, o: &Obj, opts: &ListOptions, first: bool) -> Result<Vec<u8>, Status> {
    let now = chrono::Utc::now();
    Ok(table::table_for_watch_event(&k.resource, &k.group, &o.value, include(opts)?, now, first))
}
