//! Perfetto protobuf from a hand-built table, decoded back with the same
//! prost structs: packets, tracks and their names/parents/order, BEGIN/END
//! pairing, annotations against the table, interning and sequence flags,
//! negative-time shift, the empty table.

mod common;

use commlens_core::model::GpuSpan;
use commlens_core::{CollOp, OpTable};
use commlens_export::chrome::write_chrome_trace;
use commlens_export::perfetto::proto::Trace;
use commlens_export::perfetto::{
    read_perfetto_trace, track_uuid, write_perfetto_trace, write_perfetto_trace_file,
};
use commlens_export::timeline::{merged_args, ArgValue, Enrich, NoEnrich, TraceOptions, TraceSummary};
use common::*;

fn export(table: &OpTable, enrich: &dyn Enrich, opts: &TraceOptions) -> (Vec<u8>, TraceSummary) {
    let mut buf = Vec::new();
    let sum = write_perfetto_trace(table, enrich, opts, &mut buf).unwrap();
    assert_eq!(sum.bytes, buf.len() as u64);
    (buf, sum)
}

fn named(args: &[(&'static str, ArgValue)]) -> Vec<(String, ArgValue)> {
    args.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// Every op event's annotations equal the table's arguments of some op of its rank.
fn check_args(table: &OpTable, check: &PerfettoCheck, enrich: &dyn Enrich) -> usize {
    let mut n = 0;
    for e in check.events.iter().filter(|e| e.category != "comm") {
        let (track_name, parent, _) = &check.tracks[&e.track];
        let rank = check.tracks[&parent.unwrap()].0.split(' ').nth(1).unwrap().parse::<u32>().unwrap();
        let d = table.devices.iter().position(|x| x.global_rank == Some(rank)).unwrap();
        let hit = table.per_rank[d].iter().any(|o: CollOp| named(&merged_args(table, &o, enrich)) == e.args);
        assert!(hit, "annotations of {} on {track_name} match no op: {:?}", e.name, e.args);
        if e.category == "nccl_enqueue" {
            assert_eq!(e.end, Some(e.start), "CPU-only operations are instants");
        }
        n += 1;
    }
    n
}

#[test]
fn hand_table_packets_tracks_slices() {
    let t = hand_table();
    let (buf, sum) = export(&t, &NoEnrich, &TraceOptions::default());
    let c = check_perfetto(&buf);
    // 2 process + 10 child descriptors, 12 slices × 2 packets, 4 instants.
    assert_eq!(c.packets, 2 + 10 + 2 * 12 + 4);
    let mut chrome = Vec::new();
    let csum = write_chrome_trace(&t, &NoEnrich, &TraceOptions::default(), &mut chrome).unwrap();
    assert_eq!(TraceSummary { bytes: 0, ..sum.clone() }, TraceSummary { bytes: 0, ..csum });

    let procs: Vec<&str> = c.tracks.values().filter(|t| t.2).map(|t| t.0.as_str()).collect();
    assert_eq!(procs, ["rank 0 (node7:100, GPU 0)", "rank 1 (node7:101, GPU 1)"]);
    let children: Vec<&str> = c
        .tracks
        .iter()
        .filter(|(u, t)| !t.2 && t.1 == Some(track_uuid(0, None)) && **u > 0)
        .map(|(_, t)| t.0.as_str())
        .collect();
    assert_eq!(
        children,
        [
            "GPU stream 7",
            "GPU stream 7 (overlap 1)",
            "GPU stream 9",
            "CPU thread 42 (enqueue)",
            "communicators",
            "communicators (overlap 1)"
        ]
    );
    let trace: Trace = read_perfetto_trace(&buf).unwrap();
    let descs: Vec<_> = trace.packet.iter().filter_map(|p| p.track_descriptor.as_ref()).collect();
    assert_eq!(descs[0].process.as_ref().unwrap().pid, Some(1), "pid = rank + 1");
    assert_eq!(descs[0].child_ordering, Some(3));
    assert_eq!(descs[1].sibling_order_rank, Some(0));
    assert_eq!(descs[2].sibling_order_rank, Some(1));

    let on = |name: &str| c.events.iter().filter(|e| c.tracks[&e.track].0 == name).collect::<Vec<_>>();
    let s7 = on("GPU stream 7");
    assert_eq!(
        s7.iter().map(|e| (e.start, e.end.unwrap())).collect::<Vec<_>>(),
        [(1000, 5000), (6000, 7000)]
    );
    let over = on("GPU stream 7 (overlap 1)");
    assert_eq!((over.len(), over[0].start, over[0].end), (1, 3000, Some(6000)));
    let cpu = on("CPU thread 42 (enqueue)");
    assert_eq!((cpu[0].name.as_str(), cpu[0].start, cpu[0].end), ("Send", 1500, Some(1500)));
    assert_eq!(cpu[0].category, "nccl_enqueue");
    let a = &s7[0];
    assert_eq!(a.name, "AllReduce");
    assert_eq!(a.args, named(&merged_args(&t, &t.per_rank[0].op(0), &NoEnrich)));
    assert!(a.args.contains(&("sendbuff".into(), ArgValue::Ptr(0x1461be300000))));
    assert!(a.args.contains(&("correlation_id".into(), ArgValue::Uint(511438))));
    assert_eq!(check_args(&t, &c, &NoEnrich), 8);
    let comm: Vec<&str> = c.events.iter().filter(|e| e.category == "comm").map(|e| e.name.as_str()).collect();
    assert_eq!(comm.len(), 8);
    assert_eq!(comm.iter().filter(|n| **n == "tp0").count(), 7);
    assert_eq!(sum.untimed_ops, 1);
}

#[test]
fn interning_emits_each_name_once() {
    let t = hand_table();
    let (buf, _) = export(&t, &NoEnrich, &TraceOptions::default());
    let trace = read_perfetto_trace(&buf).unwrap();
    let mut names = Vec::new();
    for p in &trace.packet {
        if let Some(i) = &p.interned_data {
            names.extend(i.debug_annotation_names.iter().map(|s| s.name.clone().unwrap()));
        }
    }
    let mut uniq = names.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), names.len());
    assert!(names.contains(&"kernel".to_string()) && names.contains(&"sendbuff".to_string()));
}

#[test]
fn enrichment_annotations() {
    let t = hand_table();
    let f = |op: &CollOp| {
        vec![
            ("busbw_gb_s", ArgValue::Float(op.bytes as f64 * 1.5)),
            ("parallelism", ArgValue::Str("Tensor Parallelism".into())),
            ("efficiency_pct", ArgValue::Float(72.2192420025871)),
        ]
    };
    let (buf, _) = export(&t, &f, &TraceOptions::default());
    let c = check_perfetto(&buf);
    assert_eq!(check_args(&t, &c, &f), 8);
    let a = c
        .events
        .iter()
        .find(|e| e.args.contains(&("correlation_id".into(), ArgValue::Uint(511438))))
        .unwrap();
    assert_eq!(a.args.last().unwrap(), &("efficiency_pct".to_string(), ArgValue::Float(72.2192420025871)));
}

#[test]
fn negative_times_are_shifted() {
    let mut t = hand_table();
    t.per_rank[0].update(0, |o| o.gpu = Some(GpuSpan { start_ns: -500, end_ns: 800 }));
    let (buf, _) = export(&t, &NoEnrich, &TraceOptions::default());
    let c = check_perfetto(&buf);
    let min = c.events.iter().map(|e| e.start).min().unwrap();
    assert_eq!(min, 0);
    // Everything moved by the same 500 ns.
    assert!(c.events.iter().any(|e| e.start == 6500 && e.end == Some(7500)));
    // An offset that makes times negative is handled the same way.
    let (buf, _) =
        export(&hand_table(), &NoEnrich, &TraceOptions { time_offset_ns: 10_000, comm_track: false, ..Default::default() });
    let c = check_perfetto(&buf);
    assert_eq!(c.events.iter().map(|e| e.start).min(), Some(0));
}

#[test]
fn empty_table_is_a_valid_trace() {
    let (buf, sum) = export(&OpTable::default(), &NoEnrich, &TraceOptions::default());
    assert_eq!(sum, TraceSummary { bytes: buf.len() as u64, ..TraceSummary::default() });
    let c = check_perfetto(&buf);
    assert_eq!(c.packets, 1);
    assert_eq!(c.tracks.values().next().unwrap().0, "commlens: no operations");
    assert!(c.events.is_empty());
    // A table with ranks but no operations: process tracks only.
    let mut t = hand_table();
    t.per_rank.iter_mut().for_each(commlens_core::RankOps::clear);
    let (buf, sum) = export(&t, &NoEnrich, &TraceOptions::default());
    let c = check_perfetto(&buf);
    assert_eq!((c.packets, sum.processes, sum.tracks), (2, 2, 0));
}

#[test]
fn file_writer() {
    let dir = temp_dir("perfetto-file");
    let path = dir.join("t.pftrace");
    let sum = write_perfetto_trace_file(&hand_table(), &NoEnrich, &TraceOptions::default(), &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, sum.bytes);
    check_perfetto(&bytes);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn nvtx_ranges_get_their_own_process_and_lanes() {
    use commlens_export::TimeRange;
    let t = hand_table();
    let r = |name: &str, s: i64, e: i64, rank| TimeRange { name: name.into(), start_ns: s, end_ns: e, rank };
    let ranges = vec![
        r("ProfilerStep#1", 1_000, 50_000, Some(0)),
        r("forward", 2_000, 20_000, Some(0)), // nested: one level down
        r("ProfilerStep#2", 50_000, 90_000, Some(0)),
        r("ProfilerStep#1", 1_500, 60_000, Some(1)),
        r("bad", 10, 5, Some(1)), // ends before it starts: not drawn
    ];
    let opts = TraceOptions { ranges, ..TraceOptions::default() };
    let (buf, sum) = export(&t, &NoEnrich, &opts);
    assert_eq!(sum.ranges, 4);
    let c = check_perfetto(&buf);
    let proc = c.tracks.iter().find(|(_, v)| v.2 && v.0 == "NVTX ranges").map(|(k, _)| *k).expect("ranges process");
    let lanes: Vec<&str> =
        c.tracks.values().filter(|v| v.1 == Some(proc)).map(|v| v.0.as_str()).collect();
    assert_eq!(lanes, ["rank 0", "rank 0 · level 1", "rank 1"]);
    let nvtx: Vec<(&str, u64, Option<u64>)> =
        c.events.iter().filter(|e| e.category == "nvtx").map(|e| (e.name.as_str(), e.start, e.end)).collect();
    assert_eq!(nvtx.len(), 4);
    assert!(nvtx.contains(&("forward", 2_000, Some(20_000))));
    // The Chrome writer draws the same.
    let mut chrome = Vec::new();
    let csum = write_chrome_trace(&t, &NoEnrich, &opts, &mut chrome).unwrap();
    assert_eq!(csum.ranges, 4);
    let v: serde_json::Value = serde_json::from_slice(&chrome).unwrap();
    let n = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "nvtx" && e["ph"] == "X").count();
    assert_eq!(n, 4);
}
