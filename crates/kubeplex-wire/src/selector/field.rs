//! Field selectors, as `k8s.io/apimachinery/pkg/fields.ParseSelector` reads them.
//!
//! Terms are `field=value`, `field==value` or `field!=value`, separated by `,`; in a value, `\`
//! escapes `\`, `,` and `=`. Which fields a resource accepts is [`super::fields_by_kind`]'s job.

use std::fmt;

use super::error::SelectorError;

/// `=`/`==` (`selection.Equals`) or `!=` (`selection.NotEquals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOperator {
    Equals,
    NotEquals,
}

/// One term of a field selector, with its value unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub operator: FieldOperator,
    pub value: String,
}

impl FieldRequirement {
    /// A field the object's field set lacks reads as "" (Go's `fields.Set.Get`), so
    /// `status.podIPs=` matches every pod and `x!=v` matches objects without `x`.
    pub fn matches(&self, have: Option<&str>) -> bool {
        let have = have.unwrap_or("");
        match self.operator {
            FieldOperator::Equals => have == self.value,
            FieldOperator::NotEquals => have != self.value,
        }
    }
}

/// `hasTerm.String()` / `notHasTerm.String()`: the value escaped again.
impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{}{}", self.field, op, escape_value(&self.value))
    }
}

/// A parsed `fieldSelector`: the AND of its terms, in the order of their sorted source text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// `fields.ParseSelector`; the error's `Display` is the apiserver's 400 message.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(selector);
        // apimachinery sorts the raw terms before parsing, so with several bad terms the error
        // names the first in byte order, and requirements come out in that order.
        parts.sort_unstable();
        let mut requirements = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, operator, raw)) = split_term(part) else {
                return Err(SelectorError::FieldTerm {
                    selector: selector.to_owned(),
                    term: part.to_owned(),
                });
            };
            let value = unescape_value(raw)?;
            // ParseSelector runs an identity Transform, which turns a term with an empty field
            // and an empty value (`=`, `!=`) into "everything" and drops it.
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(FieldRequirement { field: field.to_owned(), operator, value });
        }
        Ok(Self { requirements })
    }

    /// Builds a selector from terms already converted (see `FieldRules::convert`).
    pub fn from_requirements(requirements: Vec<FieldRequirement>) -> Self {
        Self { requirements }
    }

    /// True when the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// `Selector.Matches` over the object's field set: `get` returns a field's value, or `None`
    /// when the kind's field set has no such field.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| r.matches(get(&r.field).as_deref()))
    }

    /// `RequiresExactMatch`: the value of the first `field=value` term on `field`, for
    /// dispatching through a field index (e.g. pods by `spec.nodeName`).
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.operator == FieldOperator::Equals)
            .map(|r| r.value.as_str())
    }
}

/// `Selector.String()`: terms joined with `,`.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// `fields.EscapeValue`.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `splitTerms`: split on commas not preceded by an escaping backslash; escapes stay in place.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(selector.get(start..i).unwrap_or_default());
            start = i + 1;
        }
    }
    terms.push(selector.get(start..).unwrap_or_default());
    terms
}

/// `splitTerm`: the field is unescaped, so the first operator anywhere in the term splits it;
/// at each position `!=` is tried first, then `==`, then `=`.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..).unwrap_or_default();
        let lhs = term.get(..i).unwrap_or_default();
        for (op, operator) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((lhs, operator, rhs));
            }
        }
    }
    None
}

/// `fields.UnescapeValue`.
fn unescape_value(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut in_slash = false;
    for c in raw.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::FieldEscape(format!("\\{c}")));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::FieldUnescaped(c)),
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::FieldEscape("\\".to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
