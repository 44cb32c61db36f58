//! `meta.k8s.io/v1` Table responses, byte for byte as kube-apiserver 1.36 sends them for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` asks for).
//!
//! The apiserver converts with the kind's TableConvertor (pkg/printers, always wide), then
//! `asTable` (apiserver endpoints/handlers/response.go) replaces each row's object according
//! to `includeObject`, and encoding/json writes the result. A watch converts every event's
//! object on its own; only the first event carries `columnDefinitions`
//! (`watchEmbeddedEncoder` sets `NoHeaders` after it), later ones send `null`.

mod age;
mod columns;
mod fields;
mod meta;
mod pod;
mod printers;
mod row;
mod workloads;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::gojson::{push_string, write_value};

pub use age::human_duration;

use columns::Column;
use printers::Printer;
use row::{Cell, Row};

/// The `includeObject` query parameter: what each row's `object` holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// `"object":null`.
    None,
    /// A PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object, as the client would get it from a plain get.
    Object,
}

/// Why a Table request is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    /// 400 BadRequest from `optionsForTransform` (ValidateTableOptions). `value` is the bad
    /// value JSON-quoted, as field.Invalid renders a named string type.
    #[error(
        "Unable to convert to Table as requested: includeObject: Invalid value: {value}: \
         must be 'Metadata', 'Object', 'None', or empty"
    )]
    InvalidIncludeObject { value: String },
}

impl IncludeObject {
    /// Parses the first `includeObject` query value (absent or empty means Metadata).
    pub fn from_query(value: Option<&str>) -> Result<Self, TableError> {
        match value.unwrap_or_default() {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => {
                let mut quoted = Vec::new();
                push_string(&mut quoted, other);
                let value = String::from_utf8_lossy(&quoted).into_owned();
                Err(TableError::InvalidIncludeObject { value })
            }
        }
    }
}

/// The list's metadata, copied into the Table's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListMetaOut {
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining_item_count: Option<i64>,
}

/// Whether this module reproduces the apiserver's table for a resource: the kinds with a
/// printer here, and custom resources (any non-built-in group), assumed to have no
/// additionalPrinterColumns. For other built-in resources the table functions fall back to
/// the custom-resource layout, which the real apiserver would not send.
pub fn supports(resource: &str, group: &str) -> bool {
    Printer::for_resource(resource, group).is_some()
}

/// The response body (with encoding/json's trailing newline) of a list as a Table.
/// `objects` are the stored objects in list order.
pub fn table_for_list(
    resource: &str,
    group: &str,
    objects: &[&Value],
    list_meta: ListMetaOut,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Vec<u8> {
    let mut table = ListTable::new(resource, group, &list_meta, include, now, objects.len());
    for obj in objects {
        table.push(obj);
    }
    table.finish()
}

/// A list's Table written row by row: a caller that holds objects as bytes (kubeplex's cache)
/// can parse one object, print its row and drop it, rather than hold the whole list parsed.
pub struct ListTable {
    out: Vec<u8>,
    printer: Printer,
    include: IncludeObject,
    now: DateTime<Utc>,
    rows: usize,
}

impl ListTable {
    /// The Table's head (metadata and column definitions); `capacity` is the expected row count.
    pub fn new(
        resource: &str,
        group: &str,
        list_meta: &ListMetaOut,
        include: IncludeObject,
        now: DateTime<Utc>,
        capacity: usize,
    ) -> Self {
        let printer = printer_for(resource, group);
        let mut out = Vec::with_capacity(1024 + 512 * capacity);
        write_head(&mut out, printer, list_meta, true);
        ListTable { out, printer, include, now, rows: 0 }
    }

    /// Appends the row of the next object in list order.
    pub fn push(&mut self, obj: &Value) {
        if self.rows > 0 {
            self.out.push(b',');
        }
        write_row(&mut self.out, &self.printer.row(obj, self.now), obj, self.include);
        self.rows += 1;
    }

    /// The response body, with encoding/json's trailing newline.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(b"]}\n");
        self.out
    }
}

/// The response body (with encoding/json's trailing newline) of a get as a Table: one row,
/// and the object's resourceVersion as the Table's.
pub fn table_for_object(
    resource: &str,
    group: &str,
    object: &Value,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Vec<u8> {
    let mut out = table_for_watch_event(resource, group, object, include, now, true);
    out.push(b'\n');
    out
}

/// The Table object of one watch event (what goes after `"object":`, no newline). `first`
/// is true for the stream's first event, the only one with column definitions.
pub fn table_for_watch_event(
    resource: &str,
    group: &str,
    object: &Value,
    include: IncludeObject,
    now: DateTime<Utc>,
    first: bool,
) -> Vec<u8> {
    // A single object's Table takes the object's resourceVersion (meta.CommonAccessor).
    let meta = ListMetaOut {
        resource_version: fields::str_at(object, &["metadata", "resourceVersion"]).to_string(),
        ..ListMetaOut::default()
    };
    write_table(resource, group, &[object], &meta, first, include, now)
}

fn printer_for(resource: &str, group: &str) -> Printer {
    Printer::for_resource(resource, group).unwrap_or(Printer::Custom)
}

fn write_table(
    resource: &str,
    group: &str,
    objects: &[&Value],
    meta: &ListMetaOut,
    headers: bool,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Vec<u8> {
    let printer = printer_for(resource, group);
    let mut out = Vec::with_capacity(1024 + 512 * objects.len());
    write_head(&mut out, printer, meta, headers);
    for (i, obj) in objects.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_row(&mut out, &printer.row(obj, now), obj, include);
    }
    out.extend_from_slice(b"]}");
    out
}

/// Everything up to the first row: `metadata`, `columnDefinitions` (`null` without
/// `headers`) and the opening of `rows`.
fn write_head(out: &mut Vec<u8>, printer: Printer, meta: &ListMetaOut, headers: bool) {
    out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"#);
    // ListMeta: every field is omitempty; remainingItemCount is a pointer.
    let mut sep = "";
    if !meta.resource_version.is_empty() {
        out.extend_from_slice(br#""resourceVersion":"#);
        push_string(out, &meta.resource_version);
        sep = ",";
    }
    if let Some(token) = meta.continue_token.as_deref().filter(|t| !t.is_empty()) {
        out.extend_from_slice(format!(r#"{sep}"continue":"#).as_bytes());
        push_string(out, token);
        sep = ",";
    }
    if let Some(n) = meta.remaining_item_count {
        out.extend_from_slice(format!(r#"{sep}"remainingItemCount":{n}"#).as_bytes());
    }
    out.extend_from_slice(br#"},"columnDefinitions":"#);
    if headers {
        write_columns(out, printer.columns());
    } else {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(br#","rows":["#);
}

fn write_columns(out: &mut Vec<u8>, columns: &[Column]) {
    out.push(b'[');
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"name":"#);
        push_string(out, c.name);
        out.extend_from_slice(br#","type":"#);
        push_string(out, c.kind);
        out.extend_from_slice(br#","format":"#);
        push_string(out, c.format);
        out.extend_from_slice(br#","description":"#);
        push_string(out, c.description);
        out.extend_from_slice(format!(r#","priority":{}}}"#, c.priority).as_bytes());
    }
    out.push(b']');
}

fn write_row(out: &mut Vec<u8>, row: &Row, obj: &Value, include: IncludeObject) {
    out.extend_from_slice(br#"{"cells":["#);
    for (i, cell) in row.cells.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match cell {
            Cell::Str(s) => push_string(out, s),
            Cell::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
            Cell::Null => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
    if !row.conditions.is_empty() {
        out.extend_from_slice(br#","conditions":["#);
        for (i, c) in row.conditions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"type":"#);
            push_string(out, c.kind);
            out.extend_from_slice(br#","status":"#);
            push_string(out, c.status);
            out.extend_from_slice(br#","reason":"#);
            push_string(out, c.reason);
            out.extend_from_slice(br#","message":"#);
            push_string(out, c.message);
            out.push(b'}');
        }
        out.push(b']');
    }
    out.extend_from_slice(br#","object":"#);
    match include {
        // RawExtension with neither Raw nor Object marshals as null; omitempty cannot drop
        // a struct.
        IncludeObject::None => out.extend_from_slice(b"null"),
        IncludeObject::Metadata => meta::write_partial_object_metadata(out, obj),
        IncludeObject::Object => write_value(obj, out),
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests;
