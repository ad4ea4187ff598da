//! Splits expression text into tokens. Every token records the byte offset it starts at.

use serde_json::Number;

use super::ExprError;
use crate::path::{ContextPath, MAX_PATH_NESTING};

#[derive(Debug, Clone)]
pub(super) enum Tok {
    Number(Number),
    String(String),
    Path(Box<ContextPath>),
    Ident(String),
    True,
    False,
    Null,
    In,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Not,
    And,
    Or,
    Coalesce,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    End,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::Number(n) => format!("number {n}"),
            Self::String(_) => "a string".into(),
            Self::Path(p) => format!("path `{}`", p.source()),
            Self::Ident(name) => format!("`{name}`"),
            Self::True => "`true`".into(),
            Self::False => "`false`".into(),
            Self::Null => "`null`".into(),
            Self::In => "`in`".into(),
            Self::LParen => "`(`".into(),
            Self::RParen => "`)`".into(),
            Self::LBracket => "`[`".into(),
            Self::RBracket => "`]`".into(),
            Self::Comma => "`,`".into(),
            Self::Not => "`!`".into(),
            Self::And => "`&&`".into(),
            Self::Or => "`||`".into(),
            Self::Coalesce => "`??`".into(),
            Self::Eq => "`==`".into(),
            Self::Ne => "`!=`".into(),
            Self::Lt => "`<`".into(),
            Self::Le => "`<=`".into(),
            Self::Gt => "`>`".into(),
            Self::Ge => "`>=`".into(),
            Self::Plus => "`+`".into(),
            Self::Minus => "`-`".into(),
            Self::End => "the end of the expression".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) offset: usize,
}

pub(super) fn tokenize(source: &str) -> Result<Vec<Token>, ExprError> {
    let mut lexer = Lexer { source, at: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let end = matches!(token.tok, Tok::End);
        tokens.push(token);
        if end {
            return Ok(tokens);
        }
    }
}

struct Lexer<'a> {
    source: &'a str,
    at: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.source
            .get(self.at..)
            .and_then(|rest| rest.chars().next())
    }

    fn peek_second(&self) -> Option<char> {
        let mut chars = self.source.get(self.at..)?.chars();
        chars.next();
        chars.next()
    }

    fn next_token(&mut self) -> Result<Token, ExprError> {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += self.peek().map_or(1, char::len_utf8);
        }
        let offset = self.at;
        let Some(ch) = self.peek() else {
            return Ok(Token {
                tok: Tok::End,
                offset,
            });
        };
        let two = |lexer: &mut Self, tok| {
            lexer.at += 2;
            Ok(tok)
        };
        let one = |lexer: &mut Self, tok| {
            lexer.at += 1;
            Ok(tok)
        };
        let second = self.peek_second();
        let tok = match ch {
            '(' => one(self, Tok::LParen),
            ')' => one(self, Tok::RParen),
            '[' => one(self, Tok::LBracket),
            ']' => one(self, Tok::RBracket),
            ',' => one(self, Tok::Comma),
            '+' => one(self, Tok::Plus),
            '-' => one(self, Tok::Minus),
            '!' if second == Some('=') => two(self, Tok::Ne),
            '!' => one(self, Tok::Not),
            '=' if second == Some('=') => two(self, Tok::Eq),
            '<' if second == Some('=') => two(self, Tok::Le),
            '<' => one(self, Tok::Lt),
            '>' if second == Some('=') => two(self, Tok::Ge),
            '>' => one(self, Tok::Gt),
            '&' if second == Some('&') => two(self, Tok::And),
            '|' if second == Some('|') => two(self, Tok::Or),
            '?' if second == Some('?') => two(self, Tok::Coalesce),
            '\'' | '"' => self.string(ch).map(Tok::String),
            '$' => self.path(),
            '0'..='9' => self.number(),
            c if c.is_ascii_alphabetic() || c == '_' => Ok(self.word()),
            '=' => Err(ExprError::Syntax {
                offset,
                message: "unexpected `=` (compare with `==`)".into(),
            }),
            other => Err(ExprError::Syntax {
                offset,
                message: format!("unexpected character {other:?}"),
            }),
        }?;
        Ok(Token { tok, offset })
    }

    fn word(&mut self) -> Tok {
        let rest = &self.source[self.at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let word = &rest[..len];
        self.at += len;
        match word {
            "true" => Tok::True,
            "false" => Tok::False,
            "null" => Tok::Null,
            "in" => Tok::In,
            _ => Tok::Ident(word.to_owned()),
        }
    }

    fn number(&mut self) -> Result<Tok, ExprError> {
        let start = self.at;
        let bytes = self.source.as_bytes();
        let digits = |at: &mut usize| {
            let from = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at > from
        };
        let mut at = start;
        digits(&mut at);
        let mut integer = true;
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            integer = false;
            if !digits(&mut at) {
                return Err(ExprError::Syntax {
                    offset: at,
                    message: "expected digits after the decimal point".into(),
                });
            }
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            integer = false;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            if !digits(&mut at) {
                return Err(ExprError::Syntax {
                    offset: at,
                    message: "expected digits in the exponent".into(),
                });
            }
        }
        if bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        {
            return Err(ExprError::Syntax {
                offset: at,
                message: "a number runs into a name".into(),
            });
        }
        let text = &self.source[start..at];
        self.at = at;
        let number = if integer {
            text.parse::<u64>().ok().map(Number::from)
        } else {
            None
        };
        let number = number.or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64));
        number.map(Tok::Number).ok_or(ExprError::Syntax {
            offset: start,
            message: format!("number {text} is out of range"),
        })
    }

    fn string(&mut self, quote: char) -> Result<String, ExprError> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            let Some(ch) = self.peek() else {
                return Err(ExprError::Syntax {
                    offset: start,
                    message: "unterminated string".into(),
                });
            };
            self.at += ch.len_utf8();
            match ch {
                c if c == quote => return Ok(out),
                '\\' => out.push(self.escape()?),
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, ExprError> {
        let offset = self.at - 1;
        let bad = |message: &str| ExprError::Syntax {
            offset,
            message: message.into(),
        };
        let ch = self.peek().ok_or_else(|| bad("unterminated escape"))?;
        self.at += ch.len_utf8();
        Ok(match ch {
            '\\' => '\\',
            '\'' => '\'',
            '"' => '"',
            '/' => '/',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'u' => {
                let high = self.hex4().ok_or_else(|| bad("expected four hex digits"))?;
                if (0xD800..0xDC00).contains(&high) {
                    let low = match (self.peek(), self.peek_second()) {
                        (Some('\\'), Some('u')) => {
                            self.at += 2;
                            self.hex4()
                        }
                        _ => None,
                    }
                    .filter(|low| (0xDC00..0xE000).contains(low))
                    .ok_or_else(|| bad("unpaired surrogate"))?;
                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    char::from_u32(code).ok_or_else(|| bad("invalid code point"))?
                } else {
                    char::from_u32(high).ok_or_else(|| bad("invalid code point"))?
                }
            }
            _ => return Err(bad("unknown escape")),
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let text = self.source.get(self.at..self.at + 4)?;
        let value = u32::from_str_radix(text, 16).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        Some(value)
    }

    /// A path runs from `$` to the first whitespace, operator or closing delimiter outside
    /// brackets; inside brackets it may hold anything, including quoted text.
    fn path(&mut self) -> Result<Tok, ExprError> {
        let start = self.at;
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        let mut escaped = false;
        let mut end = self.source.len();
        for (index, ch) in self.source[start..].char_indices().skip(1) {
            if let Some(open) = quote {
                if escaped {
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == open {
                    quote = None;
                }
                continue;
            }
            if depth == 0 {
                if ch == '[' {
                    depth = 1;
                } else if !(ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '*') {
                    end = start + index;
                    break;
                }
                continue;
            }
            match ch {
                '\'' | '"' => quote = Some(ch),
                '[' | '(' => {
                    depth += 1;
                    if depth > MAX_PATH_NESTING {
                        return Err(ExprError::Path {
                            offset: start + index,
                            message: format!("nested deeper than {MAX_PATH_NESTING} levels"),
                        });
                    }
                }
                ']' | ')' => depth -= 1,
                _ => {}
            }
        }
        if depth > 0 || quote.is_some() {
            return Err(ExprError::Path {
                offset: start,
                message: "unterminated `[` in path".into(),
            });
        }
        let text = &self.source[start..end];
        self.at = end;
        let path = ContextPath::parse(text).map_err(|error| ExprError::Path {
            offset: start + error.offset,
            message: error.message,
        })?;
        Ok(Tok::Path(Box::new(path)))
    }
}
