//! Pretty JSON written by hand into a byte buffer, in the layout of
//! `serde_json::to_writer_pretty` (two spaces a level): [`Text`] holds the
//! buffer and the nesting depth; the long, regular parts of `stats --format
//! json` (the nccl-tests rows, the per-rank and per-communicator rows) are
//! written through it instead of through a `serde_json::Serializer`.
//!
//! Why: through the serializer every key and string goes through
//! `format_escaped_str` (a table look-up a byte and three writes a string)
//! and every token through the output writer; on the 400 MB bench log that
//! was most of `print_stats`, all on one core after the parallel read. Here
//! a key is a literal copied in one piece, a string that needs no escape
//! (found by [`plain`]) is copied as is, and numbers use the formatters
//! `serde_json` itself uses (`itoa`, `ryu` through [`CompactFormatter`]), so
//! the text is the same byte for byte. The writers built on it test that
//! against `serde_json` on real files; the tests below hold the primitives.

use serde_json::ser::{CompactFormatter, Formatter};
use std::io;

/// A buffer of pretty JSON text and the depth of the container it is in.
pub struct Text {
    pub buf: Vec<u8>,
    depth: usize,
}

/// A newline and indentation for lines up to this deep, copied in one piece.
const PAD: &[u8] = b"\n                                                                ";

/// Writing into a `Vec<u8>` cannot fail.
#[inline]
fn infallible(r: io::Result<()>) {
    debug_assert!(r.is_ok());
}

impl Text {
    /// An empty buffer whose first value sits `depth` containers deep (as a
    /// `json_pretty::Pretty` formatter at that depth would write it).
    pub fn at(depth: usize, capacity: usize) -> Text {
        Text { buf: Vec::with_capacity(capacity), depth }
    }

    /// How many containers deep the next value sits.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// A newline, after a comma unless `first`, and the current indentation:
    /// what comes before an array element or an object key.
    #[inline]
    pub fn line(&mut self, first: bool) {
        if !first {
            self.buf.push(b',');
        }
        let n = 1 + 2 * self.depth;
        if n <= PAD.len() {
            self.buf.extend_from_slice(&PAD[..n]);
        } else {
            self.buf.push(b'\n');
            self.buf.resize(self.buf.len() + 2 * self.depth, b' ');
        }
    }

    /// Opens an array (`[`) or object (`{`).
    #[inline]
    pub fn open(&mut self, bracket: u8) {
        self.depth += 1;
        self.buf.push(bracket);
    }

    /// Closes an array (`]`) or object (`}`); `empty` when it holds nothing
    /// (`[]`, `{}` on one line).
    #[inline]
    pub fn close(&mut self, bracket: u8, empty: bool) {
        self.depth -= 1;
        if !empty {
            self.line(true);
        }
        self.buf.push(bracket);
    }

    /// An object key and its `": "`; `key` is a literal that needs no escape.
    #[inline]
    pub fn key(&mut self, first: bool, key: &str) {
        debug_assert!(plain(key.as_bytes()));
        self.line(first);
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\": ");
    }

    /// Key `i` of an object whose keys are `keys` (key 0 first): the line,
    /// comma and key text made once for this depth and copied in one piece.
    #[inline]
    pub fn key_of<const N: usize>(&mut self, keys: &mut Keys<N>, i: usize) {
        if keys.depth != self.depth {
            keys.make(self.depth);
        }
        let start = if i == 0 { 0 } else { keys.ends[i - 1] };
        self.buf.extend_from_slice(&keys.text[start..keys.ends[i]]);
    }

    #[inline]
    pub fn u64(&mut self, v: u64) {
        infallible(CompactFormatter.write_u64(&mut self.buf, v));
    }

    #[inline]
    pub fn i64(&mut self, v: i64) {
        infallible(CompactFormatter.write_i64(&mut self.buf, v));
    }

    /// A float as `serde_json` writes it: `null` when not finite.
    #[inline]
    pub fn f64(&mut self, v: f64) {
        if v.is_finite() {
            infallible(CompactFormatter.write_f64(&mut self.buf, v));
        } else {
            self.null();
        }
    }

    #[inline]
    pub fn null(&mut self) {
        self.buf.extend_from_slice(b"null");
    }

    /// A string, escaped as `serde_json` escapes it.
    #[inline]
    pub fn str(&mut self, s: &str) {
        if plain(s.as_bytes()) {
            self.buf.push(b'"');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.push(b'"');
        } else {
            infallible(serde_json::to_writer(&mut self.buf, s).map_err(io::Error::from));
        }
    }

    /// `None` as `null`, `Some` through `f`.
    #[inline]
    pub fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Self, T)) {
        match v {
            Some(x) => f(self, x),
            None => self.null(),
        }
    }

    /// A slice as an array, each element through `f`.
    #[inline]
    pub fn array<T>(&mut self, xs: &[T], mut f: impl FnMut(&mut Self, &T)) {
        self.open(b'[');
        for (i, x) in xs.iter().enumerate() {
            self.line(i == 0);
            f(self, x);
        }
        self.close(b']', xs.is_empty());
    }

    /// A `Value` (its maps keep their keys sorted): arrays, objects and
    /// strings written here, the other scalars by `serde_json`. Through the
    /// serializer every key and string went through its escaping loop.
    pub fn value(&mut self, v: &serde_json::Value) -> serde_json::Result<()> {
        use serde_json::Value;
        match v {
            Value::String(s) => self.str(s),
            Value::Array(xs) => {
                self.open(b'[');
                for (i, x) in xs.iter().enumerate() {
                    self.line(i == 0);
                    self.value(x)?;
                }
                self.close(b']', xs.is_empty());
            }
            Value::Object(m) => {
                self.open(b'{');
                for (i, (k, x)) in m.iter().enumerate() {
                    self.line(i == 0);
                    self.str(k);
                    self.buf.extend_from_slice(b": ");
                    self.value(x)?;
                }
                self.close(b'}', m.is_empty());
            }
            scalar => self.serde(scalar)?,
        }
        Ok(())
    }

    /// Any other value through `serde_json`'s pretty serializer at this depth
    /// (for the rare, irregular parts).
    pub fn serde(&mut self, v: &impl serde::Serialize) -> serde_json::Result<()> {
        let f = super::json_pretty::Pretty::at(self.depth);
        v.serialize(&mut serde_json::Serializer::with_formatter(&mut self.buf, f))
    }
}

/// The keys of a kind of object written many times (a table row), in the
/// order written: what [`Text::key`] writes before each, made once (for the
/// depth the rows sit at) instead of once a row.
pub struct Keys<const N: usize> {
    names: [&'static str; N],
    /// The depth `text` was made for (`usize::MAX`: not yet made).
    depth: usize,
    text: Vec<u8>,
    /// Where each key's text ends in `text`.
    ends: [usize; N],
}

impl<const N: usize> Keys<N> {
    pub fn new(names: [&'static str; N]) -> Keys<N> {
        Keys { names, depth: usize::MAX, text: Vec::new(), ends: [0; N] }
    }

    #[cold]
    fn make(&mut self, depth: usize) {
        let mut t = Text::at(depth, 64 * N);
        for (i, name) in self.names.iter().enumerate() {
            t.key(i == 0, name);
            self.ends[i] = t.buf.len();
        }
        (self.text, self.depth) = (t.buf, depth);
    }
}

/// Whether `serde_json` writes `s` unchanged between its quotes: no control
/// character (below 0x20), no `"` and no `\` (it escapes nothing else).
/// Sixteen bytes are tested at a time without an early exit, which the
/// compiler turns into vector compares.
#[inline]
pub fn plain(s: &[u8]) -> bool {
    #[inline(always)]
    fn escaped(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }
    let mut chunks = s.chunks_exact(16);
    for c in &mut chunks {
        if c.iter().fold(false, |any, &b| any | escaped(b)) {
            return false;
        }
    }
    !chunks.remainder().iter().any(|&b| escaped(b))
}

#[cfg(test)]
mod tests {
    use super::{plain, Keys, Text};

    /// `plain` against `serde_json`'s own escaping: every byte value (as a
    /// character) at every position of strings of every length up to 40.
    #[test]
    fn plain_is_what_serde_leaves_alone() {
        let chars: Vec<char> = (0u8..=0x7f).map(char::from).chain(['\u{e9}', '\u{2028}', '\u{1f600}']).collect();
        for len in 0..40 {
            for pos in 0..len.max(1) {
                for &c in &chars {
                    let mut s: String = "a".repeat(len);
                    if len > 0 {
                        s.replace_range(pos..pos + 1, c.encode_utf8(&mut [0; 4]));
                    }
                    let quoted = serde_json::to_string(&s).unwrap();
                    assert_eq!(plain(s.as_bytes()), quoted[1..quoted.len() - 1] == s, "{s:?}");
                    let mut t = Text::at(0, 0);
                    t.str(&s);
                    assert_eq!(t.buf, quoted.as_bytes());
                }
            }
        }
    }

    /// Numbers, nulls, nesting and indentation past the one-piece padding,
    /// against `serde_json::to_string_pretty` of the same value (keys
    /// written in sorted order, as a `Value` map holds them).
    #[test]
    fn same_text_as_serde_pretty() {
        let floats = [0.0, -0.0, 1.5, 1e-7, 123456789.5, 1e300, f64::NAN, f64::INFINITY, f64::MIN_POSITIVE];
        fn nest(t: &mut Text, n: usize) {
            t.open(b'[');
            t.line(true);
            if n == 0 {
                t.str("x\"");
            } else {
                nest(t, n - 1);
            }
            t.line(false);
            t.serde(&serde_json::json!({"k": [1, {}], "z": []})).unwrap();
            t.close(b']', false);
        }
        let mut t = Text::at(0, 0);
        t.open(b'{');
        t.key(true, "deep");
        nest(&mut t, 45);
        t.key(false, "e");
        t.array(&[] as &[u64], |t, v| t.u64(*v));
        t.key(false, "f");
        t.array(&floats, |t, v| t.f64(*v));
        t.key(false, "i");
        t.array(&[i64::MIN, -1, 0, i64::MAX], |t, v| t.i64(*v));
        t.key(false, "o");
        t.array(&[None, Some(3u64)], |t, v| t.opt(*v, Text::u64));
        t.key(false, "u");
        // Objects of fixed keys at two depths (their text made again for the second).
        let mut keys = Keys::new(["a", "b"]);
        t.open(b'[');
        for (i, n) in [0u64, 1, 2].into_iter().enumerate() {
            t.line(i == 0);
            t.open(b'{');
            t.key_of(&mut keys, 0);
            t.u64(n);
            t.key_of(&mut keys, 1);
            if n == 2 {
                t.open(b'{');
                t.key_of(&mut keys, 0);
                t.null();
                t.key_of(&mut keys, 1);
                t.u64(n);
                t.close(b'}', false);
            } else {
                t.u64(u64::MAX);
            }
            t.close(b'}', false);
        }
        t.close(b']', false);
        t.close(b'}', false);
        let mut deep = serde_json::json!("x\"");
        for _ in 0..=45 {
            deep = serde_json::json!([deep, {"k": [1, {}], "z": []}]);
        }
        let v = serde_json::json!({
            "deep": deep,
            "e": [],
            "f": floats,
            "i": [i64::MIN, -1, 0, i64::MAX],
            "o": [null, 3],
            "u": [{"a": 0, "b": u64::MAX}, {"a": 1, "b": u64::MAX}, {"a": 2, "b": {"a": null, "b": 2}}],
        });
        assert_eq!(String::from_utf8(t.buf).unwrap(), serde_json::to_string_pretty(&v).unwrap());
        // Empty containers, and a value started deep (inside a pretty document).
        let mut e = Text::at(0, 0);
        e.open(b'{');
        e.close(b'}', true);
        assert_eq!(e.buf, b"{}");
        let mut d = Text::at(2, 0);
        d.array(&[1u64, 2], |t, v| t.u64(*v));
        assert_eq!(d.buf, b"[\n      1,\n      2\n    ]");
    }

    /// `Text::value` against `to_string_pretty` on nested documents with
    /// every kind of scalar, escapes in keys and strings, empty containers,
    /// at the top and one level deep.
    #[test]
    fn value_is_serde_pretty() {
        let mut deep = serde_json::json!([1, {"a": []}, {}]);
        for i in 0..40 {
            deep = if i % 2 == 0 { serde_json::json!({"k": deep, "e": {}, "l": [[], [{}], 3]}) } else { serde_json::json!([deep, null, "x\"\n"]) };
        }
        let docs = [
            serde_json::json!(null),
            serde_json::json!(true),
            serde_json::json!(-1.5e-7),
            serde_json::json!(u64::MAX),
            serde_json::json!(i64::MIN),
            serde_json::json!("s\u{1}\\"),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!({"b\"k": {"z": false, "a": [1, 2.5, "\u{e9}", null]}, "a": [[]], "\n": {}}),
            deep,
        ];
        for d in &docs {
            let mut t = Text::at(0, 0);
            t.value(d).unwrap();
            assert_eq!(String::from_utf8(t.buf).unwrap(), serde_json::to_string_pretty(d).unwrap());
            let mut t = Text::at(1, 0);
            t.value(d).unwrap();
            let doc = serde_json::to_string_pretty(&serde_json::json!({ "v": d })).unwrap();
            assert_eq!(format!("{{\n  \"v\": {}\n}}", String::from_utf8(t.buf).unwrap()), doc);
        }
    }
}
