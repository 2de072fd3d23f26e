//! The pretty JSON layout of `stats --format json` for the parts written
//! through `serde_json` (the hand writer, `json_text`, gives the long ones;
//! [`Pretty::at`] lets a part start inside the document), with fewer calls:
//! [`Pretty`] gives byte for byte what `serde_json::to_writer_pretty` (its
//! `PrettyFormatter`, two spaces a level) gives, but writes a newline and
//! its indentation in one `write_all` instead of one per level. The
//! `nccl_tests` rows sit eight levels deep, so that was nine writes before
//! every key (about a third of the instructions of writing the document on
//! the bench logs, all on one core after the parallel read).
//!
//! `same_text_as_serde_pretty` (below) holds it to `to_string_pretty`.

use serde_json::ser::Formatter;
use std::io::{self, Write};

/// A newline, or a comma and a newline, then [`MAX_PAD`] spaces; a prefix is
/// written for a line up to that deep.
const NL_PAD: &[u8; 1 + MAX_PAD] = &pad::<{ 1 + MAX_PAD }>(b"\n");
const COMMA_NL_PAD: &[u8; 2 + MAX_PAD] = &pad::<{ 2 + MAX_PAD }>(b",\n");

/// Indentation written in one piece (64 levels of two spaces).
const MAX_PAD: usize = 128;

const fn pad<const N: usize>(head: &[u8]) -> [u8; N] {
    let mut out = [b' '; N];
    let mut i = 0;
    while i < head.len() {
        out[i] = head[i];
        i += 1;
    }
    out
}

/// `serde_json`'s pretty layout (two spaces a level), as one write a line start.
#[derive(Default)]
pub struct Pretty {
    depth: usize,
    /// The innermost array or object so far holds a value (as
    /// `PrettyFormatter::has_value`: set by the end of any value, cleared by
    /// the start of any array or object).
    has_value: bool,
}

impl Pretty {
    /// The layout of a value that starts `depth` containers deep in a
    /// pretty document (a part written apart and then spliced in).
    pub fn at(depth: usize) -> Pretty {
        Pretty { depth, has_value: false }
    }

    /// A newline (after a comma unless `first`) and the current indentation.
    #[inline]
    fn line<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        let n = 2 * self.depth;
        let (text, head) = if first { (&NL_PAD[..], 1) } else { (&COMMA_NL_PAD[..], 2) };
        if n <= MAX_PAD {
            return w.write_all(&text[..head + n]);
        }
        w.write_all(&text[..head])?;
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    #[inline]
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(w, true)?;
        }
        w.write_all(bracket)
    }
}

impl Formatter for Pretty {
    #[inline]
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }

    #[inline]
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.line(w, first)
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    #[inline]
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    #[inline]
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.line(w, first)
    }

    #[inline]
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    #[inline]
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn text(v: &serde_json::Value) -> String {
        let mut out = Vec::new();
        serde::Serialize::serialize(v, &mut serde_json::Serializer::with_formatter(&mut out, super::Pretty::default())).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Empty and nested arrays and objects, scalars at the top, strings
    /// that need escapes, and nesting past the one-piece indentation.
    #[test]
    fn same_text_as_serde_pretty() {
        let mut deep = json!([1, {"a": []}, {}]);
        for i in 0..80 {
            deep = if i % 2 == 0 { json!({"k": deep, "e": {}, "l": [[], [{}], 3]}) } else { json!([deep, null, "x\"\n"]) };
        }
        let docs = [
            json!(null),
            json!(1.5),
            json!("s"),
            json!([]),
            json!({}),
            json!([[]]),
            json!({"a": {}}),
            json!({"a": [], "b": [1, 2, {"c": [true, false, null], "d": {}}], "e": -0.0, "f": 1e300}),
            json!([{"x": [[], [[]], [{}]]}, [], {}]),
            deep,
        ];
        for d in &docs {
            assert_eq!(text(d), serde_json::to_string_pretty(d).unwrap());
        }
    }
}
