//! Go's `encoding/json` scanner (`checkValid`), state for state, so the first error of a body
//! is reported with the same words at the same byte; then the decoding of a body it accepted
//! into a value, with Go's string and number semantics.

use serde_json::{Map, Number, Value};

use super::{quote_char, MAX_DEPTH};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

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

/// Go's `encoding/json` scanner, state for state, so the first error is reported with the
/// same words at the same byte.
struct Scanner {
    state: State,
    scopes: Vec<Scope>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn syntax(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), String> {
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
                c if c < 0x20 => Err(syntax(c, "in string literal")),
                _ => Ok(()),
            },
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.go(State::InString),
                b'u' => self.go(State::InStringEscU(0)),
                _ => Err(syntax(c, "in string escape code")),
            },
            State::InStringEscU(seen) => {
                if !c.is_ascii_hexdigit() {
                    return Err(syntax(c, "in \\u hexadecimal character escape"));
                }
                self.go(if seen == 3 { State::InString } else { State::InStringEscU(seen + 1) })
            }
            State::Neg => match c {
                b'0' => self.go(State::Zero),
                b'1'..=b'9' => self.go(State::One),
                _ => Err(syntax(c, "in numeric literal")),
            },
            State::One if c.is_ascii_digit() => Ok(()),
            State::One | State::Zero => match c {
                b'.' => self.go(State::Dot),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::Dot if c.is_ascii_digit() => self.go(State::Dot0),
            State::Dot => Err(syntax(c, "after decimal point in numeric literal")),
            State::Dot0 => match c {
                c if c.is_ascii_digit() => Ok(()),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => self.go(State::ESign),
            State::E | State::ESign if c.is_ascii_digit() => self.go(State::E0),
            State::E | State::ESign => Err(syntax(c, "in exponent of numeric literal")),
            State::E0 if c.is_ascii_digit() => Ok(()),
            State::E0 => self.end_value(c),
            State::Literal(word, next) => {
                let expected = word.as_bytes().get(next).copied().unwrap_or(b' ');
                if c != expected {
                    let context = format!("in literal {word} (expecting {})", quote_char(expected));
                    return Err(syntax(c, &context));
                }
                self.go(if next + 1 == word.len() {
                    State::EndValue
                } else {
                    State::Literal(word, next + 1)
                })
            }
        }
    }

    fn go(&mut self, state: State) -> Result<(), String> {
        self.state = state;
        Ok(())
    }

    fn push(&mut self, c: u8, scope: Scope, next: State) -> Result<(), String> {
        self.scopes.push(scope);
        if self.scopes.len() > MAX_DEPTH {
            return Err(syntax(c, "exceeded max depth"));
        }
        self.go(next)
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
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
            _ => Err(syntax(c, "looking for beginning of value")),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'"' => self.go(State::InString),
            _ => Err(syntax(c, "looking for beginning of object key string")),
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
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
            (Scope::ObjectKey, _) => Err(syntax(c, "after object key")),
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
            (Scope::ObjectValue, _) => Err(syntax(c, "after object key:value pair")),
            (Scope::ArrayValue, b',') => self.go(State::BeginValue),
            (Scope::ArrayValue, _) => Err(syntax(c, "after array element")),
        }
    }

    fn end_top(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            Ok(())
        } else {
            Err(syntax(c, "after top-level value"))
        }
    }
}

/// `checkValid`: every byte, then the end of input, which Go probes by stepping a space.
pub(super) fn validate(data: &[u8]) -> Result<(), String> {
    let mut scanner = Scanner { state: State::BeginValue, scopes: Vec::new(), end_top: false };
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
        Err("unexpected end of JSON input".to_owned())
    }
}

/// Builds the value of a document [`validate`] accepted, so it only meets well-formed input;
/// it still never indexes out of bounds on its own.
/// Decodes a body [`validate`] accepted.
pub(super) fn build(data: &[u8]) -> Result<Value, String> {
    Builder { data, pos: 0 }.document()
}

struct Builder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Builder<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(b' ')
    }

    fn skip_space(&mut self) {
        while self.pos < self.data.len() && is_space(self.peek()) {
            self.pos += 1;
        }
    }

    fn document(mut self) -> Result<Value, String> {
        self.value()
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        // Depth is bounded by the scanner's MAX_DEPTH, so this recursion stays shallow.
        match self.peek() {
            b'{' => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b'}' => {
                            self.pos += 1;
                            return Ok(Value::Object(map));
                        }
                        b',' => self.pos += 1,
                        b'"' => {
                            let key = self.string();
                            self.skip_space();
                            self.pos += 1; // ':'
                            let value = self.value()?;
                            map.insert(key, value);
                        }
                        _ => return Err("unexpected end of JSON input".to_owned()),
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b']' => {
                            self.pos += 1;
                            return Ok(Value::Array(items));
                        }
                        b',' => self.pos += 1,
                        _ if self.pos < self.data.len() => items.push(self.value()?),
                        _ => return Err("unexpected end of JSON input".to_owned()),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string())),
            b't' => self.literal(4, Value::Bool(true)),
            b'f' => self.literal(5, Value::Bool(false)),
            b'n' => self.literal(4, Value::Null),
            _ => self.number(),
        }
    }

    fn literal(&mut self, len: usize, value: Value) -> Result<Value, String> {
        self.pos += len;
        Ok(value)
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self.pos < self.data.len()
            && matches!(self.peek(), b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(self.data.get(start..self.pos).unwrap_or_default())
            .unwrap_or_default();
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        text.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number).ok_or_else(|| {
            format!("json: cannot unmarshal number {text} into Go value of type float64")
        })
    }

    /// A string at `pos` (on its opening quote), unquoted the way Go's `unquoteBytes` does.
    fn string(&mut self) -> String {
        self.pos += 1;
        let mut out = String::new();
        let mut raw: Vec<u8> = Vec::new();
        loop {
            let c = self.peek();
            if self.pos >= self.data.len() || c == b'"' {
                self.pos += 1;
                push_lossy(&mut out, &raw);
                return out;
            }
            if c != b'\\' {
                raw.push(c);
                self.pos += 1;
                continue;
            }
            push_lossy(&mut out, &raw);
            raw.clear();
            let escape = self.data.get(self.pos + 1).copied().unwrap_or(b'"');
            self.pos += 2;
            match escape {
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let first = self.hex4();
                    out.push(self.surrogate_pair(first));
                }
                other => out.push(char::from(other)),
            }
        }
    }

    /// The four hex digits after `\u` (validated by the scanner).
    fn hex4(&mut self) -> u32 {
        let digits = self.data.get(self.pos..self.pos + 4).unwrap_or_default();
        self.pos += 4;
        std::str::from_utf8(digits).ok().and_then(|d| u32::from_str_radix(d, 16).ok()).unwrap_or(0)
    }

    /// A surrogate only counts when a `\u` low surrogate follows it; anything else becomes
    /// U+FFFD and the next escape is read on its own.
    fn surrogate_pair(&mut self, first: u32) -> char {
        if !(0xD800..0xE000).contains(&first) {
            return char::from_u32(first).unwrap_or('\u{fffd}');
        }
        let next_is_escape = self.data.get(self.pos..self.pos + 2) == Some(b"\\u".as_slice());
        if (0xD800..0xDC00).contains(&first) && next_is_escape {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4();
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return char::from_u32(code).unwrap_or('\u{fffd}');
            }
            self.pos = save;
        }
        '\u{fffd}'
    }
}

/// Appends bytes as UTF-8, each invalid byte becoming U+FFFD (Go's `utf8.DecodeRune` width 1).
fn push_lossy(out: &mut String, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{fffd}');
                bytes = rest.get(1..).unwrap_or_default();
            }
        }
    }
}
