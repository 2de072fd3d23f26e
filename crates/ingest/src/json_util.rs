//! Shared machinery of the readers of NVIDIA's profiler-plugin outputs
//! ([`crate::inspector`], [`crate::example_plugin`]):
//!
//! * [`ObjectSplitter`]: a streaming, byte-level splitter that cuts any byte
//!   stream into top-level JSON objects, whatever surrounds them (JSON lines,
//!   a Chrome-trace array `[ {…}, {…}, {}]`, pretty-printed objects, stray
//!   text). Memory is bounded by one chunk plus one record. A `{` in column 0
//!   while a record is still open means that record was cut (a crash, a
//!   truncated copy): it is reported as broken and reading resumes there.
//! * [`parse_lenient`]: `serde_json` first, then a second try after quoting
//!   bare words (`"datatype": ncclFloat32`, `"Stream": 0x5020000567d0`, as
//!   older example plugins print them).
//! * [`PluginReport`], [`PluginError`], [`PluginOptions`]: what reading one
//!   file found, and why a file is not plugin output.
//! * `Reader` (crate-private): the read loop both readers share (split,
//!   parse leniently, count what is unusable, fail a file without records);
//!   each reader only decodes the objects of its own format.
//! * `table` (crate-private): `TableBuilder` (processes, devices,
//!   communicator handles and per-rank operations from plugin records, then
//!   `assemble`) and `load_files`/`load_one`, which read files into one table.

mod table;

pub(crate) use table::{load_files, load_one, HandleInfo, TableBuilder};

use crate::nccl_log::report::KindCounts;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const CHUNK: usize = 256 * 1024;
const SAMPLE: usize = 120;

/// Options shared by the plugin-output readers.
#[derive(Debug, Clone)]
pub struct PluginOptions {
    /// JSON objects larger than this are skipped and counted as malformed.
    pub max_record_bytes: usize,
    /// Host name for sources that do not record one (the example plugin
    /// writes none into its events); `?` when absent.
    pub host: Option<String>,
}

impl Default for PluginOptions {
    fn default() -> Self {
        PluginOptions { max_record_bytes: 1 << 20, host: None }
    }
}

/// Why a file could not be read as plugin output. Every variant names the file.
#[derive(Debug)]
pub enum PluginError {
    Io { path: PathBuf, source: io::Error },
    /// NUL bytes in the first block.
    Binary { path: PathBuf, expected: &'static str },
    /// No record of the expected format at all; `found` says what was there.
    NotPluginOutput { path: PathBuf, expected: &'static str, found: String },
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            PluginError::Binary { path, expected } => {
                write!(f, "{}: binary data (NUL bytes at the start), expected {expected}", path.display())
            }
            PluginError::NotPluginOutput { path, expected, found } => {
                write!(f, "{}: not {expected}: {found}", path.display())
            }
        }
    }
}

impl std::error::Error for PluginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PluginError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What reading one plugin-output file found. Nothing is dropped silently:
/// every JSON object is counted by kind in [`PluginReport::kinds`], every
/// unusable object or text in [`PluginReport::malformed`] (with line numbers,
/// byte offsets and what was expected).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PluginReport {
    pub path: String,
    /// `nccl-inspector` or `nccl-example-plugin`.
    pub format: &'static str,
    pub bytes: u64,
    pub lines: u64,
    /// Top-level JSON objects found, usable or not.
    pub objects: u64,
    /// Objects of the expected format (Inspector records with a `header`,
    /// trace events with `cat` and `ph`).
    pub records: u64,
    /// Records by kind (`coll_perf`, `dump_stats`; `COLL`, `NET`, `GPU`, …).
    pub kinds: KindCounts,
    pub ops: u64,
    /// Objects that parsed only after quoting bare words (`ncclFloat32`, `0x…`).
    pub repaired_objects: u64,
    /// `{}` objects (the example plugin closes its array with one).
    pub empty_objects: u64,
    /// Broken objects, invalid JSON, records missing required fields and
    /// text outside any object, by reason, with `(line, "byte N: …")` samples.
    pub malformed: KindCounts,
    /// Operations with a [`commlens_core::GpuSpan`].
    pub gpu_spans: u64,
    /// Inspector: spans of non-verbose records, placed to end at the dump time.
    pub gpu_spans_at_dump_time: u64,
    /// Example plugin: operations whose kernels logged a start clock but
    /// `StopGpuClk 0` (NVIDIA/nccl PR #1973): no span.
    pub gpu_stop_missing: u64,
    /// Example plugin: COLL/P2P end events that closed no open operation.
    pub unmatched_ends: u64,
    /// Example plugin: operations whose end event never came (kept, no CPU end).
    pub unclosed_ops: u64,
    /// Inspector ≥ v4.2 `dump_stats`: records dropped by the plugin's ring.
    pub dropped_records: u64,
    /// Inspector: operations by `*_timing_source` (`kernel_gpu`, …, `(absent)`).
    pub timing_sources: KindCounts,
    pub warnings: Vec<String>,
}

impl PluginReport {
    pub(crate) fn new(path: &Path, format: &'static str) -> Self {
        PluginReport { path: path.display().to_string(), format, ..Default::default() }
    }

    /// Objects or text that carried information commlens could not use.
    pub fn skipped(&self) -> u64 {
        self.malformed.total()
    }

    /// Counts one problem; `detail` (what was expected, what was there) is
    /// only built for the first few of each kind.
    pub(crate) fn problem(&mut self, kind: &str, line: u64, offset: u64, detail: impl FnOnce() -> String) {
        self.malformed.add(kind, line, || format!("byte {offset}: {}", detail()));
    }

    /// The problem samples as `file:line: kind: byte N: detail` lines.
    pub fn problems(&self) -> Vec<String> {
        let kinds = self.malformed.kinds.iter();
        kinds.flat_map(|k| k.samples.iter().map(move |(line, s)| format!("{}:{line}: {}: {s}", self.path, k.kind))).collect()
    }
}

/// One piece of the input: a complete object, a broken one, or stray text.
#[derive(Debug)]
pub enum Piece<'a> {
    Object { bytes: &'a [u8], line: u64, offset: u64 },
    Broken { line: u64, offset: u64, reason: &'static str, sample: String },
    Stray { line: u64, offset: u64, sample: String },
}

enum Ev {
    Object,
    Broken(&'static str),
    Stray((u64, u64, Vec<u8>)),
}

/// The object being collected.
#[derive(Default)]
struct Rec {
    depth: u32,
    in_str: bool,
    esc: bool,
    bytes: Vec<u8>,
    /// Start in `buf` of the part not yet copied to `bytes`.
    seg: usize,
    line: u64,
    off: u64,
    broken: Option<&'static str>,
    overlong: bool,
}

/// Streaming splitter of top-level JSON objects (see the module docs).
pub struct ObjectSplitter<R> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Absolute offset of `buf[0]`.
    base: u64,
    line: u64,
    at_line_start: bool,
    last_byte: u8,
    rec: Rec,
    /// Text outside any object on the current line: (line, offset, sample).
    stray: Option<(u64, u64, Vec<u8>)>,
    max_record: usize,
    binary: bool,
    /// Bytes consumed from the source.
    pub bytes_read: u64,
}

impl<R: Read> ObjectSplitter<R> {
    pub fn new(src: R, max_record: usize) -> Self {
        ObjectSplitter {
            src,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            base: 0,
            line: 1,
            at_line_start: true,
            last_byte: b'\n',
            rec: Rec::default(),
            stray: None,
            max_record: max_record.max(64),
            binary: false,
            bytes_read: 0,
        }
    }

    /// Whether the first block holds NUL bytes (reads it if not read yet).
    pub fn binary(&mut self) -> io::Result<bool> {
        if self.bytes_read == 0 && !self.eof {
            self.refill()?;
        }
        Ok(self.binary)
    }

    /// Lines seen so far (a last line without `\n` counts).
    pub fn lines(&self) -> u64 {
        if self.bytes_read == 0 { 0 } else { self.line - (self.last_byte == b'\n') as u64 }
    }

    fn refill(&mut self) -> io::Result<()> {
        (self.base, self.pos, self.end, self.rec.seg) = (self.base + self.end as u64, 0, 0, 0);
        loop {
            match self.src.read(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
                Ok(n) => {
                    if self.bytes_read == 0 {
                        self.binary = self.buf[..n.min(4096)].contains(&0);
                    }
                    (self.eof, self.end) = (n == 0, n);
                    self.bytes_read += n as u64;
                    return Ok(());
                }
            }
        }
    }

    /// Appends `buf[seg..upto]` to the open record, unless it grew too long.
    fn flush_segment(&mut self, upto: usize) {
        let r = &mut self.rec;
        if !r.overlong && r.bytes.len() + (upto - r.seg) > self.max_record {
            (r.overlong, r.bytes) = (true, Vec::new());
        } else if !r.overlong {
            r.bytes.extend_from_slice(&self.buf[r.seg..upto]);
        }
        r.seg = upto;
    }

    fn start_record(&mut self, i: usize) {
        let mut bytes = std::mem::take(&mut self.rec.bytes);
        bytes.clear();
        let (line, off) = (self.line, self.base + i as u64);
        self.rec = Rec { depth: 1, bytes, seg: i, line, off, ..Rec::default() };
    }

    /// Consumes the byte at `pos`.
    fn advance(&mut self, b: u8) {
        self.pos += 1;
        (self.at_line_start, self.last_byte) = (b == b'\n', b);
        self.line += (b == b'\n') as u64;
    }

    /// The next piece, or `None` at the end of the input.
    pub fn next_piece(&mut self) -> io::Result<Option<Piece<'_>>> {
        let ev = loop {
            if self.pos == self.end {
                if self.rec.depth > 0 {
                    self.flush_segment(self.end);
                }
                if !self.eof {
                    self.refill()?;
                    continue;
                }
                if std::mem::take(&mut self.rec.depth) > 0 {
                    break Ev::Broken("the input ends inside this object (truncated)");
                }
                match self.stray.take() {
                    Some(s) => break Ev::Stray(s),
                    None => return Ok(None),
                }
            }
            let (i, b, col0) = (self.pos, self.buf[self.pos], self.at_line_start);
            let r = &mut self.rec;
            if r.depth == 0 {
                match (b, self.stray.take()) {
                    (b'{', Some(s)) => break Ev::Stray(s),
                    (b'{', None) => self.start_record(i),
                    (b'\n', Some(s)) => {
                        self.advance(b);
                        break Ev::Stray(s);
                    }
                    (b'\n' | b' ' | b'\t' | b'\r' | b'[' | b']' | b',', None) => {}
                    (_, s) => {
                        let mut s = s.unwrap_or_else(|| (self.line, self.base + i as u64, Vec::new()));
                        if s.2.len() < SAMPLE {
                            s.2.push(b);
                        }
                        self.stray = Some(s);
                    }
                }
            } else if r.in_str && b == b'\n' {
                r.broken.get_or_insert("a line break inside a string: the object was cut");
                r.in_str = false;
            } else if r.in_str {
                (r.esc, r.in_str) = (!r.esc && b == b'\\', r.esc || b != b'"');
            } else if b == b'"' {
                r.in_str = true;
            } else if b == b'{' && col0 {
                // A new object in column 0 while this one is open: it was cut.
                self.flush_segment(i);
                self.rec.depth = 0;
                break Ev::Broken("a new object starts in column 0 before this one closed (cut)");
            } else if b == b'{' {
                r.depth += 1;
            } else if b == b'}' {
                r.depth -= 1;
                if r.depth == 0 {
                    self.advance(b);
                    self.flush_segment(i + 1);
                    break match (self.rec.overlong, self.rec.broken) {
                        (true, _) => Ev::Broken("object longer than the record limit (skipped)"),
                        (false, Some(why)) => Ev::Broken(why),
                        (false, None) => Ev::Object,
                    };
                }
            }
            self.advance(b);
        };
        let sample = |b: &[u8]| crate::bytes::sample(b, SAMPLE);
        Ok(Some(match ev {
            Ev::Object => Piece::Object { bytes: &self.rec.bytes, line: self.rec.line, offset: self.rec.off },
            Ev::Broken(reason) => {
                Piece::Broken { line: self.rec.line, offset: self.rec.off, reason, sample: sample(&self.rec.bytes) }
            }
            Ev::Stray((line, offset, s)) => Piece::Stray { line, offset, sample: sample(&s) },
        }))
    }
}

/// Parses one object: strictly first, then after [`quote_bare_words`].
/// Returns the value and whether the repair was needed; the error is that of
/// the strict parse (its line and column refer to `bytes`).
pub fn parse_lenient(bytes: &[u8], scratch: &mut Vec<u8>) -> Result<(Value, bool), serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok((v, false)),
        Err(first) => {
            scratch.clear();
            if !quote_bare_words(bytes, scratch) {
                return Err(first);
            }
            serde_json::from_slice(scratch).map(|v| (v, true)).map_err(|_| first)
        }
    }
}

fn is_delim(b: u8) -> bool {
    matches!(b, b'{' | b'}' | b'[' | b']' | b':' | b',' | b' ' | b'\t' | b'\r' | b'\n' | b'"')
}

/// Whether a bare token is a JSON literal or number (`true`, `-1.5e3`; not `0x50`, `nan`).
fn is_json_scalar(t: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(t).is_ok()
}

/// Copies `src` to `out`, wrapping bare words that are not JSON scalars in
/// quotes (`ncclFloat32` → `"ncclFloat32"`). Returns whether anything changed.
pub fn quote_bare_words(src: &[u8], out: &mut Vec<u8>) -> bool {
    let (mut changed, mut in_str, mut esc) = (false, false, false);
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        if in_str {
            out.push(b);
            (esc, in_str) = (!esc && b == b'\\', esc || b != b'"');
            i += 1;
        } else if is_delim(b) {
            in_str = b == b'"';
            out.push(b);
            i += 1;
        } else {
            let start = i;
            while i < src.len() && !is_delim(src[i]) {
                i += 1;
            }
            let tok = &src[start..i];
            if is_json_scalar(tok) {
                out.extend_from_slice(tok);
            } else {
                changed = true;
                out.push(b'"');
                for &c in tok {
                    if c == b'\\' {
                        out.push(b'\\');
                    }
                    out.push(c);
                }
                out.push(b'"');
            }
        }
    }
    changed
}

/// An unsigned integer from a number (integral), a decimal string or a hex string.
pub fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).and_then(|f| u64::try_from(f as i128).ok())),
        Value::String(s) => crate::bytes::dec_u64(s.as_bytes()).or_else(|| crate::bytes::pointer(s.as_bytes())),
        _ => None,
    }
}

pub fn as_u32(v: &Value) -> Option<u32> {
    as_u64(v).and_then(|x| u32::try_from(x).ok())
}

pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Keys of an object, for error messages (`a, b, c`).
pub fn keys_of(v: &Value) -> String {
    match v.as_object() {
        Some(m) => m.keys().take(8).map(String::as_str).collect::<Vec<_>>().join(", "),
        None => "(not an object)".to_string(),
    }
}

/// Whether an object's bytes are `{}` (with optional whitespace).
pub fn is_empty_object(bytes: &[u8]) -> bool {
    bytes.iter().filter(|b| !b.is_ascii_whitespace()).count() == 2
}

/// Opens a file (gzip detected by magic bytes).
pub(crate) fn open(path: &Path) -> Result<Box<dyn Read + Send>, PluginError> {
    crate::lines::open_maybe_gz(path).map_err(|e| PluginError::Io { path: path.to_path_buf(), source: e })
}

/// What sets one plugin-output format apart for [`Reader::read`]: its name
/// and the words its reports and errors use.
pub(crate) struct Reader {
    /// [`PluginReport::format`].
    pub format: &'static str,
    /// What a file of the format holds, for [`PluginError`]s.
    pub expected: &'static str,
    /// One object of the format (`a JSON object`), in problem details.
    pub object: &'static str,
    /// Problem kinds of broken objects and of text outside any object.
    pub broken: &'static str,
    pub stray: &'static str,
    /// What a record has (`a header`), for files without one.
    pub record_has: &'static str,
}

impl Reader {
    /// Streams the JSON objects of one file to `on_object` (with the report,
    /// and the line and byte offset where the object starts), in file order.
    /// Broken objects, invalid JSON and stray text are counted in the report
    /// with their line, byte offset and what was expected; `{}` objects are
    /// counted and skipped. `on_object` counts the records it accepts in
    /// [`PluginReport::records`]: a file without one is an error that says
    /// what the first object held instead.
    pub fn read(
        &self,
        path: &Path,
        src: impl Read,
        opts: &PluginOptions,
        on_object: &mut dyn FnMut(&mut PluginReport, &Value, u64, u64),
    ) -> Result<PluginReport, PluginError> {
        let mut report = PluginReport::new(path, self.format);
        let mut sp = ObjectSplitter::new(src, opts.max_record_bytes);
        let mut scratch = Vec::new();
        let mut first: Option<String> = None;
        let io_err = |e| PluginError::Io { path: path.to_path_buf(), source: e };
        if sp.binary().map_err(io_err)? {
            return Err(PluginError::Binary { path: path.to_path_buf(), expected: self.expected });
        }
        while let Some(piece) = sp.next_piece().map_err(io_err)? {
            let (bytes, line, offset) = match piece {
                Piece::Object { bytes, line, offset } => (bytes, line, offset),
                Piece::Broken { line, offset, reason, sample } => {
                    report.problem(self.broken, line, offset, || format!("{reason}: `{sample}`"));
                    continue;
                }
                Piece::Stray { line, offset, sample } => {
                    report.problem(self.stray, line, offset, || format!("expected {}, got `{sample}`", self.object));
                    continue;
                }
            };
            report.objects += 1;
            if is_empty_object(bytes) {
                report.empty_objects += 1;
                continue;
            }
            let v = match parse_lenient(bytes, &mut scratch) {
                Ok((v, repaired)) => {
                    report.repaired_objects += repaired as u64;
                    v
                }
                Err(e) => {
                    report.problem("invalid JSON", line + e.line() as u64 - 1, offset, || {
                        format!("expected {} ({e}): `{}`", self.object, crate::bytes::sample(bytes, 120))
                    });
                    continue;
                }
            };
            if first.is_none() {
                first = Some(format!("the first JSON object (line {line}) has keys {}", keys_of(&v)));
            }
            on_object(&mut report, &v, line, offset);
        }
        report.bytes = sp.bytes_read;
        report.lines = sp.lines();
        if report.records == 0 {
            let found = first.unwrap_or_else(|| {
                let text = report
                    .malformed
                    .kinds
                    .first()
                    .and_then(|k| k.samples.first())
                    .map(|(l, s)| format!(" (line {l}: {s})"));
                format!("no JSON object in {} line(s){}", report.lines, text.unwrap_or_default())
            });
            let found = if report.objects > 0 {
                format!("none of its {} JSON objects has {}; {found}", report.objects, self.record_has)
            } else {
                found
            };
            return Err(PluginError::NotPluginOutput { path: path.to_path_buf(), expected: self.expected, found });
        }
        Ok(report)
    }
}

/// Which NVIDIA plugin wrote a file, judged from its first JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginFormat {
    Inspector,
    ExamplePlugin,
}

/// Looks at the first JSON object of a file: a `header` key means Inspector
/// output, `ph`/`cat` keys an example-plugin trace; `None` otherwise.
pub fn sniff_format(path: &Path) -> Result<Option<PluginFormat>, PluginError> {
    let mut sp = ObjectSplitter::new(open(path)?, 1 << 20);
    let io_err = |e| PluginError::Io { path: path.to_path_buf(), source: e };
    for _ in 0..16 {
        match sp.next_piece().map_err(io_err)? {
            None => return Ok(None),
            Some(Piece::Object { bytes, .. }) => {
                let Ok((v, _)) = parse_lenient(bytes, &mut Vec::new()) else { continue };
                if v.get("header").is_some() {
                    return Ok(Some(PluginFormat::Inspector));
                }
                if v.get("ph").is_some() && v.get("cat").is_some() {
                    return Ok(Some(PluginFormat::ExamplePlugin));
                }
            }
            Some(_) => {}
        }
    }
    Ok(None)
}
