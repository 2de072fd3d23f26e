//! The re-implemented tuner against what NCCL itself printed, on every real
//! log with tuning lines: given the log's own search graphs (`Pattern …`),
//! its communicator shape and its GPU (from the nccl-tests header of the same
//! file), (1) our latency/bandwidth table equals NCCL's printed table cell by
//! cell (to its printed 0.1), and (2) our algorithm and protocol equal NCCL's
//! `Bytes -> Algo … proto …` choice for every logged operation. The tables
//! come from [`Predictor::for_comm`], the path the analyses use.

use std::path::PathBuf;

use commlens_core::{CommIdx, NcclVersion};
use commlens_ingest::nccl_tests::read_nccl_tests;
use commlens_model::cluster::CpuVendor;
use commlens_model::gpu::gpu_by_name;
use commlens_model::presets::{preset, preset_for_gpu};
use commlens_model::tuner::{algo_index, func_index, proto_index, tuner_bytes, NcclEnv};
use commlens_model::Predictor;

#[test]
fn tuner_tables_and_choices_match_real_logs() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let (mut cells, mut cells_ok, mut ops, mut ops_ok, mut ch_ok) = (0usize, 0usize, 0usize, 0usize, 0usize);
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "log")) {
        let Ok(loaded) = commlens_ingest::inputs::load_any(std::slice::from_ref(f), &Default::default()) else { continue };
        let t = &loaded.table;
        let logged = t.ops().filter(|o| o.algo.is_some() && o.proto.is_some()).count();
        if logged == 0 {
            continue;
        }
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        // The GPU from the file's nccl-tests header; a log that prints none is
        // named after its GPU in ../shared/data/real/SOURCES.md (…-4xV100-…).
        let gpu = read_nccl_tests(f)
            .ok()
            .and_then(|b| b.runs.iter().flat_map(|r| r.gpu_models.clone()).find_map(|g| gpu_by_name(&g)))
            .or_else(|| name.split('-').find_map(|part| gpu_by_name(part.trim_start_matches(|c: char| c.is_ascii_digit() || c == 'x'))));
        let Some(gpu) = gpu else {
            println!("{name}: no GPU named, skipped");
            continue;
        };
        for (ci, c) in t.comms.iter().enumerate() {
            let Some(info) = c.tuning.as_deref() else { continue };
            if info.graphs.is_empty() {
                continue;
            }
            let (Some(nranks), Some(nnodes)) = (c.nranks, c.n_nodes.or(Some(1))) else { continue };
            let version = t.processes[c.proc.ix()].nccl_version.unwrap_or(NcclVersion::new(2, 27, 7));
            let _ = nnodes;
            let mut cluster = preset(preset_for_gpu(gpu.name).unwrap_or("dgx-a100")).unwrap();
            cluster.gpu = gpu.clone();
            cluster.cpu = CpuVendor::Intel;
            let p = Predictor::for_comm(&cluster, t, CommIdx(ci as u32), version, NcclEnv::default()).unwrap();
            let ours = &p.table;
            for cell in &info.table {
                let Some(fi) = func_index(cell.kind) else { continue };
                let (a, p) = (algo_index(cell.algo), proto_index(cell.proto));
                if cell.bw_gb_s <= 0.0 && ours.bw[fi][a][p] <= 0.0 {
                    continue; // disabled on both sides
                }
                cells += 1;
                let ok = (ours.bw[fi][a][p] - cell.bw_gb_s).abs() <= 0.051 && (ours.lat[fi][a][p] - cell.latency_us).abs() <= 0.051;
                if ok {
                    cells_ok += 1;
                } else {
                    println!(
                        "{name}: {:?} {:?} {:?}: NCCL {:.1}/{:.1}, ours {:.2}/{:.2}",
                        cell.kind, cell.algo, cell.proto, cell.latency_us, cell.bw_gb_s, ours.lat[fi][a][p], ours.bw[fi][a][p]
                    );
                }
            }
            for o in t.ops().filter(|o| o.comm.ix() == ci) {
                let (Some(algo), Some(proto)) = (o.algo, o.proto) else { continue };
                let Some(ch) = ours.choose(o.kind, tuner_bytes(o.kind, o.bytes, nranks)) else { continue };
                ops += 1;
                if ch.algo == algo && ch.proto == proto {
                    ops_ok += 1;
                } else if ops - ops_ok <= 5 {
                    println!("{name}: {:?} {} B: NCCL {:?}/{:?}, ours {:?}/{:?}", o.kind, o.bytes, algo, proto, ch.algo, ch.proto);
                }
                if let Some((lo, hi)) = o.channels {
                    if (hi - lo + 1) as u32 == ch.n_channels {
                        ch_ok += 1;
                    }
                }
            }
        }
    }
    println!("printed table cells reproduced: {cells_ok}/{cells}; operations with NCCL's algorithm and protocol: {ops_ok}/{ops}; channel counts: {ch_ok}/{ops}");
    assert!(cells >= 25, "expected the real logs' tables, got {cells} cells");
    assert!(ops >= 500, "expected the real logs' tuned operations, got {ops}");
    assert!(cells_ok as f64 >= 0.95 * cells as f64, "table cells {cells_ok}/{cells}");
    assert!(ops_ok as f64 >= 0.95 * ops as f64, "choices {ops_ok}/{ops}");
}
