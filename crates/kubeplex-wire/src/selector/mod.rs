//! Label and field selectors, parsed and matched exactly as kube-apiserver does.
//!
//! - [`label`]: `k8s.io/apimachinery/pkg/labels.Parse` (`labelSelector=`).
//! - [`field`]: `k8s.io/apimachinery/pkg/fields.ParseSelector` (`fieldSelector=`).
//! - [`fields_by_kind`]: which fields each resource lets a client select on, the apiserver's
//!   message for any other field, and the value each selectable field holds for an object.
//!
//! Every error's `Display` is the `message` of the apiserver's 400 `BadRequest` Status, byte for
//! byte, so the proxy and the fake apiserver answer a malformed selector exactly as it would.

mod error;
pub mod field;
pub mod fields_by_kind;
pub mod label;

pub use error::SelectorError;
pub use field::{FieldOperator, FieldRequirement, FieldSelector};
pub use fields_by_kind::FieldRules;
pub use label::{LabelSelector, LabelSource, Operator, Requirement};

#[cfg(test)]
mod tests;
