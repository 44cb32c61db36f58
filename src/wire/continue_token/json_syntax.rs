//! Go's `encoding/json` v1 syntax check (`checkValid` and its scanner), reproducing its error
//! messages byte for byte: `invalid character 'x' <context>` and `unexpected end of JSON input`.

/// encoding/json's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nest {
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
    /// Inside `\u`, with this many hex digits still to come.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`, with these bytes still to come.
    Literal(&'static str, &'static [u8]),
}

struct Scanner {
    state: State,
    stack: Vec<Nest>,
    end_top: bool,
}

pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// `quoteChar`: Go converts the byte to a rune (so 0x81 is U+0081) and quotes it.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let quoted = quote_latin1(char::from(c));
            format!("'{quoted}'")
        }
    }
}

/// `strconv.Quote` of one Latin-1 rune, without the surrounding quotes.
fn quote_latin1(c: char) -> String {
    match c {
        '\\' => r"\\".to_owned(),
        '\u{7}' => r"\a".to_owned(),
        '\u{8}' => r"\b".to_owned(),
        '\u{c}' => r"\f".to_owned(),
        '\n' => r"\n".to_owned(),
        '\r' => r"\r".to_owned(),
        '\t' => r"\t".to_owned(),
        '\u{b}' => r"\v".to_owned(),
        c if c < ' ' || c == '\u{7f}' => format!("\\x{:02x}", u32::from(c)),
        // Not printable in Go: C1 controls, no-break space and soft hyphen.
        c if ('\u{80}'..='\u{a0}').contains(&c) || c == '\u{ad}' => {
            format!("\\u{:04x}", u32::from(c))
        }
        c => c.to_string(),
    }
}

fn error(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// `checkValid`: the first syntax error in the input, exactly as Go words it.
pub(super) fn check_valid(data: &[u8]) -> Result<(), String> {
    let mut s = Scanner { state: State::BeginValue, stack: Vec::new(), end_top: false };
    for &c in data {
        s.step(c)?;
    }
    // `eof`: a trailing number or literal is finished by feeding a space.
    if s.end_top {
        return Ok(());
    }
    s.step(b' ')?;
    if s.end_top {
        return Ok(());
    }
    Err("unexpected end of JSON input".to_owned())
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Nest::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    Err(error(c, "after top-level value"))
                }
            }
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return Err(error(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            State::InStringEsc => {
                self.state = match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString,
                    b'u' => State::InStringEscU(4),
                    _ => return Err(error(c, "in string escape code")),
                };
                Ok(())
            }
            State::InStringEscU(left) => {
                if !c.is_ascii_hexdigit() {
                    return Err(error(c, "in \\u hexadecimal character escape"));
                }
                self.state =
                    if left <= 1 { State::InString } else { State::InStringEscU(left - 1) };
                Ok(())
            }
            State::Neg => {
                self.state = match c {
                    b'0' => State::Zero,
                    b'1'..=b'9' => State::One,
                    _ => return Err(error(c, "in numeric literal")),
                };
                Ok(())
            }
            State::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(c)
            }
            State::Zero => self.zero(c),
            State::Dot => {
                if !c.is_ascii_digit() {
                    return Err(error(c, "after decimal point in numeric literal"));
                }
                self.state = State::Dot0;
                Ok(())
            }
            State::Dot0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                if c == b'e' || c == b'E' {
                    self.state = State::E;
                    return Ok(());
                }
                self.end_value(c)
            }
            State::E => {
                if c == b'+' || c == b'-' {
                    self.state = State::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            State::ESign => self.e_sign(c),
            State::E0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.end_value(c)
            }
            State::Literal(word, rest) => match rest.split_first() {
                Some((&want, more)) if c == want => {
                    self.state =
                        if more.is_empty() { State::EndValue } else { State::Literal(word, more) };
                    Ok(())
                }
                Some((&want, _)) => {
                    Err(error(c, &format!("in literal {word} (expecting {})", quote_char(want))))
                }
                None => self.end_value(c),
            },
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            c if is_space(c) => return Ok(()),
            b'{' => return self.push(c, Nest::ObjectKey, State::BeginStringOrEmpty),
            b'[' => return self.push(c, Nest::ArrayValue, State::BeginValueOrEmpty),
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::One,
            b't' => State::Literal("true", b"rue"),
            b'f' => State::Literal("false", b"alse"),
            b'n' => State::Literal("null", b"ull"),
            _ => return Err(error(c, "looking for beginning of value")),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.state = State::InString;
            return Ok(());
        }
        Err(error(c, "looking for beginning of object key string"))
    }

    fn push(&mut self, c: u8, nest: Nest, next: State) -> Result<(), String> {
        self.stack.push(nest);
        if self.stack.len() > MAX_DEPTH {
            return Err(error(c, "exceeded max depth"));
        }
        self.state = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.state = State::EndTop;
            self.end_top = true;
        } else {
            self.state = State::EndValue;
        }
    }

    fn zero(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'.' => self.state = State::Dot,
            b'e' | b'E' => self.state = State::E,
            _ => return self.end_value(c),
        }
        Ok(())
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if !c.is_ascii_digit() {
            return Err(error(c, "in exponent of numeric literal"));
        }
        self.state = State::E0;
        Ok(())
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(&top) = self.stack.last() else {
            self.state = State::EndTop;
            self.end_top = true;
            return self.step(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (top, c) {
            (Nest::ObjectKey, b':') => {
                if let Some(t) = self.stack.last_mut() {
                    *t = Nest::ObjectValue;
                }
                self.state = State::BeginValue;
            }
            (Nest::ObjectKey, _) => return Err(error(c, "after object key")),
            (Nest::ObjectValue, b',') => {
                if let Some(t) = self.stack.last_mut() {
                    *t = Nest::ObjectKey;
                }
                self.state = State::BeginString;
            }
            (Nest::ObjectValue, b'}') | (Nest::ArrayValue, b']') => self.pop(),
            (Nest::ObjectValue, _) => return Err(error(c, "after object key:value pair")),
            (Nest::ArrayValue, b',') => self.state = State::BeginValue,
            (Nest::ArrayValue, _) => return Err(error(c, "after array element")),
        }
        Ok(())
    }
}
