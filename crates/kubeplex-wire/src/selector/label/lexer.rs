//! apimachinery's label selector lexer (`labels.Lexer`), byte for byte.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// apimachinery's byte lexer. Like Go's, `read` yields 0 both past the end and for a NUL byte,
/// so a NUL ends the token (or the input) it appears in.
pub(super) struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(s: &'a str) -> Self {
        Self { s: s.as_bytes(), pos: 0 }
    }

    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    pub(super) fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special(ch) {
            self.scan_special()
        } else {
            self.scan_identifier()
        }
    }

    fn scan_identifier(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
        }
        // The buffer is split from valid UTF-8 at ASCII bytes only, so this is never lossy.
        let lit = String::from_utf8_lossy(&buf).into_owned();
        (keyword(&buf).unwrap_or(Token::Identifier), lit)
    }

    /// Longest run of special bytes that is still an operator (`!=`, `==`, else one byte).
    fn scan_special(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
            match keyword(&buf) {
                Some(tok) => last = Some((tok, buf.len())),
                None if last.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        // Every single special byte is a token, so `last` is always set here.
        let (tok, len) = last.unwrap_or((Token::EndOfString, 0));
        (tok, String::from_utf8_lossy(buf.get(..len).unwrap_or_default()).into_owned())
    }
}
