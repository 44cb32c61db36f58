//! `metav1.LabelSelectorAsSelector`: the structured `spec.selector` of a workload (matchLabels,
//! matchExpressions) as a selector, for printing it the way the apiserver's Table printers do.

use serde_json::Value;

use super::validation::{label_key_errors, label_value_errors};
use super::{LabelSelector, Operator, Requirement};

impl LabelSelector {
    /// The selector of a stored `metav1.LabelSelector`, or `None` where Go returns an error (an
    /// invalid key or value, an unknown operator, a value count the operator does not take).
    /// A null or empty selector is the empty selector: `labels.Nothing()` and
    /// `labels.Everything()` both print as "".
    pub fn from_metav1(selector: Option<&Value>) -> Option<LabelSelector> {
        let Some(selector) = selector.filter(|s| !s.is_null()) else {
            return Some(LabelSelector::default());
        };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut requirements = Vec::new();
        // Go walks matchLabels in (random) map order; the sort below makes that moot, as every
        // key occurs once there.
        let match_labels = selector.get("matchLabels").and_then(Value::as_object);
        for (key, value) in match_labels.into_iter().flatten() {
            requirements.push(new_requirement(key.clone(), Operator::Equals, vec![text(value)])?);
        }
        let expressions = selector.get("matchExpressions").and_then(Value::as_array);
        for expr in expressions.into_iter().flatten() {
            let operator = match expr.get("operator").and_then(Value::as_str) {
                Some("In") => Operator::In,
                Some("NotIn") => Operator::NotIn,
                Some("Exists") => Operator::Exists,
                Some("DoesNotExist") => Operator::DoesNotExist,
                _ => return None,
            };
            let values = expr.get("values").and_then(Value::as_array);
            let mut values: Vec<String> = values.into_iter().flatten().map(text).collect();
            // `Requirement.String()` prints the values sorted (duplicates kept); the stored
            // order is otherwise unused here.
            values.sort();
            let key = expr.get("key").map(text).unwrap_or_default();
            requirements.push(new_requirement(key, operator, values)?);
        }
        // `Selector.Add` sorts by key with sort.Sort: stable for slices this short.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Some(LabelSelector { requirements })
    }
}

/// `labels.NewRequirement`'s checks.
fn new_requirement(key: String, operator: Operator, values: Vec<String>) -> Option<Requirement> {
    let count_ok = match operator {
        Operator::In | Operator::NotIn => !values.is_empty(),
        Operator::Equals => values.len() == 1,
        _ => values.is_empty(),
    };
    let valid = count_ok
        && label_key_errors(&key).is_empty()
        && values.iter().all(|v| label_value_errors(v).is_empty());
    valid.then_some(Requirement { key, operator, values })
}
