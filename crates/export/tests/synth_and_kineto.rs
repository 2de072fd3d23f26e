//! Both exporters on real-sized tables: the built-in synthetic run (NCCL logs
//! with timestamps → CPU-only operations → instants) and a real Kineto trace
//! (GPU kernel spans → slices, with kernel details). Each trace is read back
//! and checked structurally against its table; sizes are printed.
//!
//! For a look in Perfetto's UI or `trace_processor`, set
//! `COMMLENS_TRACE_DUMP=DIR` and the traces are also written there
//! (`synth.json`, `synth.pftrace`, `kineto.json`, `kineto.pftrace`).

mod common;

use commlens_core::OpTable;
use commlens_export::chrome::write_chrome_trace;
use commlens_export::perfetto::write_perfetto_trace;
use commlens_export::timeline::{NoEnrich, TraceOptions, TraceSummary};
use common::*;
use std::collections::HashMap;

fn both(table: &OpTable, name: &str) -> (Vec<u8>, TraceSummary, Vec<u8>, TraceSummary) {
    let opts = TraceOptions::default();
    let (mut j, mut p) = (Vec::new(), Vec::new());
    let js = write_chrome_trace(table, &NoEnrich, &opts, &mut j).unwrap();
    let ps = write_perfetto_trace(table, &NoEnrich, &opts, &mut p).unwrap();
    assert_eq!(TraceSummary { bytes: 0, ..js.clone() }, TraceSummary { bytes: 0, ..ps.clone() });
    if let Some(dir) = std::env::var_os("COMMLENS_TRACE_DUMP") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), &j).unwrap();
        std::fs::write(dir.join(format!("{name}.pftrace")), &p).unwrap();
    }
    (j, js, p, ps)
}

/// Perfetto: op events per track type agree with the summary, no two slices
/// of a stream track overlap (exact ns; the checker also rejects nesting).
fn check_perfetto_against(bytes: &[u8], sum: &TraceSummary) -> PerfettoCheck {
    let c = check_perfetto(bytes);
    let (mut slices, mut instants, mut comm) = (0, 0, 0);
    let mut per_track: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for e in &c.events {
        match e.category.as_str() {
            "nccl" => {
                slices += 1;
                per_track.entry(e.track).or_default().push((e.start, e.end.unwrap()));
            }
            "nccl_enqueue" => instants += 1,
            "comm" => comm += 1,
            other => panic!("category {other}"),
        }
    }
    assert_eq!((slices, instants, comm), (sum.slices, sum.instants, sum.comm_track_events));
    assert_eq!(c.tracks.len(), sum.processes + sum.tracks);
    for (track, mut v) in per_track {
        v.sort();
        for w in v.windows(2) {
            assert!(w[1].0 >= w[0].1, "overlap on {}", c.tracks[&track].0);
        }
    }
    c
}

#[test]
fn synthetic_demo_run() {
    let run = commlens_synth::generate(&commlens_synth::RunConfig::default());
    let dir = temp_dir("synth");
    commlens_synth::write_to_dir(&run, &dir).unwrap();
    let loaded = commlens_ingest::load_inputs(std::slice::from_ref(&dir), &Default::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let table = loaded.table;
    assert!(table.n_ops() > 0);
    assert!(table.ops().all(|o| o.gpu.is_none()), "logs have no GPU spans");
    let timed = table.ops().filter(|o| o.cpu_ts_ns.is_some()).count();
    assert!(timed > 0, "the default run has timestamps");

    let (j, js, p, ps) = both(&table, "synth");
    assert_eq!((js.slices, js.instants, js.untimed_ops), (0, timed, table.n_ops() - timed));
    assert_eq!(js.processes, table.devices.len());
    let c = check_chrome(&j, &table, &NoEnrich);
    assert_eq!(c.instants, timed);
    check_perfetto_against(&p, &ps);
    println!(
        "synthetic demo run: {} ranks, {} ops, {} tracks -> Chrome JSON {} bytes, Perfetto {} bytes",
        table.devices.len(),
        table.n_ops(),
        js.tracks,
        js.bytes,
        ps.bytes
    );
}

#[test]
fn real_kineto_trace() {
    let Some(dir) = kineto_dir() else { return };
    let path = dir.join("hta-trace_diff-control-rank3of8-A100.json.gz");
    let loaded = commlens_ingest::load_any(&[path], &Default::default()).unwrap();
    let table = loaded.table;
    let with_gpu = table.ops().filter(|o| o.gpu.is_some()).count();
    assert!(with_gpu > 0);
    let (j, js, p, ps) = both(&table, "kineto");
    assert_eq!(js.slices, with_gpu);
    let c = check_chrome(&j, &table, &NoEnrich);
    assert_eq!(c.slices, with_gpu);
    // Kernel details made it into the args.
    let x = c.events.iter().find(|e| e["ph"] == "X").unwrap();
    assert!(x["args"]["kernel"].as_str().unwrap().contains("nccl"), "{x}");
    assert!(x["args"]["grid"].is_string() && x["args"]["correlation_id"].is_u64());
    let pc = check_perfetto_against(&p, &ps);
    let k = pc.events.iter().find(|e| e.category == "nccl").unwrap();
    assert!(k.args.iter().any(|(n, _)| n == "kernel"));
    println!(
        "kineto rank3of8: {} ranks, {} ops ({} with GPU span), {} tracks ({} overflow) -> Chrome JSON {} bytes, Perfetto {} bytes",
        table.devices.len(),
        table.n_ops(),
        with_gpu,
        js.tracks,
        js.overflow_tracks,
        js.bytes,
        ps.bytes
    );
}
