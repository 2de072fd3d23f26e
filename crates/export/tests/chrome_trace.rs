//! Chrome trace JSON from a hand-built table: tracks, overflow track for
//! overlapping ops on one stream, instants for CPU-only ops, exact times,
//! every argument, enrichment, the classification track, an empty table.

mod common;

use commlens_core::{CollOp, OpKind, OpTable};
use commlens_export::chrome::{write_chrome_trace, write_chrome_trace_file, write_chrome_trace_par};
use commlens_export::timeline::{op_args, ArgValue, Enrich, NoEnrich, TraceOptions, TraceSummary};
use common::*;
use serde_json::{json, Value};

/// The trace, checked to be the same bytes and counts when the ranks are rendered in parallel.
fn export(table: &OpTable, enrich: &(dyn Enrich + Sync), opts: &TraceOptions) -> (Vec<u8>, TraceSummary) {
    let mut buf = Vec::new();
    let sum = write_chrome_trace(table, enrich, opts, &mut buf).unwrap();
    assert_eq!(sum.bytes, buf.len() as u64);
    let mut par = Vec::new();
    let psum = write_chrome_trace_par(table, enrich, opts, &mut par).unwrap();
    assert!(buf == par, "parallel rendering changed the bytes");
    assert_eq!(sum, psum);
    (buf, sum)
}

fn find(events: &[Value], pid: u64, pred: impl Fn(&Value) -> bool) -> Vec<&Value> {
    events.iter().filter(|e| e["ph"] != "M" && e["pid"] == pid && pred(e)).collect()
}

#[test]
fn hand_table_layout_and_args() {
    let t = hand_table();
    let (buf, sum) = export(&t, &NoEnrich, &TraceOptions::default());
    let c = check_chrome(&buf, &t, &NoEnrich);
    assert_eq!(
        sum,
        TraceSummary {
            processes: 2,
            // rank 0: stream 7, stream 7 overlap, stream 9, CPU 42, comms ×2; rank 1: stream ptr, unknown, CPU 43, comms.
            tracks: 10,
            overflow_tracks: 1,
            slices: 6,
            instants: 2,
            comm_track_events: 8,
            untimed_ops: 1,
            ranges: 0,
            bytes: buf.len() as u64,
        }
    );
    assert_eq!((c.processes, c.tracks, c.slices, c.instants, c.comm_events), (2, 10, 6, 2, 8));
    let names: Vec<&str> = c.thread_names.values().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "GPU stream 7",
            "GPU stream 7 (overlap 1)",
            "GPU stream 9",
            "CPU thread 42 (enqueue)",
            "communicators",
            "communicators (overlap 1)",
            "GPU (stream unknown)",
            "GPU stream 0x55882ce051d0",
            "CPU thread 43 (enqueue)",
            "communicators",
        ]
    );
    let text = std::str::from_utf8(&buf).unwrap();
    assert!(text.contains(
        r#""name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0 (node7:100, GPU 0)"}"#
    ));
    // A: exact µs text, on stream 7's main track (tid 1); B (overlaps A) on the overflow track.
    assert!(text.contains(r#""ph":"X","ts":1.000,"dur":4.000,"pid":0,"tid":1,"#), "{text}");
    assert!(text.contains(r#""ph":"X","ts":3.000,"dur":3.000,"pid":0,"tid":2,"#));
    assert!(text.contains(r#""ph":"X","ts":6.000,"dur":1.000,"pid":0,"tid":1,"#));
    assert!(text.contains(r#""ph":"i","s":"t","ts":1.500,"pid":0,"tid":4,"#));
    // I: zero-length span.
    assert!(text.contains(r#""ph":"X","ts":4.000,"dur":0.000,"pid":1,"tid":1,"#));

    let a = find(&c.events, 0, |e| e["args"]["correlation_id"] == 511438);
    assert_eq!(a.len(), 1);
    let want = json!({
        "kind": "AllReduce", "count": 2097152, "dtype": "float16", "bytes": 4194304, "redop": "sum",
        "algorithm": "RING", "protocol": "LL", "channels": "0..1", "stream": 7,
        "sendbuff": "0x1461be300000", "recvbuff": "0x1461be300000", "op_count": 0, "comm_seq": 0,
        "comm": "tp0", "comm_ptr": "0x558836a2b530", "comm_id": "0xabcdef", "nranks": 2, "comm_rank": 0,
        "global_rank": 0, "cpu_tid": 1, "cpu_ts_ns": 900, "gpu_start_ns": 1000, "gpu_end_ns": 5000,
        "kernel": "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "grid": "2x1x1", "block": "544x1x1", "shared_mem_bytes": 82240, "registers": 96,
        "correlation_id": 511438, "source_line": 1
    });
    assert_eq!(a[0]["args"], want);
    assert_eq!(a[0]["name"], "AllReduce");
    // Rank 1: the stream pointer is an address; the lone handle is named by its pointer;
    // the recovered Send and the root/peer fields come through.
    let g = find(&c.events, 1, |e| e["name"] == "Broadcast");
    assert_eq!(g[0]["args"]["stream"], "0x55882ce051d0");
    assert_eq!(g[0]["args"]["comm"], "comm 0x7777");
    assert_eq!(g[0]["args"]["root"], 0);
    assert!(g[0]["args"].get("nranks").is_none());
    let e = find(&c.events, 0, |e| e["name"] == "Send");
    assert_eq!((e[0]["args"]["peer"].clone(), e[0]["args"]["recovered"].clone()), (json!(1), json!(true)));
    // The communicators track names events by communicator.
    let comm: Vec<&str> =
        c.events.iter().filter(|e| e["cat"] == "comm").map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(comm.iter().filter(|n| **n == "tp0").count(), 7);
    assert_eq!(comm.iter().filter(|n| **n == "comm 0x7777").count(), 1);
}

struct Parallelism;

impl Enrich for Parallelism {
    fn args(&self, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        vec![
            ("algbw_gb_s", ArgValue::Float(op.bytes as f64 / 1e3)),
            ("bottleneck", "NVLink (min: 12.5 GB/s)".into()),
            ("bytes", ArgValue::Uint(7)), // replaces the table's value
        ]
    }
    fn class_label(&self, op: &CollOp) -> Option<String> {
        Some(if op.kind == OpKind::AllReduce { "TP".into() } else { "DP".into() })
    }
}

#[test]
fn enrichment_and_parallelism_track() {
    let t = hand_table();
    let (buf, _) = export(&t, &Parallelism, &TraceOptions::default());
    let c = check_chrome(&buf, &t, &Parallelism);
    let a = c.events.iter().find(|e| e["args"]["correlation_id"] == 511438).unwrap();
    assert_eq!(a["args"]["algbw_gb_s"], 4194.304);
    assert_eq!(a["args"]["bottleneck"], "NVLink (min: 12.5 GB/s)");
    assert_eq!(a["args"]["bytes"], 7);
    let keys: Vec<&String> = a["args"].as_object().unwrap().keys().collect();
    assert_eq!(keys.iter().filter(|k| k.as_str() == "bytes").count(), 1);
    assert!(c.thread_names.values().any(|n| n == "parallelism"));
    assert!(!c.thread_names.values().any(|n| n == "communicators"));
    let tp = c.events.iter().filter(|e| e["cat"] == "comm" && e["name"] == "TP").count();
    assert_eq!(
        tp,
        t.ops().filter(|o| o.kind == OpKind::AllReduce && (o.gpu.is_some() || o.cpu_ts_ns.is_some())).count()
    );

    // A closure is an enrichment too.
    let closure = |op: &CollOp| vec![("busbw_gb_s", ArgValue::Float(op.count as f64))];
    let (buf, _) = export(&t, &closure, &TraceOptions::default());
    let c = check_chrome(&buf, &t, &closure);
    assert!(c.events.iter().filter(|e| e["cat"] == "nccl").all(|e| e["args"]["busbw_gb_s"].is_number()));
}

#[test]
fn offset_and_no_comm_track() {
    let t = hand_table();
    let opts = TraceOptions { time_offset_ns: 1_000, comm_track: false, ..TraceOptions::default() };
    let (buf, sum) = export(&t, &NoEnrich, &opts);
    assert_eq!((sum.tracks, sum.comm_track_events), (7, 0));
    let text = std::str::from_utf8(&buf).unwrap();
    assert!(text.contains(r#""ph":"X","ts":0.000,"dur":4.000,"pid":0,"tid":1,"#));
    assert!(text.contains(r#""time_offset_ns":"1000""#));
    let doc: Value = serde_json::from_slice(&buf).unwrap();
    assert!(doc["traceEvents"].as_array().unwrap().iter().all(|e| e["cat"] != "comm"));
}

#[test]
fn args_cover_every_field() {
    // Every optional field of the first op is set; each shows up as an argument.
    let t = hand_table();
    let keys: Vec<&str> = op_args(&t, &t.per_rank[0].op(0)).iter().map(|(k, _)| *k).collect();
    for k in [
        "kind",
        "count",
        "dtype",
        "bytes",
        "redop",
        "algorithm",
        "protocol",
        "channels",
        "stream",
        "sendbuff",
        "recvbuff",
        "op_count",
        "comm_seq",
        "comm",
        "comm_ptr",
        "comm_id",
        "nranks",
        "comm_rank",
        "kernel",
        "grid",
        "block",
        "shared_mem_bytes",
        "registers",
        "correlation_id",
    ] {
        assert!(keys.contains(&k), "{k} missing");
    }
}

#[test]
fn empty_table() {
    let (buf, sum) = export(&OpTable::default(), &NoEnrich, &TraceOptions::default());
    assert_eq!(sum, TraceSummary { bytes: buf.len() as u64, ..TraceSummary::default() });
    let doc: Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(doc["traceEvents"], json!([]));
    assert_eq!(doc["displayTimeUnit"], "ns");
}

#[test]
fn file_writer() {
    let dir = temp_dir("chrome-file");
    let path = dir.join("t.json");
    let sum = write_chrome_trace_file(&hand_table(), &NoEnrich, &TraceOptions::default(), &path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), sum.bytes);
    let _ = std::fs::remove_dir_all(dir);
}
