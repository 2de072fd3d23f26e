//! Bandwidth fidelity: every nccl-tests table in `../shared/data/real`
//! (standalone outputs and tables inside NCCL logs) predicted from the
//! cluster its own file describes (GPU names, hosts and ranks → the matching
//! preset), never tuned per file. Prints every row and both medians.
//! Single-rank tables (busbw 0 by definition) are not scored.
//!
//! The targets are 10 % (sizes ≥ 64 MiB) and 25 % (all sizes); the
//! model does not reach them yet (see the printed rows: a 25 Gb/s RoCE pair
//! without GPUDirect, an H100 pair test whose AllToAll runs at a fifth of its
//! Send/Recv rate, GPUDirect-TCPX latencies on H100s read as InfiniBand
//! DGX H100). The asserts guard the figures reached so far against regression.

use std::path::Path;

use commlens_ingest::nccl_tests::read_nccl_tests;
use commlens_model::from_run::{cluster_from_facts, RunFacts};
use commlens_model::predict::DEFAULT_VERSION;
use commlens_model::tuner::NcclEnv;
use commlens_model::Predictor;

struct Row {
    file: String,
    kind: String,
    size: u64,
    measured: f64,
    predicted: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn rows_of(path: &Path, out: &mut Vec<Row>, unscored: &mut usize) {
    let Ok(bench) = read_nccl_tests(path) else { return };
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    for run in &bench.runs {
        let Some(kind) = run.kind else { continue };
        let facts = RunFacts {
            ranks: run.ranks,
            hosts: run.hosts.clone(),
            gpu_names: run.gpu_models.clone(),
            ..RunFacts::default()
        };
        let cluster = cluster_from_facts(&facts, None).expect("cluster");
        let nnodes = run.hosts.len().max(1) as u32;
        let p = Predictor::new(&cluster, run.ranks.max(1), nnodes, DEFAULT_VERSION, NcclEnv::default());
        for r in &run.rows {
            if run.ranks <= 1 {
                *unscored += 1;
                continue;
            }
            let measured = r.out_of_place.busbw_gb_s;
            if !(measured > 0.0) || r.bytes == 0 {
                *unscored += 1;
                continue;
            }
            let pred = p.predict(kind, r.bytes);
            out.push(Row { file: file.clone(), kind: kind.name().to_string(), size: r.bytes, measured, predicted: pred.busbw_gb_s });
        }
    }
}

#[test]
fn predicted_busbw_against_every_real_nccl_tests_table() {
    let mut rows = Vec::new();
    let mut unscored = 0;
    for sub in ["nccl-tests", "nccl-logs"] {
        let Some(dir) = commlens_testdata::real_dir(sub) else { return };
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            rows_of(&f, &mut rows, &mut unscored);
        }
    }
    println!("{:<48} {:<13} {:>12} {:>9} {:>9} {:>7}", "file", "collective", "size", "measured", "predicted", "error");
    let mut all = Vec::new();
    let mut big = Vec::new();
    for r in &rows {
        let err = (r.predicted - r.measured) / r.measured;
        println!(
            "{:<48} {:<13} {:>12} {:>9.2} {:>9.2} {:>6.1}%",
            &r.file[..r.file.len().min(48)],
            r.kind,
            r.size,
            r.measured,
            r.predicted,
            err * 100.0
        );
        all.push(err.abs());
        if r.size >= 64 << 20 {
            big.push(err.abs());
        }
    }
    let (m_all, m_big) = (median(all.clone()), median(big.clone()));
    println!(
        "rows scored: {} (≥ 64 MiB: {}), unscored single-rank or empty: {unscored}; median |error| all sizes {:.1} %, ≥ 64 MiB {:.1} %",
        all.len(),
        big.len(),
        m_all * 100.0,
        m_big * 100.0
    );
    assert!(all.len() >= 100, "expected the real tables to give ≥ 100 rows, got {}", all.len());
    println!("issue targets: ≥ 64 MiB ≤ 10 %, all sizes ≤ 25 %");
    assert!(m_big <= 0.16, "median |error| for sizes ≥ 64 MiB is {:.1} % (regression guard 16 %)", m_big * 100.0);
    assert!(m_all <= 0.35, "median |error| over all sizes is {:.1} % (regression guard 35 %)", m_all * 100.0);
}
