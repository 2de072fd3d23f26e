//! Bandwidth fidelity of the collective model, through the binary: every
//! nccl-tests table in `../shared/data/real` (standalone outputs and tables
//! inside NCCL logs) is run through `commlens predict --against FILE
//! --format json`, which builds the cluster from the file itself (GPU names,
//! hosts, ranks, the topology and network lines of a log beside the table)
//! and uses NCCL's own search graphs when the log printed them. Nothing is
//! tuned per file. Every row is printed with its error; single-rank tables
//! (busbw 0 by definition) are not scored.

use std::process::Command;

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[test]
fn predicted_busbw_against_every_real_nccl_tests_table() {
    let mut all = Vec::new();
    let mut big = Vec::new();
    let mut files_with_tables = 0;
    for sub in ["nccl-tests", "nccl-logs"] {
        let Some(dir) = commlens_testdata::real_dir(sub) else { return };
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files.iter().filter(|f| f.extension().is_none_or(|e| e != "xml")) {
            let out = Command::new(env!("CARGO_BIN_EXE_commlens"))
                .args(["predict", "--against", f.to_str().unwrap(), "--format", "json"])
                .output()
                .unwrap();
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("no nccl-tests result table"), "{name}: {err}");
                continue;
            }
            files_with_tables += 1;
            let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            for r in rows.as_array().unwrap() {
                let Some(e) = r["error"].as_f64() else { continue };
                let size = r["size"].as_u64().unwrap();
                println!(
                    "{:<44} {:<13} {:>5} {:>12} {:>9.2} {:>9.2} {:>+7.1}%  {}/{}",
                    &name[..name.len().min(44)],
                    r["collective"].as_str().unwrap(),
                    r["ranks"],
                    size,
                    r["measured_busbw"].as_f64().unwrap(),
                    r["predicted_busbw"].as_f64().unwrap(),
                    e * 100.0,
                    r["algorithm"].as_str().unwrap_or("p2p"),
                    r["protocol"].as_str().unwrap_or("-"),
                );
                all.push(e.abs());
                if size >= 64 << 20 {
                    big.push(e.abs());
                }
            }
        }
    }
    let (n_all, n_big) = (all.len(), big.len());
    let (m_all, m_big) = (median(all), median(big));
    println!(
        "{files_with_tables} files with tables; rows scored: {n_all} (≥ 64 MiB: {n_big}); \
         median |error| all sizes {:.1} %, ≥ 64 MiB {:.1} %",
        m_all * 100.0,
        m_big * 100.0
    );
    assert!(files_with_tables >= 10, "expected the real nccl-tests outputs and logs with tables");
    assert!(n_all >= 100, "expected ≥ 100 scored rows, got {n_all}");
    // The bounds: 10 % for sizes ≥ 64 MiB, 25 % over all sizes. Rows
    // known to be far off for reasons their files don't show stay in the median
    // (a 25 Gb/s RoCE pair without GPUDirect through a debug-instrumented NCCL,
    // a faulty H100 pair, GPUDirect-TCPXO read as InfiniBand, NVLink-bridged
    // A100s ramping to their peak more slowly than any latency + bytes/bandwidth
    // curve).
    println!("issue bounds: ≥ 64 MiB ≤ 10 %, all sizes ≤ 25 %");
    assert!(m_big <= 0.10, "median |error| for sizes ≥ 64 MiB is {:.1} % (bound 10 %)", m_big * 100.0);
    assert!(m_all <= 0.25, "median |error| over all sizes is {:.1} % (bound 25 %)", m_all * 100.0);
}
