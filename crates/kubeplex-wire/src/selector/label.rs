//! Label selectors, as `k8s.io/apimachinery/pkg/labels.Parse` reads them.
//!
//! The lexer and parser follow apimachinery's token by token, because the apiserver's error
//! message names the exact token it stopped at (`found '', expected: ',', ')' or identifier`).

use std::collections::BTreeMap;
use std::fmt;

use super::error::SelectorError;
use crate::gojson;

mod lexer;
mod metav1;
mod validation;

use lexer::{Lexer, Token};
use validation::{label_key_errors, label_value_errors};

/// How a requirement relates its key to its values (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and deduplicated, as apimachinery's `sets.String.List()` leaves them.
    values: Vec<String>,
}

impl Requirement {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `Requirement.Matches`: a missing key satisfies only `notin`, `!=` and `!key`.
    pub fn matches(&self, labels: &(impl LabelSource + ?Sized)) -> bool {
        let value = labels.label(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => {
                value.is_none_or(|v| !self.values.iter().any(|x| x == v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                // Both sides must parse as int64; anything else simply does not match.
                let (Some(have), [want]) = (value, self.values.as_slice()) else { return false };
                let (Ok(have), Ok(want)) = (have.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// `Requirement.String()`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Exists => return f.write_str(&self.key),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In => return write!(f, "{} in ({})", self.key, self.values.join(",")),
            Operator::NotIn => return write!(f, "{} notin ({})", self.key, self.values.join(",")),
        };
        write!(f, "{}{}{}", self.key, op, self.values.join(","))
    }
}

/// Where a selector reads an object's labels from.
pub trait LabelSource {
    fn label(&self, key: &str) -> Option<&str>;
}

/// An object's `metadata.labels`; a non-string value counts as absent.
impl LabelSource for serde_json::Map<String, serde_json::Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(serde_json::Value::as_str)
    }
}

impl LabelSource for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A parsed `labelSelector`: the AND of its requirements, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// `labels.Parse`; the error's `Display` is the apiserver's 400 message.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(selector).parse()?;
        // apimachinery sorts by key with sort.Sort, which is stable for the short slices real
        // selectors have; a stable sort keeps same-key requirements in the order written.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// True when the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn matches(&self, labels: &(impl LabelSource + ?Sized)) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// `RequiresExactMatch`: the one value `key` must have, from the first requirement on `key`
    /// (`=`, `==`, or `in` with a single value), for dispatching through a label index.
    pub fn exact_value(&self, key: &str) -> Option<&str> {
        let first = self.requirements.iter().find(|r| r.key == key)?;
        match (first.operator, first.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [only]) => Some(only),
            _ => None,
        }
    }
}

/// `Selector.String()`: requirements joined with `,`.
impl fmt::Display for LabelSelector {
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

/// Whether the parser expects a key and operator, or values (where `in`/`notin` are words).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn new(selector: &str) -> Self {
        let mut lexer = Lexer::new(selector);
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Self { items, position: 0 }
    }

    fn lookahead(&self, ctx: Context) -> (Token, &str) {
        let (tok, lit) =
            self.items.get(self.position).map_or((Token::EndOfString, ""), |(t, l)| (*t, l));
        // In a values context `in` and `notin` are plain words ("x in (in)").
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let (tok, lit) = self.lookahead(ctx);
        let lit = lit.to_owned();
        self.position += 1;
        (tok, lit)
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    requirements.push(self.parse_requirement()?);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(syntax(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(syntax(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )))
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(syntax(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = inferred {
            return Ok(Requirement { key, operator, values: Vec::new() });
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, operator, values)
    }

    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(String, Option<Operator>), SelectorError> {
        let mut operator = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(requirement(format!("found '{lit}', expected: identifier")));
        }
        let errs = label_key_errors(&lit);
        if !errs.is_empty() {
            // The parser validates the key with a nil field path, which Go prints as "<nil>".
            return Err(requirement(invalid("<nil>", &lit, &errs)));
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((lit, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(requirement(format!("found '{lit}', expected: {BINARY_OPERATORS}"))),
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(requirement(format!("found '{lit}' expected: '('")));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let lit = lit.to_owned();
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(requirement(format!("found '{lit}', expected: ')'")));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(requirement(format!("found '{lit}', expected: ',', ')' or identifier"))),
        }
    }

    /// A comma-separated list in which empty entries are the empty value: `(a,,b)`, `(,)`.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => {
                            return Err(requirement(format!(
                                "found '{lit2}', expected: ',' or ')'"
                            )))
                        }
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            set.insert(String::new());
                            return Ok(set.into_iter().collect());
                        }
                        Token::Comma => {
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => {
                    return Err(requirement(format!("found '{lit}', expected: ',', or identifier")))
                }
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        if matches!(self.lookahead(Context::Values).0, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, lit) => Ok(vec![lit]),
            (_, lit) => Err(requirement(format!("found '{lit}', expected: identifier"))),
        }
    }
}

/// `NewRequirement`'s checks on the values (the key was checked while parsing). Its field path
/// starts from nil, so value errors read `values[0]` / `values[0][key]`.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, SelectorError> {
    let mut errs: Vec<String> = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                let detail = ["for 'Gt', 'Lt' operators, the value must be an integer".to_owned()];
                errs.push(invalid(&format!("values[{i}]"), v, &detail));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let detail = label_value_errors(v);
        if !detail.is_empty() {
            errs.push(invalid(&format!("values[{i}][{key}]"), v, &detail));
        }
    }
    // field.ErrorList.ToAggregate drops repeated messages; an aggregate of several prints
    // them as "[a, b]".
    let mut unique: Vec<String> = Vec::new();
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.as_slice() {
        [] => Ok(Requirement { key, operator, values }),
        [one] => Err(requirement(one.clone())),
        many => Err(requirement(format!("[{}]", many.join(", ")))),
    }
}

fn syntax(message: String) -> SelectorError {
    SelectorError::LabelSyntax(message)
}

fn requirement(message: String) -> SelectorError {
    SelectorError::LabelRequirement(message)
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid(path: &str, value: &str, details: &[String]) -> String {
    format!("{path}: Invalid value: {}: {}", gojson::quote(value), details.join("; "))
}

#[cfg(test)]
mod tests;
