//! The timeline both trace exporters ([`crate::chrome`], [`crate::perfetto`])
//! draw: which tracks each rank gets, which operation goes on which track, and
//! the arguments shown for each operation.
//!
//! Per rank (one trace process, pid = global rank):
//! - one track per CUDA stream for operations with a GPU span (slices);
//!   operations that overlap an earlier one on the same stream go to overflow
//!   tracks (`… (overlap 1)`), because trace viewers cannot draw overlapping,
//!   non-nested slices on one track;
//! - one track per CPU thread for operations known only by their enqueue time
//!   (`cpu_ts_ns`): instants;
//! - optionally one "communicators" track that repeats every timed operation
//!   labelled by its communicator, or by the caller's parallelism class
//!   ([`Enrich::class_label`]) — then it is called "parallelism" (thesis Fig. 4.3).
//!
//! Operations with neither a GPU span nor a CPU time are counted
//! ([`TraceSummary::untimed_ops`]) and not drawn.
//!
//! Arguments come from the table ([`op_args`]) and from an optional
//! [`Enrich`] supplied by the caller (bandwidths, bottleneck, parallelism …),
//! so this crate stays independent of the analyses. The name, category and
//! arguments of each drawn event, and how it is counted in the
//! [`TraceSummary`], are decided here too, once for both writers.

use commlens_core::{CollOp, OpTable, RankOps};
use std::borrow::Cow;
use std::collections::HashMap;

/// One argument value of a trace event.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    /// An address or handle: `"0x…"` in JSON, `pointer_value` in Perfetto.
    Ptr(u64),
}

impl From<&str> for ArgValue {
    fn from(s: &str) -> Self {
        ArgValue::Str(s.to_string())
    }
}
impl From<String> for ArgValue {
    fn from(s: String) -> Self {
        ArgValue::Str(s)
    }
}
impl From<f64> for ArgValue {
    fn from(v: f64) -> Self {
        ArgValue::Float(v)
    }
}
impl From<u64> for ArgValue {
    fn from(v: u64) -> Self {
        ArgValue::Uint(v)
    }
}
impl From<i64> for ArgValue {
    fn from(v: i64) -> Self {
        ArgValue::Int(v)
    }
}
impl From<bool> for ArgValue {
    fn from(v: bool) -> Self {
        ArgValue::Bool(v)
    }
}

/// Extra per-operation information computed elsewhere (bandwidths, bus factor,
/// efficiency, bottleneck link, parallelism type …). Any
/// `Fn(&CollOp) -> Vec<(&'static str, ArgValue)>` closure is an `Enrich`.
pub trait Enrich {
    /// Arguments appended after the table's own for `op`.
    fn args(&self, op: &CollOp) -> Vec<(&'static str, ArgValue)>;
    /// The same for the operation at index `i` of device `d` (the exporters
    /// know where each operation sits; the table stores them packed, so an
    /// operation's address does not say it).
    fn args_at(&self, _d: usize, _i: usize, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        self.args(op)
    }
    /// Label of `op` on the per-rank classification track (e.g. `"TP"`);
    /// `None` labels it with its communicator.
    fn class_label(&self, _op: &CollOp) -> Option<String> {
        None
    }
}

impl<F> Enrich for F
where
    F: Fn(&CollOp) -> Vec<(&'static str, ArgValue)>,
{
    fn args(&self, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        self(op)
    }
}

/// No enrichment: only the table's own arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEnrich;

impl Enrich for NoEnrich {
    fn args(&self, _op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        Vec::new()
    }
}

/// Options shared by both exporters.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Subtracted from every timestamp (ns). 0 keeps the source's clock
    /// (epoch or trace clock), so the export lines up with the source trace.
    pub time_offset_ns: i64,
    /// Adds the per-rank communicators/parallelism track.
    pub comm_track: bool,
    /// NVTX / profiler-step ranges (iterations, phases), drawn in one extra
    /// trace process `NVTX ranges` with a track per rank (lanes where they
    /// overlap without nesting).
    pub ranges: Vec<TimeRange>,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { time_offset_ns: 0, comm_track: true, ranges: Vec::new() }
    }
}

/// A named time range from a trace (NVTX push/pop or start/end, `ProfilerStep#N`).
#[derive(Debug, Clone, PartialEq)]
pub struct TimeRange {
    pub name: String,
    /// Same clock as the operations' GPU spans (the trace's).
    pub start_ns: i64,
    pub end_ns: i64,
    /// Global rank whose trace recorded it; `None` for job-wide ranges.
    pub rank: Option<u32>,
}

/// Tracks of the ranges process: (track name, indices into `ranges` in time
/// order). Each rank's ranges fill lanes greedily: a range goes to the first
/// lane whose last range has ended, so nested ranges (a phase inside an
/// iteration) land one lane further down and no track holds two slices at once.
pub(crate) fn range_tracks(ranges: &[TimeRange]) -> Vec<(String, Vec<usize>)> {
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].end_ns >= ranges[i].start_ns).collect();
    order.sort_by_key(|&i| (ranges[i].rank, ranges[i].start_ns, std::cmp::Reverse(ranges[i].end_ns)));
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let rank = ranges[order[i]].rank;
        // (indices, end of the lane's last range)
        let mut lanes: Vec<(Vec<usize>, i64)> = Vec::new();
        while i < order.len() && ranges[order[i]].rank == rank {
            let r = &ranges[order[i]];
            match lanes.iter_mut().find(|(_, end)| *end <= r.start_ns) {
                Some(lane) => {
                    lane.0.push(order[i]);
                    lane.1 = r.end_ns;
                }
                None => lanes.push((vec![order[i]], r.end_ns)),
            }
            i += 1;
        }
        let who = rank.map_or("all ranks".to_string(), |r| format!("rank {r}"));
        for (k, (idx, _)) in lanes.into_iter().enumerate() {
            let name = if k == 0 { who.clone() } else { format!("{who} · level {k}") };
            out.push((name, idx));
        }
    }
    out
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// Trace processes (one per rank).
    pub processes: usize,
    /// Tracks (threads) under the processes, overflow tracks included.
    pub tracks: usize,
    /// Overflow tracks created for overlapping operations on one stream (the
    /// communicators track's own overflow lanes are not counted).
    pub overflow_tracks: usize,
    /// Operations drawn as slices (GPU spans), not counting the comm track.
    pub slices: usize,
    /// Operations drawn as instants (CPU enqueue time only), not counting the comm track.
    pub instants: usize,
    /// Events on the communicators/parallelism tracks.
    pub comm_track_events: usize,
    /// Operations with no time at all (not drawn).
    pub untimed_ops: usize,
    /// NVTX / iteration ranges drawn.
    pub ranges: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// What a track shows; the order of the variants is the order of tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TrackKind {
    Gpu { stream: Option<u64> },
    Cpu { tid: u32 },
    Class,
}

#[derive(Debug, Clone)]
pub(crate) struct Track {
    pub kind: TrackKind,
    /// 0 for the main track, 1.. for overflow tracks of the same kind.
    pub lane: u32,
    pub name: String,
}

/// One drawn event: a slice (`end_ns = Some`) or an instant.
#[derive(Debug, Clone)]
pub(crate) struct Placed<'a> {
    /// Index into `table.per_rank[d]`.
    pub op: u32,
    pub track: u32,
    pub start_ns: i64,
    pub end_ns: Option<i64>,
    /// Name on the classification track (`None` on the other tracks).
    pub label: Option<Cow<'a, str>>,
}

/// Tracks and events of one rank; `events` sorted by track, then time.
#[derive(Debug, Default)]
pub(crate) struct RankLayout<'a> {
    pub tracks: Vec<Track>,
    pub events: Vec<Placed<'a>>,
    pub untimed: usize,
}

/// Trace process id of every device: its global rank, or past all ranks when unknown.
pub(crate) fn pids(table: &OpTable) -> Vec<u32> {
    let first_free = table.devices.iter().filter_map(|x| x.global_rank).max().map_or(0, |m| m + 1);
    (0..table.devices.len())
        .map(|d| table.devices[d].global_rank.unwrap_or(first_free.saturating_add(d as u32)))
        .collect()
}

/// Process name: `rank 3 (host:1234, GPU 1)`.
pub(crate) fn process_name(table: &OpTable, d: usize) -> String {
    let dev = &table.devices[d];
    let p = &table.processes[dev.proc.ix()];
    let rank = dev.global_rank.map_or_else(|| format!("device {d} (rank ?)"), |r| format!("rank {r}"));
    let gpu = dev.cuda_dev.map_or_else(|| "?".to_string(), |c| c.to_string());
    format!("{rank} ({}:{}, GPU {gpu})", p.host, p.pid)
}

/// Name of a communicator handle: its logical name, else `comm 0x…`.
pub(crate) fn comm_name<'a>(table: &'a OpTable, op: &CollOp) -> Cow<'a, str> {
    let c = &table.comms[op.comm.ix()];
    match c.logical {
        Some(l) => Cow::Borrowed(table.logical[l.ix()].name.as_str()),
        None => Cow::Owned(format!("comm {:#x}", c.ptr)),
    }
}

fn stream_label(s: u64) -> String {
    // Kineto/nsys streams are small ids, NCCL logs print cudaStream_t pointers.
    if s < 1 << 20 {
        format!("{s}")
    } else {
        format!("{s:#x}")
    }
}

fn track_name(kind: TrackKind, lane: u32, class_named: bool) -> String {
    let base = match kind {
        TrackKind::Gpu { stream: Some(s) } => format!("GPU stream {}", stream_label(s)),
        TrackKind::Gpu { stream: None } => "GPU (stream unknown)".to_string(),
        TrackKind::Cpu { tid } => format!("CPU thread {tid} (enqueue)"),
        TrackKind::Class if class_named => "parallelism".to_string(),
        TrackKind::Class => "communicators".to_string(),
    };
    if lane == 0 {
        base
    } else {
        format!("{base} (overlap {lane})")
    }
}

/// An event before its track is chosen.
struct Raw<'a> {
    kind: TrackKind,
    start: i64,
    end: Option<i64>,
    op: u32,
    label: Option<Cow<'a, str>>,
}

/// Lays out the operations of device `d`.
pub(crate) fn layout_rank<'a>(
    table: &'a OpTable,
    d: usize,
    enrich: &dyn Enrich,
    opts: &TraceOptions,
) -> RankLayout<'a> {
    let empty = RankOps::new();
    let ops = table.per_rank.get(d).unwrap_or(&empty);
    let off = opts.time_offset_ns;
    let mut raw: Vec<Raw<'a>> = Vec::new();
    let mut untimed = 0;
    let mut class_named = false;
    for (i, op) in ops.iter().enumerate() {
        let (kind, start, end) = match (op.gpu, op.cpu_ts_ns) {
            (Some(g), _) => {
                let s = g.start_ns.saturating_sub(off);
                (TrackKind::Gpu { stream: op.stream }, s, Some(g.end_ns.saturating_sub(off).max(s)))
            }
            (None, Some(t)) => (TrackKind::Cpu { tid: op.tid }, t.saturating_sub(off), None),
            (None, None) => {
                untimed += 1;
                continue;
            }
        };
        raw.push(Raw { kind, start, end, op: i as u32, label: None });
        if opts.comm_track {
            let label = match enrich.class_label(&op) {
                Some(l) => {
                    class_named = true;
                    Cow::Owned(l)
                }
                None => comm_name(table, &op),
            };
            raw.push(Raw { kind: TrackKind::Class, start, end, op: i as u32, label: Some(label) });
        }
    }
    raw.sort_unstable_by_key(|r| (r.kind, r.start, r.end, r.op));

    let mut out = RankLayout { untimed, ..RankLayout::default() };
    let mut track_ix: HashMap<(TrackKind, u32), u32> = HashMap::new();
    // Lanes of the current kind: end of the last slice on each.
    let mut lanes: Vec<i64> = Vec::new();
    let mut cur: Option<TrackKind> = None;
    for Raw { kind, start, end, op, label } in raw {
        if cur != Some(kind) {
            cur = Some(kind);
            lanes.clear();
        }
        let lane = match end {
            // Instants nest anywhere; they stay on the main track.
            None => 0,
            Some(e) => match lanes.iter().position(|&last| last <= start) {
                Some(l) => {
                    lanes[l] = e;
                    l as u32
                }
                None => {
                    lanes.push(e);
                    (lanes.len() - 1) as u32
                }
            },
        };
        let next = out.tracks.len() as u32;
        let t = *track_ix.entry((kind, lane)).or_insert(next);
        if t == next {
            out.tracks.push(Track { kind, lane, name: String::new() });
        }
        out.events.push(Placed { op, track: t, start_ns: start, end_ns: end, label });
    }
    for t in &mut out.tracks {
        t.name = track_name(t.kind, t.lane, class_named);
    }
    // Tracks were created kind by kind but lanes of one kind interleave with
    // instants of lane 0; order events by track, then time, for the writers.
    out.events.sort_unstable_by_key(|e| (e.track, e.start_ns, e.end_ns, e.op));
    out
}

/// Every argument the table has for an operation, in a fixed order.
pub fn op_args(table: &OpTable, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
    use ArgValue::*;
    let mut a: Vec<(&'static str, ArgValue)> = Vec::with_capacity(32);
    a.push(("kind", Str(op.kind.name().to_string())));
    a.push(("count", Uint(op.count)));
    a.push(("dtype", Str(op.dtype.name().to_string())));
    a.push(("bytes", Uint(op.bytes)));
    if let Some(r) = op.redop {
        a.push(("redop", Str(r.name().to_string())));
    }
    if let Some(r) = op.root {
        a.push(("root", Uint(r.into())));
    }
    if let Some(p) = op.peer {
        a.push(("peer", Uint(p.into())));
    }
    if let Some(x) = op.algo {
        a.push(("algorithm", Str(x.name().to_string())));
    }
    if let Some(x) = op.proto {
        a.push(("protocol", Str(x.name().to_string())));
    }
    if let Some((lo, hi)) = op.channels {
        a.push(("channels", Str(format!("{lo}..{hi}"))));
    }
    if let Some(s) = op.stream {
        a.push(("stream", if s < 1 << 20 { Uint(s) } else { Ptr(s) }));
    }
    a.push(("sendbuff", Ptr(op.sendbuff)));
    a.push(("recvbuff", Ptr(op.recvbuff)));
    a.push(("op_count", Uint(op.seq)));
    a.push(("comm_seq", Uint(op.comm_seq)));
    let c = &table.comms[op.comm.ix()];
    a.push(("comm", Str(comm_name(table, op).into_owned())));
    a.push(("comm_ptr", Ptr(c.ptr)));
    if let Some(id) = c.comm_id {
        a.push(("comm_id", Ptr(id)));
    }
    if let Some(n) = c.nranks {
        a.push(("nranks", Uint(n.into())));
    }
    if let Some(r) = c.rank {
        a.push(("comm_rank", Uint(r.into())));
    }
    if let Some(r) = table.devices[op.dev.ix()].global_rank {
        a.push(("global_rank", Uint(r.into())));
    }
    a.push(("cpu_tid", Uint(op.tid.into())));
    if let Some(t) = op.cpu_ts_ns {
        a.push(("cpu_ts_ns", Int(t)));
    }
    if let Some(g) = op.gpu {
        a.push(("gpu_start_ns", Int(g.start_ns)));
        a.push(("gpu_end_ns", Int(g.end_ns)));
    }
    if let Some(k) = &op.kernel {
        a.push(("kernel", Str(k.name.clone())));
        a.push(("grid", Str(format!("{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]))));
        a.push(("block", Str(format!("{}x{}x{}", k.block[0], k.block[1], k.block[2]))));
        a.push(("shared_mem_bytes", Uint(k.shared_mem_bytes.into())));
        a.push(("registers", Uint(k.registers.into())));
        a.push(("correlation_id", Uint(k.correlation_id)));
    }
    a.push(("source_line", Uint(op.line)));
    if op.recovered {
        a.push(("recovered", Bool(true)));
    }
    a
}

/// The table's arguments of `op` ([`op_args`]) followed by the enrichment's;
/// an enrichment argument replaces a table argument of the same name.
pub fn merged_args(table: &OpTable, op: &CollOp, enrich: &dyn Enrich) -> Vec<(&'static str, ArgValue)> {
    merge_args(table, op, enrich.args(op))
}

/// [`merged_args`] of the operation at index `i` of device `d`.
pub fn merged_args_at(table: &OpTable, d: usize, i: usize, op: &CollOp, enrich: &dyn Enrich) -> Vec<(&'static str, ArgValue)> {
    merge_args(table, op, enrich.args_at(d, i, op))
}

fn merge_args(table: &OpTable, op: &CollOp, extra: Vec<(&'static str, ArgValue)>) -> Vec<(&'static str, ArgValue)> {
    let mut a = op_args(table, op);
    if !extra.is_empty() {
        a.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        a.extend(extra);
    }
    a
}

/// Short arguments of a classification-track event.
pub(crate) fn class_args(table: &OpTable, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
    vec![
        ("kind", ArgValue::Str(op.kind.name().to_string())),
        ("comm", ArgValue::Str(comm_name(table, op).into_owned())),
        ("bytes", ArgValue::Uint(op.bytes)),
        ("op_count", ArgValue::Uint(op.seq)),
    ]
}

/// The operation behind an event of device `d`.
pub(crate) fn op_at(table: &OpTable, d: usize, op: u32) -> CollOp {
    table.per_rank[d].op(op as usize)
}

/// Name, category and arguments of a drawn event.
pub(crate) type Named<'x> = (&'x str, &'static str, Vec<(&'static str, ArgValue)>);

/// What both writers show for event `e` of device `d` (laid out in `lay`):
/// on the communicators track its label, category `comm` and the short
/// [`class_args`]; elsewhere the operation's kind and [`merged_args`], in
/// category `nccl` (GPU tracks) or `nccl_enqueue` (CPU tracks).
pub(crate) fn event_content<'x>(
    table: &OpTable,
    d: usize,
    lay: &RankLayout<'_>,
    e: &'x Placed<'_>,
    enrich: &dyn Enrich,
) -> Named<'x> {
    let op = &op_at(table, d, e.op);
    match (&e.label, lay.tracks[e.track as usize].kind) {
        (Some(l), _) => (l.as_ref(), "comm", class_args(table, op)),
        (None, TrackKind::Gpu { .. }) => (op.kind.name(), "nccl", merged_args_at(table, d, e.op as usize, op, enrich)),
        (None, _) => (op.kind.name(), "nccl_enqueue", merged_args_at(table, d, e.op as usize, op, enrich)),
    }
}

impl TraceSummary {
    /// Counts a track of a rank (overflow lanes of streams and threads too).
    pub(crate) fn count_track(&mut self, t: &Track) {
        self.tracks += 1;
        if t.lane > 0 && t.kind != TrackKind::Class {
            self.overflow_tracks += 1;
        }
    }

    /// Adds the counts of another part of the same trace (bytes are the writer's).
    pub(crate) fn add(&mut self, o: &TraceSummary) {
        self.processes += o.processes;
        self.tracks += o.tracks;
        self.overflow_tracks += o.overflow_tracks;
        self.slices += o.slices;
        self.instants += o.instants;
        self.comm_track_events += o.comm_track_events;
        self.untimed_ops += o.untimed_ops;
        self.ranges += o.ranges;
    }

    /// Counts an event of a rank: a communicators-track event, a slice or an instant.
    pub(crate) fn count_event(&mut self, e: &Placed<'_>) {
        match (e.label.is_some(), e.end_ns.is_some()) {
            (true, _) => self.comm_track_events += 1,
            (false, true) => self.slices += 1,
            (false, false) => self.instants += 1,
        }
    }
}

/// Devices in trace order (by process id).
pub(crate) fn device_order(pids: &[u32]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..pids.len()).collect();
    v.sort_by_key(|&d| (pids[d], d));
    v
}

/// Earliest timestamp any event will have (after the offset), if any.
pub(crate) fn min_time(table: &OpTable, opts: &TraceOptions) -> Option<i64> {
    table
        .ops()
        .filter_map(|op| op.gpu.map(|g| g.start_ns).or(op.cpu_ts_ns))
        .chain(opts.ranges.iter().map(|r| r.start_ns))
        .min()
        .map(|t| t.saturating_sub(opts.time_offset_ns))
}

/// Counts bytes passed to the inner writer.
pub(crate) struct Counting<W> {
    pub inner: W,
    pub n: u64,
}

impl<W: std::io::Write> Counting<W> {
    /// Flushes `w` and returns the bytes written through it so far.
    pub fn flush_count(w: &mut std::io::BufWriter<Self>) -> std::io::Result<u64> {
        std::io::Write::flush(w)?;
        Ok(w.get_ref().n)
    }
}

impl<W: std::io::Write> std::io::Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
