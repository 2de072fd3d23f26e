//! Chrome trace JSON (the `{"traceEvents": […]}` format that Perfetto's UI and
//! `chrome://tracing` open), written as a stream: one event at a time through
//! a `BufWriter`, never the whole document in memory ([`write_chrome_trace_par`] renders
//! a window of ranks on every core and holds their text until it is written in order).
//!
//! Layout (see [`crate::timeline`]): one process per rank (`pid` = global
//! rank, named `rank 3 (host:pid, GPU 1)` by `process_name`, ordered by
//! `process_sort_index`), one thread per track (`tid` = 1, 2, … in track
//! order, named by `thread_name`). GPU operations are complete events
//! (`"ph":"X"`), CPU-only operations thread-scoped instants (`"ph":"i"`).
//! Times are µs written as decimal text with three decimals, so nanoseconds
//! survive exactly in the file (viewers parse them as doubles).
//!
//! Every argument of the operation is in `args` ([`crate::timeline::op_args`],
//! then the caller's [`Enrich`] ones, which win on a name clash); addresses
//! are `"0x…"` strings.

use crate::timeline::{
    device_order, event_content, layout_rank, pids, process_name, range_tracks, ArgValue, Counting, Enrich,
    TraceOptions, TraceSummary,
};
use commlens_core::OpTable;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes `table` as Chrome trace JSON to `out` (buffered here; pass the raw
/// file or socket). Returns what was written.
pub fn write_chrome_trace<W: Write>(
    table: &OpTable,
    enrich: &dyn Enrich,
    opts: &TraceOptions,
    out: W,
) -> io::Result<TraceSummary> {
    let (mut w, pids) = begin(table, opts, out)?;
    let mut sum = TraceSummary::default();
    for d in device_order(&pids) {
        w.rank(table, d, pids[d], enrich, opts, &mut sum)?;
    }
    w.ranges(&pids, opts, sum)
}

/// The buffered event writer with the trace's header written, and each device's pid.
fn begin<W: Write>(table: &OpTable, opts: &TraceOptions, out: W) -> io::Result<(JsonEvents<BufWriter<Counting<W>>>, Vec<u32>)> {
    let mut w = JsonEvents { w: BufWriter::with_capacity(1 << 16, Counting { inner: out, n: 0 }), first: true };
    w.header(table, opts)?;
    Ok((w, pids(table)))
}

/// Ranks rendered per task by [`write_chrome_trace_par`] before they are written in order:
/// bounds the memory held to this many ranks' text.
const PAR_WINDOW: usize = 256;

/// [`write_chrome_trace`] with the ranks rendered on every core (each rank's events into its
/// own buffer, written in trace order): the same bytes. Needs an enrichment that threads can
/// share.
pub fn write_chrome_trace_par<W: Write>(
    table: &OpTable,
    enrich: &(dyn Enrich + Sync),
    opts: &TraceOptions,
    out: W,
) -> io::Result<TraceSummary> {
    use rayon::prelude::*;
    let (mut w, pids) = begin(table, opts, out)?;
    let mut sum = TraceSummary::default();
    let order = device_order(&pids);
    for window in order.chunks(PAR_WINDOW) {
        let parts: Vec<io::Result<(Vec<u8>, TraceSummary)>> = window
            .par_iter()
            .map(|&d| {
                // Not first: every event of the block starts with its separator.
                let mut r = JsonEvents { w: Vec::new(), first: false };
                let mut s = TraceSummary::default();
                r.rank(table, d, pids[d], enrich, opts, &mut s)?;
                Ok((r.w, s))
            })
            .collect();
        for p in parts {
            let (bytes, s) = p?;
            // The document's first event has no comma before it.
            let body = if w.first { bytes.strip_prefix(b",").unwrap_or(&bytes) } else { &bytes[..] };
            w.first &= bytes.is_empty();
            w.w.write_all(body)?;
            sum.add(&s);
        }
    }
    w.ranges(&pids, opts, sum)
}

/// [`write_chrome_trace_par`] into a new file at `path`.
pub fn write_chrome_trace_par_file(
    table: &OpTable,
    enrich: &(dyn Enrich + Sync),
    opts: &TraceOptions,
    path: &Path,
) -> io::Result<TraceSummary> {
    write_chrome_trace_par(table, enrich, opts, std::fs::File::create(path)?)
}

impl<W: Write> JsonEvents<BufWriter<Counting<W>>> {
    /// The ranges process (when there are ranges), the closing bracket, and the byte count.
    fn ranges(mut self, pids: &[u32], opts: &TraceOptions, mut sum: TraceSummary) -> io::Result<TraceSummary> {
        let w = &mut self;
        if !opts.ranges.is_empty() {
            // One more process after the ranks: the NVTX / iteration ranges.
            let pid = pids.iter().max().map_or(0, |m| m.saturating_add(1));
            w.meta(pid, 0, "process_name", "name", &ArgValue::Str("NVTX ranges".into()))?;
            w.meta(pid, 0, "process_sort_index", "sort_index", &ArgValue::Uint(pid.into()))?;
            for (k, (name, idx)) in range_tracks(&opts.ranges).into_iter().enumerate() {
                let tid = k as u32 + 1;
                w.meta(pid, tid, "thread_name", "name", &ArgValue::Str(name))?;
                w.meta(pid, tid, "thread_sort_index", "sort_index", &ArgValue::Uint(tid.into()))?;
                for i in idx {
                    let r = &opts.ranges[i];
                    let s = r.start_ns - opts.time_offset_ns;
                    w.event(&r.name, "nvtx", pid, tid, s, Some(r.end_ns - opts.time_offset_ns), &[])?;
                    sum.ranges += 1;
                }
            }
        }
        w.w.write_all(b"\n]}\n")?;
        sum.bytes = Counting::flush_count(&mut w.w)?;
        Ok(sum)
    }
}

/// [`write_chrome_trace`] into a new file at `path`.
pub fn write_chrome_trace_file(
    table: &OpTable,
    enrich: &dyn Enrich,
    opts: &TraceOptions,
    path: &Path,
) -> io::Result<TraceSummary> {
    write_chrome_trace(table, enrich, opts, std::fs::File::create(path)?)
}

/// Events as JSON into `w` (the file's buffered writer, or one rank's buffer).
struct JsonEvents<W: Write> {
    w: W,
    first: bool,
}

impl<W: Write> JsonEvents<W> {
    /// One rank's process: its names, its tracks and their events.
    fn rank(&mut self, table: &OpTable, d: usize, pid: u32, enrich: &dyn Enrich, opts: &TraceOptions, sum: &mut TraceSummary) -> io::Result<()> {
        let w = self;
        sum.processes += 1;
        w.meta(pid, 0, "process_name", "name", &ArgValue::Str(process_name(table, d)))?;
        w.meta(pid, 0, "process_sort_index", "sort_index", &ArgValue::Uint(pid.into()))?;
        let lay = layout_rank(table, d, enrich, opts);
        sum.untimed_ops += lay.untimed;
        for (k, t) in lay.tracks.iter().enumerate() {
            let tid = k as u32 + 1;
            w.meta(pid, tid, "thread_name", "name", &ArgValue::Str(t.name.clone()))?;
            w.meta(pid, tid, "thread_sort_index", "sort_index", &ArgValue::Uint(tid.into()))?;
            sum.count_track(t);
        }
        for e in &lay.events {
            let (name, cat, args) = event_content(table, d, &lay, e, enrich);
            w.event(name, cat, pid, e.track + 1, e.start_ns, e.end_ns, &args)?;
            sum.count_event(e);
        }
        Ok(())
    }

    fn header(&mut self, table: &OpTable, opts: &TraceOptions) -> io::Result<()> {
        let w = &mut self.w;
        w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"commlens ")?;
        w.write_all(env!("CARGO_PKG_VERSION").as_bytes())?;
        w.write_all(b"\",\"sources\":")?;
        json_str(w, &table.sources.join("; "))?;
        write!(w, ",\"time_offset_ns\":\"{}\"}},\n\"traceEvents\":[", opts.time_offset_ns)?;
        Ok(())
    }

    fn sep(&mut self) -> io::Result<()> {
        if self.first {
            self.first = false;
            self.w.write_all(b"\n")
        } else {
            self.w.write_all(b",\n")
        }
    }

    fn meta(&mut self, pid: u32, tid: u32, name: &str, key: &str, v: &ArgValue) -> io::Result<()> {
        self.sep()?;
        let w = &mut self.w;
        write!(w, "{{\"name\":\"{name}\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"{key}\":")?;
        json_value(w, v)?;
        w.write_all(b"}}")
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        name: &str,
        cat: &str,
        pid: u32,
        tid: u32,
        start_ns: i64,
        end_ns: Option<i64>,
        args: &[(&'static str, ArgValue)],
    ) -> io::Result<()> {
        self.sep()?;
        let w = &mut self.w;
        w.write_all(b"{\"name\":")?;
        json_str(w, name)?;
        write!(w, ",\"cat\":\"{cat}\",")?;
        match end_ns {
            Some(end) => {
                w.write_all(b"\"ph\":\"X\",\"ts\":")?;
                write_us(w, start_ns as i128)?;
                w.write_all(b",\"dur\":")?;
                write_us(w, end as i128 - start_ns as i128)?;
            }
            None => {
                w.write_all(b"\"ph\":\"i\",\"s\":\"t\",\"ts\":")?;
                write_us(w, start_ns as i128)?;
            }
        }
        write!(w, ",\"pid\":{pid},\"tid\":{tid},\"args\":{{")?;
        for (i, (k, v)) in args.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            json_str(w, k)?;
            w.write_all(b":")?;
            json_value(w, v)?;
        }
        w.write_all(b"}}")
    }
}

/// Nanoseconds as microseconds with exactly three decimals (`-1.234`).
fn write_us<W: Write>(w: &mut W, ns: i128) -> io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    write!(w, "{sign}{}.{:03}", a / 1000, a % 1000)
}

fn json_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(w, s).map_err(io::Error::from)
}

fn json_value<W: Write>(w: &mut W, v: &ArgValue) -> io::Result<()> {
    match v {
        ArgValue::Bool(b) => w.write_all(if *b { b"true" } else { b"false" }),
        ArgValue::Int(x) => write!(w, "{x}"),
        ArgValue::Uint(x) => write!(w, "{x}"),
        ArgValue::Float(x) => serde_json::to_writer(w, x).map_err(io::Error::from),
        ArgValue::Str(s) => json_str(w, s),
        ArgValue::Ptr(p) => write!(w, "\"{p:#x}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(ns: i128) -> String {
        let mut v = Vec::new();
        write_us(&mut v, ns).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn microseconds_keep_nanoseconds() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(1), "0.001");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(-1_500), "-1.500");
        assert_eq!(us(1_700_000_000_123_456_789), "1700000000123456.789");
        assert_eq!(us(i64::MIN as i128), "-9223372036854775.808");
    }

    #[test]
    fn values() {
        let mut v = Vec::new();
        for a in [
            ArgValue::Ptr(0x1461be300000),
            ArgValue::Str("a\"b".into()),
            ArgValue::Float(f64::NAN),
            ArgValue::Float(1.5),
            ArgValue::Int(-3),
        ] {
            json_value(&mut v, &a).unwrap();
            v.push(b' ');
        }
        assert_eq!(String::from_utf8(v).unwrap(), "\"0x1461be300000\" \"a\\\"b\" null 1.5 -3 ");
    }
}
