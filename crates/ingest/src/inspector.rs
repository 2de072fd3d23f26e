//! Reader of NCCL Inspector output (`libnccl-profiler-inspector.so`,
//! `NCCL_INSPECTOR_DUMP_DIR`): JSON lines, one object per completed
//! collective or point-to-point operation, formats v4.0 to v4.2; pretty-printed
//! objects (as in NVIDIA's README) are read too.
//!
//! Each record is `{header{id, comm_name?, rank, n_ranks, nnodes},
//! metadata{inspector_output_format_version, git_rev, rec_mechanism,
//! dump_timestamp_us, hostname, pid}, coll_perf{…} | p2p_perf{…}}`; v4.2
//! also writes `dump_stats` records (counted; their drop counts are summed
//! into [`PluginReport::dropped_records`]).
//!
//! Mapping into the canonical table (via [`InspectorRecord`]):
//! * process = (hostname, pid); communicator handle = (process, `header.id`
//!   = commHash, `rank`), with `nranks`, `n_nodes` (devices: see the table
//!   builder in [`crate::json_util`]);
//! * `coll`/`p2p` → kind, `*_sn` → `seq`, `p2p_peer` → `peer`,
//!   `coll_algo`/`coll_proto` (v4.2; `unknown` → none) → algorithm/protocol;
//! * the Inspector logs a message size but no count or datatype: rows carry
//!   `count = *_msg_size_bytes` elements of `DataType::Uint8`, so `bytes` is
//!   the logged size and `bytes == count × sizeof(dtype)` holds;
//! * GPU span: verbose records (`event_trace_ts`) give the real kernel
//!   interval (earliest kernel start to latest kernel stop, µs → ns) and the
//!   CPU start (`cpu_ts_ns`); other records with a kernel timing source
//!   (`kernel_gpu`, `kernel_cpu`, or none named) get a span of the measured
//!   `*_exec_time_us` that ends at `dump_timestamp_us` (the record is written
//!   after completion, so the real interval lies at or before it; counted in
//!   [`PluginReport::gpu_spans_at_dump_time`]); `collective_cpu` timing gives
//!   no GPU span;
//! * rows of a rank are ordered by completion (span end, else dump time).
//!
//! v4.0 keeps only the latest completed operation per communicator between
//! dumps, so its `seq` numbers have gaps: the table then holds a sample.
//!
//! Splitting, lenient parsing, problem counting and the loading of several
//! files into one table are shared with [`crate::example_plugin`] (in
//! [`crate::json_util`]); this module owns the decoding of Inspector records.

use crate::json_util::{
    self, as_f64, as_u32, as_u64, keys_of, HandleInfo, PluginError, PluginOptions, PluginReport, Reader, TableBuilder,
};
use commlens_core::{Algorithm, CollOp, DataType, GpuSpan, OpKind, OpTable, Protocol};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The words of Inspector reports and errors; the read loop is shared.
const READER: Reader = Reader {
    format: "nccl-inspector",
    expected: "NCCL Inspector output (JSON objects with header, metadata and coll_perf/p2p_perf)",
    object: "a JSON object",
    broken: "broken object",
    stray: "text outside any JSON object",
    record_has: "a header",
};

/// One Inspector record, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct InspectorRecord {
    /// Line where the record starts.
    pub line: u64,
    pub comm_hash: u64,
    pub comm_name: Option<String>,
    pub rank: u32,
    pub nranks: Option<u32>,
    pub nnodes: Option<u32>,
    pub host: String,
    pub pid: u32,
    pub format_version: Option<String>,
    pub dump_ts_us: Option<u64>,
    pub kind: OpKind,
    /// `coll_sn` / `p2p_sn`.
    pub seq: u64,
    pub peer: Option<u32>,
    pub msg_bytes: u64,
    pub exec_time_us: Option<u64>,
    pub timing_source: Option<String>,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub algbw_gb_s: Option<f64>,
    pub busbw_gb_s: Option<f64>,
    /// Verbose records: operation start/stop and kernel span (epoch µs).
    pub op_start_us: Option<u64>,
    pub op_stop_us: Option<u64>,
    pub kernel_start_us: Option<u64>,
    pub kernel_stop_us: Option<u64>,
    pub kernel_channels: u32,
}

/// Key names of the two record bodies.
struct Keys {
    body: &'static str,
    name: &'static str,
    sn: &'static str,
    size: &'static str,
    exec: &'static str,
    source: &'static str,
    algbw: &'static str,
    busbw: &'static str,
    start: &'static str,
    stop: &'static str,
}

const COLL: Keys = Keys {
    body: "coll_perf",
    name: "coll",
    sn: "coll_sn",
    size: "coll_msg_size_bytes",
    exec: "coll_exec_time_us",
    source: "coll_timing_source",
    algbw: "coll_algobw_gbs",
    busbw: "coll_busbw_gbs",
    start: "coll_start_ts",
    stop: "coll_stop_ts",
};

const P2P: Keys = Keys {
    body: "p2p_perf",
    name: "p2p",
    sn: "p2p_sn",
    size: "p2p_msg_size_bytes",
    exec: "p2p_exec_time_us",
    source: "p2p_timing_source",
    algbw: "p2p_algobw_gbs",
    busbw: "p2p_busbw_gbs",
    start: "p2p_start_ts",
    stop: "p2p_stop_ts",
};

/// What one JSON object was.
enum Decoded {
    Record(Box<InspectorRecord>),
    /// A valid object that is not an operation (its kind).
    Other(&'static str),
    /// A record missing what it needs: (kind, what was expected).
    Bad(&'static str, String),
}

fn decode(v: &Value, line: u64, report: &mut PluginReport) -> Decoded {
    let Some(header) = v.get("header") else { return Decoded::Other("object without header") };
    report.records += 1;
    if let Some(s) = v.get("dump_stats") {
        let get = |k: &str| s.get(k).and_then(as_u64).unwrap_or(0);
        report.dropped_records += get("coll_dropped_since_last_dump") + get("p2p_dropped_since_last_dump");
        return Decoded::Other("dump_stats");
    }
    let (keys, body) = match (v.get("coll_perf"), v.get("p2p_perf")) {
        (Some(b), _) => (&COLL, b),
        (None, Some(b)) => (&P2P, b),
        (None, None) => return Decoded::Other("header without coll_perf or p2p_perf"),
    };
    let Some(comm_hash) = header.get("id").and_then(as_u64) else {
        return Decoded::Bad(
            "missing field",
            format!(
                "header.id: expected the communicator hash as a hex string like \"0x141f971a045e44\", got {}",
                header.get("id").map_or("nothing".into(), |x| x.to_string())
            ),
        );
    };
    let Some(rank) = header.get("rank").and_then(as_u32) else {
        return Decoded::Bad("missing field", "header.rank: expected a non-negative integer".into());
    };
    let name = body.get(keys.name).and_then(Value::as_str).unwrap_or("");
    let Some(kind) = OpKind::from_name(name.as_bytes()) else {
        return Decoded::Bad(
            "unknown operation",
            format!("{}.{}: expected an NCCL operation name (AllReduce, Send, …), got {name:?}", keys.body, keys.name),
        );
    };
    let Some(seq) = body.get(keys.sn).and_then(as_u64) else {
        return Decoded::Bad(
            "missing field",
            format!("{}.{}: expected the operation's sequence number", keys.body, keys.sn),
        );
    };
    let Some(msg_bytes) = body.get(keys.size).and_then(as_u64) else {
        return Decoded::Bad(
            "missing field",
            format!("{}.{}: expected the message size in bytes", keys.body, keys.size),
        );
    };
    let meta = v.get("metadata");
    let m_str = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).map(str::to_string);
    let m_u64 = |k: &str| meta.and_then(|m| m.get(k)).and_then(as_u64);
    let word = |k: &str| body.get(k).and_then(Value::as_str).map(str::as_bytes);
    let trace = body.get("event_trace_ts");
    let t_u64 = |k: &str| trace.and_then(|t| t.get(k)).and_then(as_u64).filter(|&x| x > 0);
    let (mut k_start, mut k_stop, mut n_ch) = (None::<u64>, None::<u64>, 0u32);
    let kernels = trace.and_then(|t| t.get("kernel_events")).and_then(Value::as_array);
    for k in kernels.into_iter().flatten() {
        n_ch += 1;
        if let Some(s) = k.get("kernel_start_ts").and_then(as_u64).filter(|&x| x > 0) {
            k_start = Some(k_start.map_or(s, |m| m.min(s)));
        }
        if let Some(s) = k.get("kernel_stop_ts").and_then(as_u64).filter(|&x| x > 0) {
            k_stop = Some(k_stop.map_or(s, |m| m.max(s)));
        }
    }
    Decoded::Record(Box::new(InspectorRecord {
        line,
        comm_hash,
        comm_name: header.get("comm_name").and_then(Value::as_str).map(str::to_string),
        rank,
        nranks: header.get("n_ranks").and_then(as_u32),
        nnodes: header.get("nnodes").and_then(as_u32),
        host: m_str("hostname").unwrap_or_else(|| "?".into()),
        pid: m_u64("pid").and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
        format_version: m_str("inspector_output_format_version"),
        dump_ts_us: m_u64("dump_timestamp_us"),
        kind,
        seq,
        peer: body.get("p2p_peer").and_then(as_u32),
        msg_bytes,
        exec_time_us: body.get(keys.exec).and_then(as_u64),
        timing_source: body.get(keys.source).and_then(Value::as_str).map(str::to_string),
        algo: word("coll_algo").and_then(Algorithm::from_name),
        proto: word("coll_proto").and_then(Protocol::from_name),
        algbw_gb_s: body.get(keys.algbw).and_then(as_f64),
        busbw_gb_s: body.get(keys.busbw).and_then(as_f64),
        op_start_us: t_u64(keys.start),
        op_stop_us: t_u64(keys.stop),
        kernel_start_us: k_start,
        kernel_stop_us: k_stop.filter(|&e| k_start.is_some_and(|s| e >= s)),
        kernel_channels: n_ch,
    }))
}

/// Streams the records of one file to `on_record`, in file order. Broken,
/// invalid and incomplete objects are counted in the report with their line,
/// byte offset and what was expected; the records around them are kept.
/// A file without a single Inspector record is an error.
pub fn read_records(
    path: &Path,
    src: impl Read,
    opts: &PluginOptions,
    on_record: &mut dyn FnMut(InspectorRecord),
) -> Result<PluginReport, PluginError> {
    READER.read(path, src, opts, &mut |report, v, line, offset| match decode(v, line, report) {
        Decoded::Record(r) => {
            report.kinds.add(if r.kind.is_p2p() { "p2p_perf" } else { "coll_perf" }, line, String::new);
            on_record(*r);
        }
        Decoded::Other(kind) => report.kinds.add(kind, line, || keys_of(v)),
        Decoded::Bad(kind, what) => report.problem(kind, line, offset, || what),
    })
}

/// Adds one record to the table under construction.
fn add_record(b: &mut TableBuilder, r: &InspectorRecord, report: &mut PluginReport) {
    let proc = b.process(&r.host, r.pid);
    let h = HandleInfo { comm_hash: r.comm_hash, rank: Some(r.rank), nranks: r.nranks, n_nodes: r.nnodes };
    let (comm, dev) = b.handle(proc, &h);
    let us = |x: u64| (x as i64).saturating_mul(1000);
    let source = r.timing_source.as_deref();
    report.timing_sources.add(source.unwrap_or("(absent)"), r.line, String::new);
    let kernel_timing = matches!(source, None | Some("kernel_gpu" | "kernel_cpu"));
    let gpu = match (r.kernel_start_us, r.kernel_stop_us, r.exec_time_us, r.dump_ts_us) {
        (Some(s), Some(e), _, _) => Some(GpuSpan { start_ns: us(s), end_ns: us(e) }),
        (_, _, Some(x), Some(d)) if kernel_timing && x <= d => {
            report.gpu_spans_at_dump_time += 1;
            Some(GpuSpan { start_ns: us(d - x), end_ns: us(d) })
        }
        _ => None,
    };
    report.gpu_spans += gpu.is_some() as u64;
    let time_key = gpu.map(|g| g.end_ns).or(r.dump_ts_us.map(us));
    let op = CollOp {
        proc,
        dev,
        comm,
        comm_seq: 0,
        tid: 0,
        seq: r.seq,
        kind: r.kind,
        count: r.msg_bytes,
        dtype: DataType::Uint8,
        bytes: r.msg_bytes,
        redop: None,
        root: None,
        peer: r.peer,
        algo: r.algo,
        proto: r.proto,
        channels: (r.kernel_channels > 0).then(|| (0, r.kernel_channels.min(u16::MAX as u32) as u16 - 1)),
        sendbuff: 0,
        recvbuff: 0,
        stream: None,
        cpu_ts_ns: r.op_start_us.map(us),
        gpu,
        kernel: None,
        line: r.line,
        recovered: false,
    };
    report.ops += 1;
    b.push(op, time_key);
}

/// Reads several Inspector files (one per process, as the plugin writes
/// them) into one assembled table; processes are joined by (host, pid).
/// Stops at the first file that is not Inspector output.
pub fn load_paths(paths: &[PathBuf], opts: &PluginOptions) -> Result<(OpTable, Vec<PluginReport>), PluginError> {
    json_util::load_files(paths, |path, src, b| {
        let mut side = PluginReport::default();
        let mut report = read_records(path, src, opts, &mut |r| add_record(b, &r, &mut side))?;
        report.ops = side.ops;
        report.gpu_spans = side.gpu_spans;
        report.gpu_spans_at_dump_time = side.gpu_spans_at_dump_time;
        report.timing_sources = side.timing_sources;
        Ok(report)
    })
}

/// Reads one Inspector file into an assembled table.
pub fn load_path(path: &Path, opts: &PluginOptions) -> Result<(OpTable, PluginReport), PluginError> {
    json_util::load_one(path, |paths| load_paths(paths, opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V42: &str = r#"{"header":{"id":"0xabc","comm_name":"tp","rank":1,"n_ranks":2,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.2","dump_timestamp_us":5000,"hostname":"h","pid":7},"dump_stats":{"coll_records":1,"coll_dropped_since_last_dump":3,"p2p_dropped_since_last_dump":1}}
{"header":{"id":"0xabc","comm_name":"tp","rank":1,"n_ranks":2,"nnodes":1},"metadata":{"dump_timestamp_us":5000,"hostname":"h","pid":7},"coll_perf":{"coll":"AllGather","coll_algo":"RING","coll_proto":"unknown","coll_sn":4,"coll_msg_size_bytes":1024,"coll_exec_time_us":10,"coll_timing_source":"kernel_gpu","event_trace_ts":{"coll_start_ts":100,"coll_stop_ts":200,"kernel_events":[{"channel_id":0,"kernel_start_ts":120,"kernel_stop_ts":150},{"channel_id":1,"kernel_start_ts":110,"kernel_stop_ts":160}]}}}
{"header":{"id":"0xabc","rank":1},"metadata":{"dump_timestamp_us":6000,"hostname":"h","pid":7},"p2p_perf":{"p2p":"Send","p2p_sn":9,"p2p_peer":0,"p2p_msg_size_bytes":64,"p2p_exec_time_us":5,"p2p_timing_source":"collective_cpu"}}
"#;

    #[test]
    fn v4_2_records_and_dump_stats() {
        let mut recs = Vec::new();
        let r = read_records(Path::new("x.jsonl"), V42.as_bytes(), &PluginOptions::default(), &mut |x| recs.push(x))
            .unwrap();
        assert_eq!((r.records, recs.len(), r.dropped_records, r.skipped()), (3, 2, 4, 0));
        let c = &recs[0];
        assert_eq!(
            (c.kind, c.algo, c.proto, c.comm_name.as_deref()),
            (OpKind::AllGather, Some(Algorithm::Ring), None, Some("tp"))
        );
        assert_eq!(
            (c.kernel_start_us, c.kernel_stop_us, c.kernel_channels, c.op_start_us),
            (Some(110), Some(160), 2, Some(100))
        );
        assert_eq!((recs[1].kind, recs[1].peer, recs[1].seq), (OpKind::Send, Some(0), 9));
    }

    #[test]
    fn table_rows() {
        let mut b = TableBuilder::default();
        let mut report = PluginReport::default();
        read_records(Path::new("x"), V42.as_bytes(), &PluginOptions::default(), &mut |x| {
            add_record(&mut b, &x, &mut report)
        })
        .unwrap();
        let t = b.finish();
        assert_eq!((t.devices.len(), t.comms.len(), t.n_ops()), (1, 1, 2));
        let ops = &t.per_rank[0].to_vec();
        assert_eq!(ops[0].gpu, Some(GpuSpan { start_ns: 110_000, end_ns: 160_000 }));
        assert_eq!((ops[0].bytes, ops[0].channels, ops[0].cpu_ts_ns), (1024, Some((0, 1)), Some(100_000)));
        assert_eq!(ops[1].gpu, None, "collective_cpu timing is not a GPU span");
        assert_eq!(t.comms[0].comm_id, Some(0xabc));
    }

    #[test]
    fn bad_records_are_counted() {
        let input = "{\"header\":{\"rank\":0},\"coll_perf\":{\"coll\":\"AllReduce\"}}\n{\"header\":{\"id\":\"0x1\",\"rank\":0},\"coll_perf\":{\"coll\":\"Foo\",\"coll_sn\":1,\"coll_msg_size_bytes\":1}}\n";
        let r = read_records(Path::new("y"), input.as_bytes(), &PluginOptions::default(), &mut |_| {}).unwrap();
        assert_eq!((r.malformed.count_of("missing field"), r.malformed.count_of("unknown operation")), (1, 1));
        assert!(r.problems()[0].starts_with("y:1: missing field: byte 0: header.id"), "{:?}", r.problems());
        let e = read_records(Path::new("z"), "hello\n".as_bytes(), &PluginOptions::default(), &mut |_| {}).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("z: not NCCL Inspector output")
                && msg.contains("no JSON object in 1 line(s) (line 1: byte 0: expected a JSON object, got `hello`)"),
            "{msg}"
        );
    }
}
