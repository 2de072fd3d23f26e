//! The byte-level tokenizer of the topology XML: turns a byte stream into start
//! tags (name, attributes, self-closing or not), end tags and the end of input,
//! counting lines. It skips whitespace between tags, the `<?xml …?>` header and
//! other processing instructions, comments and `<!DOCTYPE …>`; attribute values
//! may use single or double quotes and any order; CRLF line ends are whitespace.
//! Text content is refused (NCCL writes none). Reads through a fixed buffer, so
//! memory does not grow with the file; names and values are capped in length.

use std::io::Read;

/// What the tokenizer found.
#[derive(Debug)]
pub(super) enum Event {
    Open {
        name: String,
        attrs: Vec<(String, String)>,
        line: u64,
        empty: bool,
    },
    Close {
        name: String,
        line: u64,
    },
    Eof {
        line: u64,
    },
}

#[derive(Debug)]
pub(super) enum LexError {
    Io(std::io::Error),
    Syntax { line: u64, what: String },
}

/// Longest element name, attribute name or value accepted.
const MAX_TOKEN: usize = 16 << 10;

pub(super) struct Lexer<R> {
    src: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    line: u64,
    /// A UTF-8 byte-order mark at the very start is skipped once.
    started: bool,
}

fn syntax<T>(line: u64, what: impl Into<String>) -> Result<T, LexError> {
    Err(LexError::Syntax {
        line,
        what: what.into(),
    })
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

/// A short printable rendering of unexpected bytes for error messages.
fn shown(bytes: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(bytes).chars().take(24).collect();
    format!("{s:?}")
}

impl<R: Read> Lexer<R> {
    pub(super) fn new(src: R) -> Self {
        Lexer {
            src,
            buf: vec![0u8; 64 << 10].into_boxed_slice(),
            pos: 0,
            len: 0,
            line: 1,
            started: false,
        }
    }

    pub(super) fn line(&self) -> u64 {
        self.line
    }

    fn peek(&mut self) -> Result<Option<u8>, LexError> {
        if self.pos == self.len {
            self.pos = 0;
            self.len = loop {
                match self.src.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(LexError::Io(e)),
                }
            };
            if self.len == 0 {
                return Ok(None);
            }
        }
        Ok(Some(self.buf[self.pos]))
    }

    fn bump(&mut self) -> Result<Option<u8>, LexError> {
        let b = self.peek()?;
        if let Some(c) = b {
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
            }
        }
        Ok(b)
    }

    /// Skips blanks (CR and LF included); returns how many.
    fn skip_ws(&mut self) -> Result<usize, LexError> {
        let mut n = 0;
        while let Some(b) = self.peek()? {
            if !b.is_ascii_whitespace() {
                break;
            }
            self.bump()?;
            n += 1;
        }
        Ok(n)
    }

    /// Consumes bytes up to and including `end`; `what` names the construct for the error.
    fn skip_past(&mut self, end: &[u8], start_line: u64, what: &str) -> Result<(), LexError> {
        let mut window: Vec<u8> = Vec::with_capacity(end.len() + 1);
        while let Some(b) = self.bump()? {
            window.push(b);
            if window.len() > end.len() {
                window.remove(0);
            }
            if window == end {
                return Ok(());
            }
        }
        syntax(self.line, format!("unexpected end of file inside {what} opened at line {start_line} (file truncated?)"))
    }

    fn name(&mut self) -> Result<String, LexError> {
        let mut out = Vec::new();
        while let Some(b) = self.peek()? {
            if !is_name_byte(b) {
                break;
            }
            if out.len() == MAX_TOKEN {
                return syntax(self.line, "name too long");
            }
            out.push(b);
            self.bump()?;
        }
        Ok(String::from_utf8(out).unwrap_or_default())
    }

    /// The next tag or the end of input.
    pub(super) fn next(&mut self) -> Result<Event, LexError> {
        if !self.started {
            self.started = true;
            if self.peek()? == Some(0xEF) {
                for want in [0xEF, 0xBB, 0xBF] {
                    if self.bump()? != Some(want) {
                        return syntax(
                            1,
                            "expected a tag (`<…>`), found a damaged byte-order mark",
                        );
                    }
                }
            }
        }
        loop {
            self.skip_ws()?;
            let line = self.line;
            let Some(b) = self.peek()? else {
                return Ok(Event::Eof { line });
            };
            if b != b'<' {
                let mut text = Vec::new();
                while let Some(c) = self.peek()? {
                    if c == b'<' || text.len() == 24 {
                        break;
                    }
                    text.push(c);
                    self.bump()?;
                }
                return syntax(
                    line,
                    format!("expected a tag (`<…>`), found text {}", shown(&text)),
                );
            }
            self.bump()?;
            match self.peek()? {
                Some(b'?') => self.skip_past(b"?>", line, "`<?…?>`")?,
                Some(b'!') => {
                    self.bump()?;
                    if self.peek()? == Some(b'-') {
                        self.bump()?;
                        if self.bump()? != Some(b'-') {
                            return syntax(line, "malformed comment: expected `<!--`");
                        }
                        self.skip_past(b"-->", line, "a comment `<!--…-->`")?;
                    } else {
                        self.skip_past(b">", line, "a `<!…>` declaration")?;
                    }
                }
                Some(b'/') => {
                    self.bump()?;
                    let name = self.name()?;
                    if name.is_empty() {
                        return syntax(line, "expected an element name after `</`");
                    }
                    self.skip_ws()?;
                    return match self.bump()? {
                        Some(b'>') => Ok(Event::Close { name, line }),
                        Some(c) => syntax(
                            self.line,
                            format!("expected `>` to end `</{name}`, found {}", shown(&[c])),
                        ),
                        None => syntax(
                            self.line,
                            format!("unexpected end of file inside `</{name}` (file truncated?)"),
                        ),
                    };
                }
                Some(c) if is_name_start(c) => return self.start_tag(line),
                Some(c) => {
                    return syntax(
                        line,
                        format!("expected an element name after `<`, found {}", shown(&[c])),
                    )
                }
                None => return syntax(line, "unexpected end of file after `<` (file truncated?)"),
            }
        }
    }

    /// After `<`: `name (attr="value")* (/)?>`.
    fn start_tag(&mut self, line: u64) -> Result<Event, LexError> {
        let name = self.name()?;
        let mut attrs: Vec<(String, String)> = Vec::new();
        let eof = |l: u64, name: &str| {
            syntax(l, format!("unexpected end of file inside `<{name}` opened at line {line} (file truncated?)"))
        };
        loop {
            let had_ws = self.skip_ws()? > 0;
            match self.peek()? {
                None => return eof(self.line, &name),
                Some(b'>') => {
                    self.bump()?;
                    return Ok(Event::Open {
                        name,
                        attrs,
                        line,
                        empty: false,
                    });
                }
                Some(b'/') => {
                    self.bump()?;
                    return match self.bump()? {
                        Some(b'>') => Ok(Event::Open {
                            name,
                            attrs,
                            line,
                            empty: true,
                        }),
                        None => eof(self.line, &name),
                        Some(c) => syntax(
                            self.line,
                            format!("expected `>` after `/` in `<{name}`, found {}", shown(&[c])),
                        ),
                    };
                }
                Some(c) if is_name_start(c) && had_ws => {
                    let key = self.name()?;
                    self.skip_ws()?;
                    match self.bump()? {
                        Some(b'=') => {}
                        None => return eof(self.line, &name),
                        Some(c) => {
                            return syntax(
                                self.line,
                                format!(
                                    "expected `=` after attribute `{key}` of <{name}>, found {}",
                                    shown(&[c])
                                ),
                            )
                        }
                    }
                    self.skip_ws()?;
                    let value = self.value(&name, &key)?;
                    match attrs.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => attrs.push((key, value)),
                    }
                }
                Some(c) => {
                    return syntax(
                        self.line,
                        format!(
                            "expected an attribute, `>` or `/>` in <{name}>, found {}",
                            shown(&[c])
                        ),
                    )
                }
            }
        }
    }

    /// A quoted attribute value, entities decoded.
    fn value(&mut self, elem: &str, key: &str) -> Result<String, LexError> {
        let start = self.line;
        let quote = match self.bump()? {
            Some(q @ (b'"' | b'\'')) => q,
            Some(c) => {
                return syntax(
                    start,
                    format!(
                        "expected a quoted value for `{key}` of <{elem}>, found {}",
                        shown(&[c])
                    ),
                )
            }
            None => {
                return syntax(
                    start,
                    format!("unexpected end of file after `{key}=` in <{elem}> (file truncated?)"),
                )
            }
        };
        let mut out = Vec::new();
        loop {
            match self.bump()? {
                Some(b) if b == quote => break,
                Some(b) => {
                    if out.len() == MAX_TOKEN {
                        return syntax(start, format!("value of `{key}` in <{elem}> too long (unclosed quote?)"));
                    }
                    out.push(b);
                }
                None => {
                    return syntax(self.line, format!("unexpected end of file in the value of `{key}` of <{elem}> started at line {start} (file truncated?)"))
                }
            }
        }
        Ok(decode_entities(&String::from_utf8_lossy(&out)))
    }
}

/// `&lt;` `&gt;` `&amp;` `&quot;` `&apos;` and numeric references; anything else is kept as written.
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|&e| e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let ent = &rest[1..end];
        let c = match ent {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => ent
                .strip_prefix("#x")
                .map(|h| u32::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(s: &str) -> Result<Vec<String>, String> {
        let mut lx = Lexer::new(s.as_bytes());
        let mut out = Vec::new();
        loop {
            match lx.next() {
                Ok(Event::Open {
                    name,
                    attrs,
                    line,
                    empty,
                }) => out.push(format!(
                    "{line}<{name} {attrs:?}{}",
                    if empty { "/" } else { "" }
                )),
                Ok(Event::Close { name, line }) => out.push(format!("{line}</{name}")),
                Ok(Event::Eof { line }) => {
                    out.push(format!("{line}eof"));
                    return Ok(out);
                }
                Err(LexError::Syntax { line, what }) => return Err(format!("{line}: {what}")),
                Err(LexError::Io(e)) => return Err(e.to_string()),
            }
        }
    }

    #[test]
    fn tags_attributes_quotes_and_skipped_parts() {
        let s = "\u{feff}<?xml version=\"1.0\"?>\r\n<!-- a -- b --->\r\n<a x='1' y = \"a&amp;b&#x41;&zz;\"\r\n z=\"2\"><b/><!DOCTYPE q></a >";
        let ev = events(s).unwrap();
        assert_eq!(
            ev,
            vec![
                r#"3<a [("x", "1"), ("y", "a&bA&zz;"), ("z", "2")]"#.to_string(),
                "4<b []/".into(),
                "4</a".into(),
                "4eof".into()
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert!(events("<a>\n<b x=1/>")
            .unwrap_err()
            .starts_with("2: expected a quoted value"));
        assert!(events("<a>\n<b x=\"1")
            .unwrap_err()
            .contains("started at line 2"));
        assert!(events("<a>\nhello")
            .unwrap_err()
            .starts_with("2: expected a tag"));
        assert!(events("<a\n<")
            .unwrap_err()
            .starts_with("2: expected an attribute"));
        assert!(events("<a x='1'y='2'>")
            .unwrap_err()
            .contains("expected an attribute"));
        assert!(events("<!-- open\n\n")
            .unwrap_err()
            .contains("comment `<!--…-->` opened at line 1"));
        assert!(events("<").unwrap_err().contains("end of file after `<`"));
    }
}
