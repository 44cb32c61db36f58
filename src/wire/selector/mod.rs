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
        go_quote(.0)
    )]
    FieldNotKnown(String),
}

/// Go's `strconv.Quote` (what `%q` prints), used where the apiserver's messages quote input.
///
/// Go decides what to escape with `unicode.IsPrint`; this follows it for ASCII, Latin-1,
/// control, separator, format and private-use characters. Unassigned code points (which Go
/// escapes as `\uXXXX`) are printed as they are, since Rust has no table of them.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if go_is_print(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
fn go_is_print(c: char) -> bool {
    let u = u32::from(c);
    if u < 0x80 {
        return (0x20..0x7f).contains(&u);
    }
    if u <= 0xff {
        return u >= 0xa1 && u != 0xad;
    }
    if c.is_whitespace() || c.is_control() {
        return false;
    }
    let format = matches!(
        u,
        0x0600..=0x0605
            | 0x061c
            | 0x06dd
            | 0x070f
            | 0x0890..=0x0891
            | 0x08e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    );
    let private_or_nonchar =
        matches!(u, 0xe000..=0xf8ff | 0xf0000.. | 0xfdd0..=0xfdef) || (u & 0xfffe) == 0xfffe;
    !format && !private_or_nonchar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote("a-b"), r#""a-b""#);
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{0}\u{7}\t\u{7f}"), r#""\x00\a\t\x7f""#);
        assert_eq!(go_quote("é\u{81}\u{a0}\u{ad}"), r#""é\u0081\u00a0\u00ad""#);
        assert_eq!(go_quote("日本\u{200b}\u{e000}"), r#""日本\u200b\ue000""#);
        assert_eq!(go_quote("\u{f0000}😀"), r#""\U000f0000😀""#);
    }

    #[test]
    fn field_not_known_message_is_the_apiservers() {
        // Fixture err-bad-fieldselector (configmaps, fieldSelector=data.key=x).
        let err = SelectorError::FieldNotKnown("data.key".into());
        assert_eq!(
            err.to_string(),
            r#""data.key" is not a known field selector: only "metadata.name", "metadata.namespace""#
        );
        assert_eq!(
            SelectorError::FieldUnescaped(',').to_string(),
            "invalid field selector: unescaped character in value: 44"
        );
    }
}
