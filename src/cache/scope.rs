//! What part of a resource a cache holds: a namespace and label and field selectors, as the
//! upstream list and watch that fill it are scoped (`?labelSelector=…&fieldSelector=…` on one
//! namespace's collection or the cluster's). A read is answered from a cache only when the
//! cache's scope contains the read's: every object the read could return is then in the cache.
//!
//! Containment is decided on the selectors' terms, the way the apiserver normalizes them (terms
//! sorted, field names converted, `==` read as `=`): a cache scoped by `spec.nodeName=n1` holds
//! every pod a read with `spec.nodeName=n1,status.phase!=Succeeded` could see; one scoped by
//! `metadata.name=n1` holds the Node a `GET nodes/n1` reads. Anything subtler (a `notin` implied
//! by an `=`) is not proven and goes upstream: declining is always correct.

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::wire::selector::field::{FieldOperator, FieldRequirement};
use crate::wire::selector::fields_by_kind::FieldRules;
use crate::wire::selector::label::{Operator, Requirement};
use crate::wire::selector::{FieldSelector, LabelSelector};

/// A namespace (or all of them) and the label and field terms every object in scope satisfies.
/// Equal scopes compare and hash equal whatever order or spelling their selectors were written
/// in.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    namespace: Option<String>,
    /// Canonical label terms, sorted and deduplicated.
    label: Vec<String>,
    /// Canonical field terms (converted field names, values escaped), sorted and deduplicated.
    field: Vec<String>,
    /// The name a `metadata.name=` term pins, if any.
    name: Option<String>,
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        (&self.namespace, &self.label, &self.field)
            == (&other.namespace, &other.label, &other.field)
    }
}

impl Eq for Scope {}

impl Hash for Scope {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (&self.namespace, &self.label, &self.field).hash(state);
    }
}

impl Scope {
    /// The whole resource, cluster-wide.
    pub fn everything() -> Self {
        Scope::default()
    }

    /// A scope from its parts; `field` must already be converted to the resource's canonical
    /// field names (`FieldRules::convert`), as [`Scope::parse`] does.
    pub fn new(
        namespace: Option<&str>,
        label: Option<&LabelSelector>,
        field: Option<&FieldSelector>,
    ) -> Self {
        let mut label: Vec<String> =
            label.map(|l| l.requirements().iter().map(label_term).collect()).unwrap_or_default();
        label.sort();
        label.dedup();
        let reqs = field.map(|f| f.requirements()).unwrap_or_default();
        let mut terms: Vec<String> = reqs.iter().map(ToString::to_string).collect();
        terms.sort();
        terms.dedup();
        let name = reqs
            .iter()
            .find(|r| r.field == "metadata.name" && r.operator == FieldOperator::Equals)
            .map(|r| r.value.clone());
        Scope {
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_string),
            label,
            field: terms,
            name,
        }
    }

    /// A scope written as a list's query would carry it, for `group`/`resource`: the field
    /// selector's names converted as the apiserver converts them (pods' `spec.host`). The error
    /// is the apiserver's 400 message for a selector it would refuse.
    pub fn parse(
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, String> {
        let label = match label_selector.filter(|s| !s.is_empty()) {
            Some(s) => Some(LabelSelector::parse(s).map_err(|e| e.to_string())?),
            None => None,
        };
        let field = match field_selector.filter(|s| !s.is_empty()) {
            Some(s) => {
                let parsed = FieldSelector::parse(s).map_err(|e| e.to_string())?;
                Some(
                    FieldRules::for_resource(group, resource)
                        .convert(&parsed)
                        .map_err(|e| e.to_string())?,
                )
            }
            None => None,
        };
        Ok(Scope::new(namespace, label.as_ref(), field.as_ref()))
    }

    /// The same scope, limited to `namespace`.
    pub fn within(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string()).filter(|ns| !ns.is_empty());
        self
    }

    /// The same scope, narrowed to the one object `name` (a read of a named object).
    pub fn named(mut self, name: &str) -> Self {
        let term = FieldRequirement {
            field: "metadata.name".into(),
            operator: FieldOperator::Equals,
            value: name.to_string(),
        }
        .to_string();
        if !self.field.contains(&term) {
            self.field.push(term);
            self.field.sort();
        }
        self.name = Some(name.to_string());
        self
    }

    /// The namespace, if the scope is limited to one.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The one object the scope is limited to by name, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// How many terms narrow it (its namespace counts as one): more is narrower.
    pub fn terms(&self) -> usize {
        usize::from(self.namespace.is_some()) + self.label.len() + self.field.len()
    }

    /// Whether it selects by labels or fields (not only by namespace).
    pub fn has_selectors(&self) -> bool {
        !self.label.is_empty() || !self.field.is_empty()
    }

    /// Whether every object `read` could return lies within this scope.
    pub fn contains(&self, read: &Scope) -> bool {
        let namespace = match &self.namespace {
            None => true,
            Some(ns) => read.namespace.as_deref() == Some(ns),
        };
        namespace
            && self.label.iter().all(|t| read.label.contains(t))
            && self.field.iter().all(|t| read.field.contains(t))
    }

    /// The label selector a list or watch of this scope sends, if any.
    pub fn label_selector(&self) -> Option<String> {
        (!self.label.is_empty()).then(|| self.label.join(","))
    }

    /// The field selector a list or watch of this scope sends, if any.
    pub fn field_selector(&self) -> Option<String> {
        (!self.field.is_empty()).then(|| self.field.join(","))
    }

    /// The selectors as query parameters to append to a list's or watch's query (`&…`), empty
    /// for a scope without selectors.
    pub fn query(&self) -> String {
        let mut out = String::new();
        for (key, value) in
            [("labelSelector", self.label_selector()), ("fieldSelector", self.field_selector())]
        {
            if let Some(v) = value {
                out.push('&');
                out.push_str(key);
                out.push('=');
                out.extend(form_urlencoded::byte_serialize(v.as_bytes()));
            }
        }
        out
    }
}

/// `namespace=NS,labelSelector=…,fieldSelector=…`; `*` for everything. For logs, `/debug/caches`
/// and file names' hashes.
impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(ns) = &self.namespace {
            parts.push(format!("namespace={ns}"));
        }
        if let Some(l) = self.label_selector() {
            parts.push(format!("labelSelector={l}"));
        }
        if let Some(s) = self.field_selector() {
            parts.push(format!("fieldSelector={s}"));
        }
        if parts.is_empty() {
            f.write_str("*")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// A label term as `Requirement.String()` writes it, with `==` read as `=` (the same
/// requirement: `selection.DoubleEquals` and `selection.Equals` match alike).
fn label_term(r: &Requirement) -> String {
    match r.operator() {
        Operator::DoubleEquals => format!("{}={}", r.key(), r.values().join(",")),
        _ => r.to_string(),
    }
}

#[cfg(test)]
mod tests;
