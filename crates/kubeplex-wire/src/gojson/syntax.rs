//! Go's `encoding/json` v1 syntax check (`checkValid` and its scanner), state for state, so the
//! first error of a body is reported with the same words at the same byte:
//! `invalid character 'x' <context>` or `unexpected end of JSON input`. The apiserver returns
//! these as 400 messages (bad continue tokens, bad patch bodies). It is built with encoding/json
//! v1: fixture err-bad-continue shows v1's `'\u0081'` where v2 would print `'\x81'`.

use super::quote::quote_char;

/// encoding/json's `maxNestingDepth`.
pub const MAX_NESTING_DEPTH: usize = 10_000;

/// The scanner's first error; `Display` is Go's `SyntaxError.Error()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// A byte that cannot come next, with the scanner's words for where it was.
    #[error("invalid character {} {context}", quote_char(*.byte))]
    InvalidCharacter { byte: u8, context: &'static str },
    /// A byte inside `true`, `false` or `null` other than the one the word needs.
    #[error(
        "invalid character {} in literal {word} (expecting {})",
        quote_char(*.byte),
        quote_char(*.expected)
    )]
    InLiteral { byte: u8, word: &'static str, expected: u8 },
    /// The input ended inside a value (or held none).
    #[error("unexpected end of JSON input")]
    UnexpectedEnd,
}

/// JSON whitespace, as the scanner skips it.
pub fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// `checkValid`: every byte, then the end of input, which Go probes by stepping a space (that
/// finishes a trailing number or literal). Nesting deeper than `max_depth` is refused with Go's
/// "exceeded max depth" ([`MAX_NESTING_DEPTH`] is Go's own limit; callers may set a lower one
/// to keep their later recursion shallow).
pub fn check_valid(data: &[u8], max_depth: usize) -> Result<(), SyntaxError> {
    let mut scanner =
        Scanner { state: State::BeginValue, scopes: Vec::new(), end_top: false, max_depth };
    for &c in data {
        scanner.step(c)?;
    }
    if scanner.end_top {
        return Ok(());
    }
    scanner.step(b' ')?;
    if scanner.end_top {
        Ok(())
    } else {
        Err(SyntaxError::UnexpectedEnd)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The v1 scanner's step functions, one variant each.
#[derive(Clone, Copy)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits seen.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`/`false`/`null`, expecting `word[next]`.
    Literal(&'static str, usize),
}

struct Scanner {
    state: State,
    scopes: Vec<Scope>,
    end_top: bool,
    max_depth: usize,
}

fn invalid(byte: u8, context: &'static str) -> Result<(), SyntaxError> {
    Err(SyntaxError::InvalidCharacter { byte, context })
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), SyntaxError> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b']' {
                    self.end_value(c)
                } else {
                    self.begin_value(c)
                }
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b'}' {
                    if let Some(top) = self.scopes.last_mut() {
                        *top = Scope::ObjectValue;
                    }
                    self.end_value(c)
                } else {
                    self.begin_string(c)
                }
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString => match c {
                b'"' => self.go(State::EndValue),
                b'\\' => self.go(State::InStringEsc),
                c if c < 0x20 => invalid(c, "in string literal"),
                _ => Ok(()),
            },
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.go(State::InString),
                b'u' => self.go(State::InStringEscU(0)),
                _ => invalid(c, "in string escape code"),
            },
            State::InStringEscU(seen) => {
                if !c.is_ascii_hexdigit() {
                    return invalid(c, "in \\u hexadecimal character escape");
                }
                self.go(if seen == 3 { State::InString } else { State::InStringEscU(seen + 1) })
            }
            State::Neg => match c {
                b'0' => self.go(State::Zero),
                b'1'..=b'9' => self.go(State::One),
                _ => invalid(c, "in numeric literal"),
            },
            State::One if c.is_ascii_digit() => Ok(()),
            State::One | State::Zero => match c {
                b'.' => self.go(State::Dot),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::Dot if c.is_ascii_digit() => self.go(State::Dot0),
            State::Dot => invalid(c, "after decimal point in numeric literal"),
            State::Dot0 => match c {
                c if c.is_ascii_digit() => Ok(()),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => self.go(State::ESign),
            State::E | State::ESign if c.is_ascii_digit() => self.go(State::E0),
            State::E | State::ESign => invalid(c, "in exponent of numeric literal"),
            State::E0 if c.is_ascii_digit() => Ok(()),
            State::E0 => self.end_value(c),
            State::Literal(word, next) => {
                let expected = word.as_bytes().get(next).copied().unwrap_or(b' ');
                if c != expected {
                    return Err(SyntaxError::InLiteral { byte: c, word, expected });
                }
                self.go(if next + 1 == word.len() {
                    State::EndValue
                } else {
                    State::Literal(word, next + 1)
                })
            }
        }
    }

    fn go(&mut self, state: State) -> Result<(), SyntaxError> {
        self.state = state;
        Ok(())
    }

    fn push(&mut self, c: u8, scope: Scope, next: State) -> Result<(), SyntaxError> {
        self.scopes.push(scope);
        if self.scopes.len() > self.max_depth {
            return invalid(c, "exceeded max depth");
        }
        self.go(next)
    }

    fn begin_value(&mut self, c: u8) -> Result<(), SyntaxError> {
        match c {
            c if is_space(c) => Ok(()),
            b'{' => self.push(c, Scope::ObjectKey, State::BeginStringOrEmpty),
            b'[' => self.push(c, Scope::ArrayValue, State::BeginValueOrEmpty),
            b'"' => self.go(State::InString),
            b'-' => self.go(State::Neg),
            b'0' => self.go(State::Zero),
            b't' => self.go(State::Literal("true", 1)),
            b'f' => self.go(State::Literal("false", 1)),
            b'n' => self.go(State::Literal("null", 1)),
            b'1'..=b'9' => self.go(State::One),
            _ => invalid(c, "looking for beginning of value"),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), SyntaxError> {
        match c {
            c if is_space(c) => Ok(()),
            b'"' => self.go(State::InString),
            _ => invalid(c, "looking for beginning of object key string"),
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), SyntaxError> {
        let Some(top) = self.scopes.last_mut() else {
            self.state = State::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (*top, c) {
            (Scope::ObjectKey, b':') => {
                *top = Scope::ObjectValue;
                self.go(State::BeginValue)
            }
            (Scope::ObjectKey, _) => invalid(c, "after object key"),
            (Scope::ObjectValue, b',') => {
                *top = Scope::ObjectKey;
                self.go(State::BeginString)
            }
            (Scope::ObjectValue, b'}') | (Scope::ArrayValue, b']') => {
                self.scopes.pop();
                if self.scopes.is_empty() {
                    self.end_top = true;
                    self.go(State::EndTop)
                } else {
                    self.go(State::EndValue)
                }
            }
            (Scope::ObjectValue, _) => invalid(c, "after object key:value pair"),
            (Scope::ArrayValue, b',') => self.go(State::BeginValue),
            (Scope::ArrayValue, _) => invalid(c, "after array element"),
        }
    }

    fn end_top(&mut self, c: u8) -> Result<(), SyntaxError> {
        if is_space(c) {
            Ok(())
        } else {
            invalid(c, "after top-level value")
        }
    }
}

#[cfg(test)]
mod tests;
