//! Shared by the trace-export tests: a hand-built table, the data paths, and
//! structural checkers that read a Chrome JSON or Perfetto protobuf trace back
//! and verify it against the table it came from.

#![allow(dead_code)]

use commlens_core::model::{
    CommMember, Device, GpuSpan, Grouping, KernelInfo, LogicalComm, LogicalCommIdx, ProcIdx, Process,
};
use commlens_core::{Algorithm, CollOp, CommIdx, DataType, DevIdx, OpKind, OpTable, Protocol, RedOp};
use commlens_export::perfetto::proto::{EventType, Trace, TracePacket};
use commlens_export::perfetto::{read_perfetto_trace, SEQUENCE_ID};
use commlens_export::timeline::{merged_args_at, ArgValue, Enrich};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

pub fn op(dev: u32, comm: u32, kind: OpKind) -> CollOp {
    let op = CollOp::new(ProcIdx(dev), DevIdx(dev), CommIdx(comm), kind, 1024, DataType::Float32);
    CollOp { tid: 1, line: 1, ..op }
}

pub fn gpu(mut o: CollOp, stream: Option<u64>, start_ns: i64, end_ns: i64) -> CollOp {
    o.stream = stream;
    o.gpu = Some(GpuSpan { start_ns, end_ns });
    o
}

/// Two ranks on one host. Rank 0: A [1000,5000] and B [3000,6000] overlap on
/// stream 7 (B goes to an overflow track), C [6000,7000] touches A's lane,
/// D on stream 9, E a CPU-only Send (instant), F untimed. Rank 1: G on a
/// stream pointer with a communicator outside any logical one, H a CPU-only
/// Recv, I a GPU span without stream.
pub fn hand_table() -> OpTable {
    let mut t = OpTable { sources: vec!["hand-built".into()], ..OpTable::default() };
    for i in 0..2u32 {
        t.processes.push(Process { host: "node7".into(), pid: 100 + i, nccl_version: None });
        t.devices.push(Device {
            proc: ProcIdx(i),
            cuda_dev: Some(i),
            nvml_dev: None,
            bus_id: None,
            global_rank: Some(i),
            local_rank: Some(i),
        });
        let mut c = CommMember::new(ProcIdx(i), 0x558836a2b530 + i as u64);
        c.device = Some(DevIdx(i));
        c.nranks = Some(2);
        c.rank = Some(i);
        c.comm_id = Some(0xabcdef);
        c.logical = Some(LogicalCommIdx(0));
        t.comms.push(c);
    }
    let mut lone = CommMember::new(ProcIdx(1), 0x7777);
    lone.device = Some(DevIdx(1));
    t.comms.push(lone);
    t.logical.push(LogicalComm {
        name: "tp0".into(),
        comm_id: Some(0xabcdef),
        nranks: 2,
        members: vec![CommIdx(0), CommIdx(1)],
        grouping: Grouping::CommId,
    });

    let mut a = gpu(op(0, 0, OpKind::AllReduce), Some(7), 1000, 5000);
    a.count = 2097152;
    a.dtype = DataType::Float16;
    a.bytes = 4194304;
    a.redop = Some(RedOp::Sum);
    a.algo = Some(Algorithm::Ring);
    a.proto = Some(Protocol::Ll);
    a.channels = Some((0, 1));
    a.sendbuff = 0x1461be300000;
    a.recvbuff = 0x1461be300000;
    a.cpu_ts_ns = Some(900);
    a.kernel = Some(std::sync::Arc::new(KernelInfo {
        name: "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)".into(),
        grid: [2, 1, 1],
        block: [544, 1, 1],
        shared_mem_bytes: 82240,
        registers: 96,
        correlation_id: 511438,
    }));
    let mut b = gpu(op(0, 0, OpKind::AllReduce), Some(7), 3000, 6000);
    b.seq = 1;
    b.comm_seq = 1;
    let mut c = gpu(op(0, 0, OpKind::AllGather), Some(7), 6000, 7000);
    c.seq = 2;
    c.comm_seq = 2;
    let d = gpu(op(0, 0, OpKind::ReduceScatter), Some(9), 2000, 2500);
    let mut e = op(0, 0, OpKind::Send);
    e.peer = Some(1);
    e.tid = 42;
    e.cpu_ts_ns = Some(1500);
    e.recovered = true;
    let f = op(0, 0, OpKind::AllReduce);
    let mut ops = vec![a, b, c, d, e, f];
    for (k, o) in ops.iter_mut().enumerate() {
        o.line = k as u64 + 1;
    }
    t.per_rank.push(ops.into());

    let mut g = gpu(op(1, 2, OpKind::Broadcast), Some(0x55882ce051d0), 1000, 2000);
    g.root = Some(0);
    let mut h = op(1, 1, OpKind::Recv);
    h.peer = Some(0);
    h.tid = 43;
    h.cpu_ts_ns = Some(1200);
    let i = gpu(op(1, 1, OpKind::AllReduce), None, 4000, 4000);
    let mut ops = vec![g, h, i];
    for (k, o) in ops.iter_mut().enumerate() {
        o.line = k as u64 + 1;
    }
    t.per_rank.push(ops.into());
    t
}

/// `../shared/data/real/kineto` next to the repository, or `None` (skipped;
/// a panic under `CI=true`).
pub fn kineto_dir() -> Option<PathBuf> {
    commlens_testdata::real_dir("kineto")
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An argument as it reads back from JSON.
pub fn arg_json(v: &ArgValue) -> Value {
    match v {
        ArgValue::Bool(b) => Value::from(*b),
        ArgValue::Int(x) => Value::from(*x),
        ArgValue::Uint(x) => Value::from(*x),
        ArgValue::Float(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        ArgValue::Str(s) => Value::from(s.as_str()),
        ArgValue::Ptr(p) => Value::from(format!("{p:#x}")),
    }
}

/// What a Chrome trace held, per kind of event.
#[derive(Debug, Default)]
pub struct ChromeCheck {
    pub slices: usize,
    pub instants: usize,
    pub comm_events: usize,
    pub tracks: usize,
    pub processes: usize,
    /// (pid, tid) → thread name.
    pub thread_names: BTreeMap<(u64, u64), String>,
    pub events: Vec<Value>,
}

/// Parses a Chrome trace and checks it against `table`: metadata names every
/// process and track used, each op event's args equal the table's (plus
/// `enrich`'s), the GPU slices of one track never overlap (exact ns from the
/// args), `ts`/`dur` agree with the span, every timed op is drawn once.
pub fn check_chrome(bytes: &[u8], table: &OpTable, enrich: &dyn Enrich) -> ChromeCheck {
    let doc: Value = serde_json::from_slice(bytes).expect("valid JSON");
    let evs = doc["traceEvents"].as_array().expect("traceEvents array").clone();
    let mut out = ChromeCheck::default();
    let mut proc_names = HashMap::new();
    for e in &evs {
        if e["ph"] == "M" {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            match e["name"].as_str().unwrap() {
                "process_name" => {
                    proc_names.insert(key.0, e["args"]["name"].as_str().unwrap().to_string());
                }
                "thread_name" => {
                    out.thread_names.insert(key, e["args"]["name"].as_str().unwrap().to_string());
                }
                "process_sort_index" | "thread_sort_index" => assert!(e["args"]["sort_index"].is_u64()),
                other => panic!("unexpected metadata {other}"),
            }
        }
    }
    out.processes = proc_names.len();
    out.tracks = out.thread_names.len();
    assert_eq!(out.processes, table.devices.len());
    // (pid, tid) → [(start, end)] of GPU slices, exact.
    let mut spans: HashMap<(u64, u64), Vec<(i64, i64)>> = HashMap::new();
    for e in &evs {
        let ph = e["ph"].as_str().unwrap();
        if ph == "M" {
            continue;
        }
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(proc_names.contains_key(&key.0), "event in an unnamed process: {e}");
        assert!(out.thread_names.contains_key(&key), "event on an unnamed thread: {e}");
        let ts = e["ts"].as_f64().expect("ts");
        if e["cat"] == "comm" {
            out.comm_events += 1;
            assert!(e["args"]["comm"].is_string());
            continue;
        }
        let args = e["args"].as_object().unwrap();
        let rank = args.get("global_rank").and_then(Value::as_u64).unwrap_or(key.0);
        let line = args["source_line"].as_u64().unwrap();
        // Find the op by rank and content and compare all its args.
        let d = table.devices.iter().position(|x| x.global_rank.map(u64::from) == Some(rank));
        if let Some(d) = d {
            let cands: Vec<(usize, CollOp)> = table.per_rank[d].iter().enumerate().filter(|(_, o)| o.line == line).collect();
            assert!(!cands.is_empty(), "no table op for {e}");
            let as_json = |(i, o): &(usize, CollOp)| -> serde_json::Map<String, Value> {
                merged_args_at(table, d, *i, o, enrich).iter().map(|(k, v)| (k.to_string(), arg_json(v))).collect()
            };
            let hit = cands.iter().find(|c| &as_json(c) == args);
            let (_, hit) = hit.unwrap_or_else(|| {
                panic!("args of {e} match no op; first candidate: {:?}", as_json(&cands[0]))
            });
            assert_eq!(e["name"].as_str().unwrap(), hit.kind.name());
        }
        match ph {
            "X" => {
                out.slices += 1;
                assert_eq!(e["cat"], "nccl");
                let (s, en) = (args["gpu_start_ns"].as_i64().unwrap(), args["gpu_end_ns"].as_i64().unwrap());
                let dur = e["dur"].as_f64().unwrap();
                let tol = 1e-3 + ts.abs() * 4.5e-16; // two ulps: viewers read ts as f64
                assert!((ts - s as f64 / 1e3).abs() <= tol + 1e-3, "ts {ts} vs {s} ns");
                assert!((dur - (en - s).max(0) as f64 / 1e3).abs() <= tol + 1e-3, "dur {dur} vs {s}..{en}");
                spans.entry(key).or_default().push((s, en.max(s)));
            }
            "i" => {
                out.instants += 1;
                assert_eq!(e["s"], "t");
                assert_eq!(e["cat"], "nccl_enqueue");
                assert!(!args.contains_key("gpu_start_ns"));
                assert!(args.contains_key("cpu_ts_ns"));
            }
            other => panic!("unexpected ph {other}"),
        }
    }
    for (key, mut v) in spans {
        v.sort();
        for w in v.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "overlap on {key:?} ({}): {:?} then {:?}",
                out.thread_names[&key],
                w[0],
                w[1]
            );
        }
    }
    let timed = table.ops().filter(|o| o.gpu.is_some() || o.cpu_ts_ns.is_some()).count();
    assert_eq!(out.slices + out.instants, timed);
    assert_eq!(out.slices, table.ops().filter(|o| o.gpu.is_some()).count());
    out.events = evs;
    out
}

/// A decoded annotation value, comparable with [`ArgValue`].
pub fn annotation_value(a: &commlens_export::perfetto::proto::DebugAnnotation) -> ArgValue {
    let set = [
        a.bool_value.is_some(),
        a.uint_value.is_some(),
        a.int_value.is_some(),
        a.double_value.is_some(),
        a.string_value.is_some(),
        a.pointer_value.is_some(),
    ];
    assert_eq!(set.iter().filter(|x| **x).count(), 1, "exactly one value: {a:?}");
    if let Some(v) = a.bool_value {
        ArgValue::Bool(v)
    } else if let Some(v) = a.uint_value {
        ArgValue::Uint(v)
    } else if let Some(v) = a.int_value {
        ArgValue::Int(v)
    } else if let Some(v) = a.double_value {
        ArgValue::Float(v)
    } else if let Some(v) = &a.string_value {
        ArgValue::Str(v.clone())
    } else {
        ArgValue::Ptr(a.pointer_value.unwrap())
    }
}

/// One slice or instant read back from a Perfetto trace, names resolved.
#[derive(Debug, Clone)]
pub struct PfEvent {
    pub track: u64,
    pub name: String,
    pub category: String,
    pub start: u64,
    pub end: Option<u64>,
    pub args: Vec<(String, ArgValue)>,
}

#[derive(Debug, Default)]
pub struct PerfettoCheck {
    pub packets: usize,
    /// uuid → (name or process name, parent uuid, is process track).
    pub tracks: BTreeMap<u64, (String, Option<u64>, bool)>,
    pub events: Vec<PfEvent>,
}

/// Decodes a Perfetto trace and checks it structurally: one sequence id,
/// incremental-state flags, interned ids defined before use and never
/// redefined, descriptors before events on their track, unique uuids with
/// existing parents, BEGIN/END balanced with no overlap on a stream track.
pub fn check_perfetto(bytes: &[u8]) -> PerfettoCheck {
    let trace: Trace = read_perfetto_trace(bytes).expect("decodes as Trace");
    let mut out = PerfettoCheck { packets: trace.packet.len(), ..Default::default() };
    let (mut names, mut cats, mut anns) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, p) in trace.packet.iter().enumerate() {
        check_packet_flags(i, p);
        if let Some(idata) = &p.interned_data {
            for (map, list) in [
                (&mut names, &idata.event_names),
                (&mut cats, &idata.event_categories),
                (&mut anns, &idata.debug_annotation_names),
            ] {
                for s in list {
                    let (iid, name) = (s.iid.unwrap(), s.name.clone().unwrap());
                    assert_ne!(iid, 0);
                    assert!(map.insert(iid, name).is_none(), "iid {iid} redefined");
                }
            }
        }
        if let Some(td) = &p.track_descriptor {
            assert!(p.track_event.is_none());
            let uuid = td.uuid.expect("uuid");
            let is_proc = td.process.is_some();
            let name = match &td.process {
                Some(pd) => {
                    assert!(pd.pid.unwrap() > 0, "pid 0 is the idle process");
                    pd.process_name.clone().unwrap()
                }
                None => td.name.clone().expect("child tracks are named"),
            };
            if let Some(parent) = td.parent_uuid {
                assert!(
                    out.tracks.get(&parent).is_some_and(|t| t.2),
                    "parent {parent} is a process track seen before"
                );
            }
            assert!(out.tracks.insert(uuid, (name, td.parent_uuid, is_proc)).is_none(), "uuid {uuid} twice");
        }
        if let Some(ev) = &p.track_event {
            let track = ev.track_uuid.expect("track_uuid");
            assert!(out.tracks.contains_key(&track), "event before its track descriptor");
            let ts = p.timestamp.expect("timestamp");
            match EventType::try_from(ev.r#type.unwrap()).unwrap() {
                EventType::SliceBegin | EventType::Instant => {
                    let name = names.get(&ev.name_iid.expect("name_iid")).expect("interned name").clone();
                    assert_eq!(ev.category_iids.len(), 1);
                    let category = cats.get(&ev.category_iids[0]).expect("interned category").clone();
                    let args = ev
                        .debug_annotations
                        .iter()
                        .map(|a| {
                            (
                                anns.get(&a.name_iid.unwrap()).expect("interned annotation").clone(),
                                annotation_value(a),
                            )
                        })
                        .collect();
                    let instant = ev.r#type == Some(EventType::Instant as i32);
                    if !instant {
                        open.entry(track).or_default().push(out.events.len());
                    }
                    out.events.push(PfEvent {
                        track,
                        name,
                        category,
                        start: ts,
                        end: instant.then_some(ts),
                        args,
                    });
                }
                EventType::SliceEnd => {
                    assert!(ev.name_iid.is_none() && ev.debug_annotations.is_empty());
                    let k = open.get_mut(&track).and_then(Vec::pop).expect("END without BEGIN");
                    assert!(ts >= out.events[k].start, "END before BEGIN");
                    out.events[k].end = Some(ts);
                }
                other => panic!("unexpected type {other:?}"),
            }
            let stack = open.get(&track).map_or(0, Vec::len);
            assert!(stack <= 1, "nested slices on track {}", out.tracks[&track].0);
        }
    }
    assert!(open.values().all(Vec::is_empty), "unterminated slices");
    out
}

fn check_packet_flags(i: usize, p: &TracePacket) {
    assert_eq!(p.trusted_packet_sequence_id, Some(SEQUENCE_ID));
    let flags = p.sequence_flags.unwrap_or(0);
    if i == 0 {
        assert_eq!(flags & 1, 1, "first packet clears incremental state");
        assert_eq!(p.first_packet_on_sequence, Some(true));
    } else {
        assert_eq!(flags & 1, 0);
        assert!(p.first_packet_on_sequence.is_none());
    }
    if p.track_event.is_some() {
        assert_eq!(flags & 2, 2, "track events use interned data");
    }
    assert_eq!(p.track_event.is_some(), p.timestamp.is_some());
}
