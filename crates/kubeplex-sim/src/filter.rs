//! Label and field selection of objects for lists and watches.

use super::kinds::Kind;
use super::store::Obj;
use crate::wire::request::ListOptions;
use crate::wire::selector::fields_by_kind::{self, FieldRules};
use crate::wire::selector::{FieldSelector, LabelSelector};
use crate::wire::status::Status;

/// The selectors of one request, parsed and validated for its kind.
#[derive(Debug, Default)]
pub struct Filter {
    label: Option<LabelSelector>,
    /// With field names converted (pods' `spec.host` is `spec.nodeName`), as the list handler's
    /// `Transform(ConvertFieldLabel)` leaves it.
    field: Option<FieldSelector>,
    /// A request path's namespace restricts every match.
    namespace: Option<String>,
    /// A watch on a named object (`.../configmaps/NAME?watch=1`).
    name: Option<String>,
}

impl Filter {
    pub fn new(kind: &Kind, opts: &ListOptions, namespace: Option<&str>) -> Result<Self, Status> {
        let label = match &opts.label_selector {
            Some(s) => {
                let sel =
                    LabelSelector::parse(s).map_err(|e| Status::bad_request(e.to_string()))?;
                (!sel.is_empty()).then_some(sel)
            }
            None => None,
        };
        let field = match &opts.field_selector {
            Some(s) => {
                let sel =
                    FieldSelector::parse(s).map_err(|e| Status::bad_request(e.to_string()))?;
                let sel = FieldRules::for_resource(&kind.group, &kind.resource)
                    .convert(&sel)
                    .map_err(|e| Status::bad_request(e.to_string()))?;
                (!sel.is_empty()).then_some(sel)
            }
            None => None,
        };
        Ok(Filter { label, field, namespace: namespace.map(str::to_string), name: None })
    }

    /// The name a `metadata.name=X` field selector pins, if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.field.as_ref()?.exact_value("metadata.name")
    }

    /// The index entry the watch cache reads a list at the latest state from: the first of the
    /// kind's indexed fields the field selector pins with `=`, and its value
    /// (`SelectionPredicate.MatcherIndex`).
    pub fn index_entry(&self, kind: &Kind) -> Option<(&'static str, &str)> {
        let field = self.field.as_ref()?;
        let indexed = FieldRules::for_resource(&kind.group, &kind.resource).index_fields();
        indexed.iter().find_map(|&f| Some((f, field.exact_value(f)?)))
    }

    /// Whether the object is in an index entry (see [`Filter::index_entry`]).
    pub fn in_index_entry(kind: &Kind, obj: &Obj, (field, value): (&str, &str)) -> bool {
        fields_by_kind::field_value(&kind.group, &kind.resource, &obj.value, field)
            .unwrap_or_default()
            == value
    }

    pub fn with_name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Whether the request had a label or field selector (the apiserver then omits
    /// `remainingItemCount`).
    pub fn has_selector(&self) -> bool {
        self.label.is_some() || self.field.is_some()
    }

    pub fn matches(&self, kind: &Kind, obj: &Obj) -> bool {
        if let Some(ns) = &self.namespace {
            if &obj.namespace != ns {
                return false;
            }
        }
        if self.name.as_ref().is_some_and(|n| n != &obj.name) {
            return false;
        }
        if let Some(l) = &self.label {
            let empty = serde_json::Map::new();
            if !l.matches(obj.labels().unwrap_or(&empty)) {
                return false;
            }
        }
        if let Some(f) = &self.field {
            let get = |field: &str| {
                fields_by_kind::field_value(&kind.group, &kind.resource, &obj.value, field)
            };
            if !f.matches(get) {
                return false;
            }
        }
        true
    }
}
