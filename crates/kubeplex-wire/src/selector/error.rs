//! Why a selector is refused.

use crate::gojson;

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
