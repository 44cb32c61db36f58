//! Label and field selectors, parsed and matched exactly as kube-apiserver does.
//!
//! - [`label`]: `k8s.io/apimachinery/pkg/labels.Parse` (`labelSelector=`).
//! - [`field`]: `k8s.io/apimachinery/pkg/fields.ParseSelector` (`fieldSelector=`).
//! - [`fields_by_kind`]: which fields each resource lets a client select on, the apiserver's
//!   message for any other field, and the value each selectable field holds for an object.
//!
//! Every error's `Display` is the `message` of the apiserver's 400 `BadRequest` Status, byte for
//! byte, so the proxy and the fake apiserver answer a malformed selector exactly as it would.

pub mod field;
pub mod fields_by_kind;
pub mod label;

pub use field::{FieldOperator, FieldRequirement, FieldSelector};
pub use fields_by_kind::FieldRules;
pub use label::{LabelSelector, LabelSource, Operator, Requirement};

use super::gojson;

/// A selector the apiserver would refuse with 400 `BadRequest`; `Display` is its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector's token stream is malformed (`found 'x', expected: ...`).
    #[error("{0}")]
    LabelSyntax(String),
    /// One label requirement is malformed or has an invalid key or value.
    #[error("unable to parse requirement: {0}")]
    LabelRequirement(String),
    /// A field selector term has no `=`, `==` or `!=`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm { selector: String, term: String },
    /// A field selector value has a `\` not followed by `\`, `,` or `=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    FieldEscape(String),
    /// A field selector value has a bare `,` or `=`; Go prints the rune as its number.
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    FieldUnescaped(char),
    /// The kind's own field label conversion refused the field.
    #[error("field label not supported: {0}")]
    FieldNotSupported(String),
    /// `runtime.DefaultMetaV1FieldSelectorConversion` refused the field (kinds without their own
    /// conversion function, e.g. configmaps).
    #[error(
        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        gojson::quote(.0)
    )]
    FieldNotKnown(String),
}

#[cfg(test)]
mod tests;
