//! Reader of the dumps of NVIDIA's example profiler plugin
//! (`plugins/profiler/example`, formerly `ext-profiler/example`;
//! `NCCL_PROFILE_DUMP_FILE`): Chrome-trace JSON arrays of async `b`/`e`
//! events, profiler API v3 to v6 event sets.
//!
//! The dump is not always strict JSON: older plugins print `"datatype":
//! ncclFloat32` and `"Stream": 0x…` unquoted, the array ends with `{}]`, and
//! copies of it get cut. Events are therefore split by the tolerant streaming
//! splitter of [`crate::json_util`] and parsed one by one, quoting bare words
//! when strict parsing fails; memory stays bounded by one event. That read
//! loop, its problem counting and the loading of several files into one table
//! are shared with [`crate::inspector`] (in `json_util`); this module owns
//! the decoding of the events into [`TraceOp`]s and table rows.
//!
//! The plugin writes events nested: a `COLL`/`P2P` begin event, its children
//! (`GPU` `KernelCh` events with `StartGpuClk`/`StopGpuClk`, `PROXY`, `NET`),
//! then its end event. One [`TraceOp`] is made per `COLL`/`P2P` begin:
//! * `SeqNum` → `seq` (P2P events have none: the handle's op number),
//!   `CommHash` → `comm_id`, `Rank` → rank in the communicator, `Peer`,
//!   `Count`, `Datatype`, `Algorithm`, `Protocol`;
//! * `channels`: lowest..highest `KernelCh` channel when kernel events were
//!   recorded, else `0..nChannels-1` (`nMaxChannels` in v3) for collectives;
//! * `root` and `stream` from the `COLL_API`/`P2P_API` begin event just before;
//! * `cpu_ts_ns`: the begin event's `ts` (µs on the plugin's own clock, which
//!   starts near process start; not an epoch time), when not `0.0` (nccl#1961);
//! * GPU span: earliest `StartGpuClk` to latest `StopGpuClk` of its kernel
//!   channels (GPU global timer, ns) when every channel has a stop clock; a
//!   stop of 0 (PR nccl#1973) leaves the span out and is counted in
//!   [`PluginReport::gpu_stop_missing`] (the start stays in [`TraceOp`]).
//!
//! The events carry no host name: [`PluginOptions::host`] supplies one.
//! Every event is counted by category in [`PluginReport::kinds`].

use crate::json_util::{
    self, as_f64, as_u32, as_u64, keys_of, HandleInfo, PluginError, PluginOptions, PluginReport, Reader, TableBuilder,
};
use commlens_core::{Algorithm, CollOp, DataType, GpuSpan, OpKind, OpTable, Protocol};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The words of example-plugin reports and errors; the read loop is shared.
const READER: Reader = Reader {
    format: "nccl-example-plugin",
    expected: "an NCCL example-profiler-plugin trace (Chrome trace events with \"cat\" and \"ph\")",
    object: "a JSON event object",
    broken: "broken event",
    stray: "text outside any event",
    record_has: "cat and ph",
};

/// One `COLL` or `P2P` operation of the trace, with what its children said.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceOp {
    /// Line of the begin event.
    pub line: u64,
    pub pid: u32,
    pub tid: u32,
    /// The event's `id` (the plugin's counter of that category).
    pub id: Option<u64>,
    pub kind: OpKind,
    pub seq: Option<u64>,
    pub comm_hash: Option<u64>,
    pub rank: Option<u32>,
    pub peer: Option<u32>,
    pub count: u64,
    pub dtype: DataType,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub n_channels: Option<u32>,
    pub root: Option<u32>,
    pub stream: Option<u64>,
    /// Begin and end `ts` (µs, plugin clock); `None` for `0.0` or missing.
    pub begin_us: Option<f64>,
    pub end_us: Option<f64>,
    /// `KernelCh` events seen, and their lowest/highest channel.
    pub kernel_channels: u32,
    pub channel_range: Option<(u16, u16)>,
    /// Earliest `StartGpuClk`, latest `StopGpuClk` (ns; 0 excluded).
    pub gpu_start_ns: Option<i64>,
    pub gpu_stop_ns: Option<i64>,
    /// A channel had a start clock but `StopGpuClk 0`.
    pub gpu_stop_missing: bool,
}

impl TraceOp {
    /// The GPU span, when every kernel channel logged both clocks.
    pub fn gpu_span(&self) -> Option<GpuSpan> {
        match (self.gpu_start_ns, self.gpu_stop_ns, self.gpu_stop_missing) {
            (Some(s), Some(e), false) if e >= s => Some(GpuSpan { start_ns: s, end_ns: e }),
            _ => None,
        }
    }
}

/// The API event (`COLL_API`/`P2P_API` begin) awaiting its operation.
struct ApiEvent {
    name: String,
    root: Option<u32>,
    stream: Option<u64>,
    count: Option<u64>,
    dtype: Option<DataType>,
}

fn ts(v: &Value) -> Option<f64> {
    v.get("ts").and_then(as_f64).filter(|t| *t > 0.0 && t.is_finite())
}

fn dtype_of(v: Option<&Value>) -> Option<DataType> {
    v.and_then(Value::as_str).and_then(DataType::from_name)
}

/// Builds the operation of a `COLL`/`P2P` begin event.
fn begin_op(ev: &Value, line: u64, kind: OpKind, api: Option<ApiEvent>) -> TraceOp {
    let null = Value::Null;
    let a = ev.get("args").unwrap_or(&null);
    let word = |k: &str| a.get(k).and_then(Value::as_str).map(str::as_bytes);
    let api_ref = api.as_ref();
    TraceOp {
        line,
        pid: ev.get("pid").and_then(as_u32).unwrap_or(0),
        tid: ev.get("tid").and_then(as_u32).unwrap_or(0),
        id: ev.get("id").and_then(as_u64),
        kind,
        seq: a.get("SeqNum").and_then(as_u64),
        comm_hash: a.get("CommHash").and_then(as_u64),
        rank: a.get("Rank").and_then(as_u32),
        peer: a.get("Peer").and_then(as_u32),
        count: a.get("Count").and_then(as_u64).or(api_ref.and_then(|x| x.count)).unwrap_or(0),
        dtype: dtype_of(a.get("Datatype")).or(api_ref.and_then(|x| x.dtype)).unwrap_or(DataType::Unknown(-1)),
        algo: word("Algorithm").and_then(Algorithm::from_name),
        proto: word("Protocol").and_then(Protocol::from_name),
        n_channels: a.get("nChannels").or(a.get("nMaxChannels")).and_then(as_u32),
        root: api_ref.and_then(|x| x.root).filter(|_| kind.is_rooted()),
        stream: api_ref.and_then(|x| x.stream),
        begin_us: ts(ev),
        end_us: None,
        kernel_channels: 0,
        channel_range: None,
        gpu_start_ns: None,
        gpu_stop_ns: None,
        gpu_stop_missing: false,
    }
}

/// Folds a `KernelCh` event into its operation.
fn add_kernel(op: &mut TraceOp, ev: &Value) {
    let Some(a) = ev.get("args") else { return };
    op.kernel_channels += 1;
    if let Some(ch) = a.get("Channel").and_then(as_u64).and_then(|c| u16::try_from(c).ok()) {
        op.channel_range = Some(op.channel_range.map_or((ch, ch), |(lo, hi)| (lo.min(ch), hi.max(ch))));
    }
    let clk = |k: &str| a.get(k).and_then(as_u64).filter(|&c| c > 0).and_then(|c| i64::try_from(c).ok());
    let start = clk("StartGpuClk");
    if let Some(s) = start {
        op.gpu_start_ns = Some(op.gpu_start_ns.map_or(s, |m| m.min(s)));
    }
    match clk("StopGpuClk") {
        Some(e) if start.is_none_or(|s| e >= s) => op.gpu_stop_ns = Some(op.gpu_stop_ns.map_or(e, |m| m.max(e))),
        _ if start.is_some() => op.gpu_stop_missing = true,
        _ => {}
    }
}

/// Streams the operations of one dump to `on_op`, in file order. Broken and
/// invalid events are counted in the report with their line, byte offset and
/// what was expected; the events around them are kept. A file without a
/// single trace event is an error.
pub fn read_ops(
    path: &Path,
    src: impl Read,
    opts: &PluginOptions,
    on_op: &mut dyn FnMut(TraceOp),
) -> Result<PluginReport, PluginError> {
    let mut open: Option<TraceOp> = None;
    let mut api: Option<ApiEvent> = None;
    let mut emit = |op: TraceOp, report: &mut PluginReport| {
        report.ops += 1;
        report.gpu_spans += op.gpu_span().is_some() as u64;
        report.gpu_stop_missing += op.gpu_stop_missing as u64;
        on_op(op);
    };
    let mut report = READER.read(path, src, opts, &mut |report, ev, line, offset| {
        let (Some(cat), Some(ph)) = (ev.get("cat").and_then(Value::as_str), ev.get("ph").and_then(Value::as_str))
        else {
            report.kinds.add("object without cat/ph", line, || keys_of(ev));
            return;
        };
        report.records += 1;
        report.kinds.add(cat, line, String::new);
        let name = ev.get("name").and_then(Value::as_str).unwrap_or("");
        match (cat, ph) {
            ("COLL" | "P2P", "b") => {
                let Some(kind) = OpKind::from_name(name.as_bytes()) else {
                    report.problem("unknown operation", line, offset, || {
                        format!("expected an NCCL operation name (AllReduce, Send, …) in a {cat} event, got {name:?}")
                    });
                    return;
                };
                if let Some(prev) = open.take() {
                    report.unclosed_ops += 1;
                    emit(prev, report);
                }
                let api = api.take().filter(|a| a.name == name);
                open = Some(begin_op(ev, line, kind, api));
            }
            ("COLL" | "P2P", "e") => {
                let id = ev.get("id").and_then(as_u64);
                match open.take() {
                    Some(mut op) if op.id == id || id.is_none() => {
                        op.end_us = ts(ev);
                        emit(op, report);
                    }
                    other => {
                        open = other;
                        report.unmatched_ends += 1;
                    }
                }
            }
            ("GPU", "b") if name == "KernelCh" => match open.as_mut() {
                Some(op) => add_kernel(op, ev),
                None => report.kinds.add("KernelCh outside any COLL/P2P", line, String::new),
            },
            ("COLL_API" | "P2P_API", "b") => {
                let a = ev.get("args");
                let get = |k: &str| a.and_then(|a| a.get(k));
                api = Some(ApiEvent {
                    name: name.to_string(),
                    root: get("root").and_then(as_u32),
                    stream: get("Stream").and_then(as_u64),
                    count: get("count").and_then(as_u64),
                    dtype: dtype_of(get("datatype")),
                });
            }
            _ => {}
        }
    })?;
    if let Some(op) = open.take() {
        report.unclosed_ops += 1;
        report
            .warnings
            .push(format!("the trace ends inside the operation that begins at line {}: kept without its end", op.line));
        emit(op, &mut report);
    }
    if report.ops == 0 {
        report.warnings.push("no COLL or P2P events (NCCL_PROFILE_EVENT_MASK without them?)".into());
    }
    Ok(report)
}

/// Adds one operation to the table under construction.
fn add_op(b: &mut TableBuilder, op: &TraceOp, host: &str) {
    let proc = b.process(host, op.pid);
    let h = HandleInfo { comm_hash: op.comm_hash.unwrap_or(0), rank: op.rank, nranks: None, n_nodes: None };
    let (comm, dev) = b.handle(proc, &h);
    let cpu_ts_ns = op.begin_us.map(|t| (t * 1000.0).round() as i64);
    let gpu = op.gpu_span();
    let channels = op.channel_range.or_else(|| match op.n_channels {
        Some(n) if n > 0 && !op.kind.is_p2p() => Some((0, n.min(u16::MAX as u32) as u16 - 1)),
        _ => None,
    });
    let row = CollOp {
        proc,
        dev,
        comm,
        comm_seq: 0,
        tid: op.tid,
        seq: op.seq.unwrap_or(u64::MAX),
        kind: op.kind,
        count: op.count,
        dtype: op.dtype,
        bytes: op.dtype.size_bytes().map_or(0, |s| op.count.saturating_mul(s)),
        redop: None,
        root: op.root,
        peer: op.peer,
        algo: op.algo,
        proto: op.proto,
        channels,
        sendbuff: 0,
        recvbuff: 0,
        stream: op.stream,
        cpu_ts_ns,
        gpu,
        kernel: None,
        line: op.line,
        recovered: false,
    };
    b.push(row, cpu_ts_ns.or(op.gpu_start_ns));
}

/// Reads several dumps (one per process or thread, as the plugin writes
/// them) into one assembled table; processes are joined by (host, pid).
/// Stops at the first file that is not an example-plugin trace.
pub fn load_paths(paths: &[PathBuf], opts: &PluginOptions) -> Result<(OpTable, Vec<PluginReport>), PluginError> {
    let host = opts.host.clone().unwrap_or_else(|| "?".into());
    json_util::load_files(paths, |path, src, b| read_ops(path, src, opts, &mut |op| add_op(b, &op, &host)))
}

/// Reads one dump into an assembled table.
pub fn load_path(path: &Path, opts: &PluginOptions) -> Result<(OpTable, PluginReport), PluginError> {
    json_util::load_one(path, |paths| load_paths(paths, opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"[
{"name": "Broadcast", "cat": "COLL_API", "ph": "b", "id": 0, "pid": 5, "tid": 1, "ts": 0.000000, "args": {"count": 8, "datatype": ncclBfloat16, "root": 3, "GraphCaptured":0, "Stream": 0xab}},
{"name": "Broadcast", "cat": "COLL", "ph": "b", "id": 0, "pid": 5, "tid": 1, "ts": 10.5, "args": {"SeqNum": 7, "CommHash": 99, "Rank": 0, "Count": 8, "Datatype": "ncclBfloat16", "Algorithm": "RING", "Protocol": "LL128", "nChannels": 4}},
{"name": "KernelCh", "cat": "GPU", "ph": "b", "id": 0, "pid": 5, "tid": 1, "ts": 11.0, "args": {"Channel": 2, "StartGpuClk": 1000, "StopGpuClk": 1900}},
{"name": "KernelCh", "cat": "GPU", "ph": "b", "id": 0, "pid": 5, "tid": 1, "ts": 11.0, "args": {"Channel": 1, "StartGpuClk": 900, "StopGpuClk": 2000}},
{"name": "Broadcast", "cat": "COLL", "ph": "e", "id": 0, "pid": 5, "tid": 1, "ts": 20.0},
{"name": "AllGather", "cat": "COLL", "ph": "b", "id": 1, "pid": 5, "tid": 1, "ts": 30.0, "args": {"SeqNum": 8, "CommHash": 99, "Rank": 0, "Count": 2, "Datatype": "ncclInt32", "nChannels": 2}},
{}]"#;

    #[test]
    fn ops_with_api_kernels_and_truncation() {
        let mut ops = Vec::new();
        let r = read_ops(Path::new("t"), TRACE.as_bytes(), &PluginOptions::default(), &mut |o| ops.push(o)).unwrap();
        assert_eq!((r.records, r.ops, r.repaired_objects, r.empty_objects, r.unclosed_ops), (6, 2, 1, 1, 1));
        let b = &ops[0];
        assert_eq!(
            (b.kind, b.root, b.stream, b.dtype, b.proto),
            (OpKind::Broadcast, Some(3), Some(0xab), DataType::Bfloat16, Some(Protocol::Ll128))
        );
        assert_eq!((b.channel_range, b.gpu_span()), (Some((1, 2)), Some(GpuSpan { start_ns: 900, end_ns: 2000 })));
        assert_eq!((b.begin_us, b.end_us, ops[1].end_us), (Some(10.5), Some(20.0), None));
    }

    #[test]
    fn table_rows() {
        let (mut b, host) = (TableBuilder::default(), "h".to_string());
        read_ops(Path::new("t"), TRACE.as_bytes(), &PluginOptions::default(), &mut |o| add_op(&mut b, &o, &host))
            .unwrap();
        let t = b.finish();
        let ops = &t.per_rank[0].to_vec();
        assert_eq!((ops.len(), ops[0].bytes, ops[0].channels, ops[0].cpu_ts_ns), (2, 16, Some((1, 2)), Some(10_500)));
        assert_eq!((ops[1].bytes, ops[1].channels, ops[1].seq, ops[1].comm_seq), (8, Some((0, 1)), 8, 1));
    }

    #[test]
    fn stop_clock_zero_gives_no_span() {
        let ev = r#"{"name": "Send", "cat": "P2P", "ph": "b", "id": 0, "pid": 1, "tid": 1, "ts": 5.0, "args": {"CommHash": 1, "Rank": 0, "Peer": 1, "Count": 4, "Datatype": "ncclFloat32", "nChannels": 1}}
{"name": "KernelCh", "cat": "GPU", "ph": "b", "id": 0, "pid": 1, "tid": 1, "ts": 6.0, "args": {"Channel": 16, "StartGpuClk": 500, "StopGpuClk": 0}}
{"name": "Send", "cat": "P2P", "ph": "e", "id": 0, "pid": 1, "tid": 1, "ts": 7.0}"#;
        let mut ops = Vec::new();
        let r = read_ops(Path::new("t"), ev.as_bytes(), &PluginOptions::default(), &mut |o| ops.push(o)).unwrap();
        assert_eq!((r.gpu_stop_missing, ops[0].gpu_start_ns, ops[0].gpu_span()), (1, Some(500), None));
    }
}
