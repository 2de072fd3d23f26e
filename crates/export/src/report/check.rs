//! Test-only well-formedness check of the report's markup: tags balance,
//! attributes are quoted, entities are complete, and no attribute holds
//! `NaN` or `inf`. The page is written as XHTML-style markup (void elements
//! self-closed), so a tiny XML-ish scanner is enough; no parser crate.

/// HTML void elements, accepted without a `/>` for robustness.
const VOID: [&str; 6] = ["meta", "link", "br", "hr", "img", "input"];

pub fn check_markup(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut stack: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'<' => {
                let rest = &s[i..];
                if rest.starts_with("<!--") {
                    i += rest.find("-->").ok_or("unclosed comment")? + 3;
                    continue;
                }
                if rest.starts_with("<!") {
                    i += rest.find('>').ok_or("unclosed doctype")? + 1;
                    continue;
                }
                let end = tag_end(rest).ok_or_else(|| format!("unclosed tag at {i}"))?;
                let tag = &rest[1..end];
                i += end + 1;
                if let Some(name) = tag.strip_prefix('/') {
                    let open = stack.pop().ok_or_else(|| format!("stray </{name}>"))?;
                    if open != name.trim() {
                        return Err(format!("</{name}> closes <{open}>"));
                    }
                    continue;
                }
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name_end = body.find(|c: char| c.is_whitespace()).unwrap_or(body.len());
                let name = &body[..name_end];
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    return Err(format!("bad tag name {name:?}"));
                }
                check_attrs(&body[name_end..])?;
                if !self_closing && !VOID.contains(&name) {
                    stack.push(name);
                }
            }
            b'&' => {
                let rest = &s[i + 1..];
                let semi = rest.find(';').filter(|n| *n <= 8).ok_or_else(|| format!("bare & at {i}"))?;
                if !rest[..semi].chars().all(|c| c.is_ascii_alphanumeric() || c == '#') || semi == 0 {
                    return Err(format!("bad entity at {i}"));
                }
                i += 1;
            }
            b'>' => return Err(format!("bare > at {i}")),
            _ => i += 1,
        }
    }
    match stack.last() {
        Some(open) => Err(format!("<{open}> never closed")),
        None => Ok(()),
    }
}

/// Index of the `>` ending the tag that starts `rest`, skipping quoted values.
fn tag_end(rest: &str) -> Option<usize> {
    let mut quote = None;
    for (j, c) in rest.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(j),
            (None, '<') => return None,
            _ => {}
        }
    }
    None
}

/// `name="value"` pairs only; values free of `<`, `NaN` and `inf`.
fn check_attrs(mut a: &str) -> Result<(), String> {
    loop {
        a = a.trim_start();
        if a.is_empty() {
            return Ok(());
        }
        let eq = a.find('=').ok_or_else(|| format!("attribute without value: {a:?}"))?;
        let name = &a[..eq];
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
            return Err(format!("bad attribute name {name:?}"));
        }
        let rest = &a[eq + 1..];
        let q = rest.chars().next().filter(|c| *c == '"' || *c == '\'').ok_or("unquoted attribute")?;
        let close = rest[1..].find(q).ok_or("unterminated attribute")? + 1;
        let value = &rest[1..close];
        let non_finite =
            value.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| matches!(w, "NaN" | "inf" | "Infinity"));
        if value.contains('<') || non_finite {
            return Err(format!("bad value {name}={value:?}"));
        }
        a = &rest[close + 1..];
    }
}

#[test]
fn checker_catches_errors() {
    assert!(check_markup(r#"<!DOCTYPE html><a x="1"><b/><meta charset="utf-8"><c>t &amp; u</c></a>"#).is_ok());
    for bad in [
        "<a><b></a></b>",
        "<a>",
        "</a>",
        r#"<a x=1></a>"#,
        r#"<a x="NaN"></a>"#,
        r#"<a x="-inf 3"></a>"#,
        "<a>1 & 2</a>",
        "<a>1 > 2</a>",
        "<a",
    ] {
        assert!(check_markup(bad).is_err(), "{bad}");
    }
}
