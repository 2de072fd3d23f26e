//! Anomaly detection with its default settings on every clean real input with GPU timing
//! under ../shared/data/real: the Kineto traces (the 8-rank DLRM set read from its archive),
//! the nsys exports (the 4-rank set together, the 2-rank window alone) and the NVIDIA plugin
//! samples (the 4-rank Inspector dump together, each other sample alone). None is a run with
//! a known slowdown, so none may report an anomaly. What the rule saw is printed per input:
//! operations, timed ones, judged samples, lone ones and the largest score.
//!
//! Skipped with a note when ../shared is absent, a failure under CI=true.

use commlens_analyze::anomaly::{detect_anomalies, AnomalyConfig};
use commlens_analyze::iteration::detect_iterations;
use commlens_ingest::load_any;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::PathBuf;

/// Inputs read together: the files of one job.
fn inputs() -> Option<Vec<(String, Vec<PathBuf>)>> {
    let root = commlens_testdata::real_dir("")?;
    let mut out = Vec::new();
    let files = |sub: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    for f in files("kineto") {
        out.push((
            f.file_name().unwrap().to_string_lossy().into_owned(),
            vec![f],
        ));
    }
    let nsys = files("nsys");
    let (ault, other): (Vec<PathBuf>, Vec<PathBuf>) = nsys
        .into_iter()
        .partition(|p| p.to_string_lossy().contains("ZhiyiHu1999"));
    out.push(("nsys 4-rank allreduce set".into(), ault));
    for f in other {
        out.push((
            f.file_name().unwrap().to_string_lossy().into_owned(),
            vec![f],
        ));
    }
    let plugin = files("plugin-json");
    let (inspector, other): (Vec<PathBuf>, Vec<PathBuf>) = plugin
        .into_iter()
        .partition(|p| p.to_string_lossy().contains("-rank-pid"));
    out.push(("Inspector 4-rank all_reduce_perf dump".into(), inspector));
    for f in other {
        out.push((
            f.file_name().unwrap().to_string_lossy().into_owned(),
            vec![f],
        ));
    }
    Some(out)
}

#[test]
fn clean_real_inputs_report_no_anomaly() {
    let Some(sets) = inputs() else { return };
    let mut timed_inputs = 0;
    let mut judged_total = 0;
    for (name, files) in sets {
        // Archives (the DLRM set) are unpacked first, as the command line does.
        let tmp =
            std::env::temp_dir().join(format!("commlens-anomaly-real-{}", std::process::id()));
        let (files, _) = commlens_ingest::unpack_archives(&files, &tmp).unwrap();
        let loaded = load_any(&files, &ReadOptions::default());
        let _ = std::fs::remove_dir_all(&tmp);
        let loaded = match loaded {
            Ok(l) => l,
            // Samples that hold no operations (an exporter's log) are not runs.
            Err(e) => {
                println!("{name}: not a run ({e})");
                continue;
            }
        };
        let t = &loaded.table;
        let iters = detect_iterations(t, None);
        let rep = detect_anomalies(t, Some(&iters), &AnomalyConfig::default());
        println!(
            "{name}: {} ops, {} timed, {} samples judged in {}/{} histories, {} lone, largest score {} , {} late arrivals, anomalies {}",
            rep.ops,
            rep.timed_ops,
            rep.judged,
            rep.histories_judged,
            rep.histories,
            rep.lone,
            rep.largest_score.map_or_else(|| "-".into(), |s| format!("{s:.1} ({})", rep.largest_where.as_deref().unwrap_or("?"))),
            rep.late_arrivals,
            rep.anomalies.len()
        );
        for a in &rep.anomalies {
            println!("  {a:?}");
        }
        assert!(
            rep.anomalies.is_empty(),
            "{name}: a clean real input reported anomalies"
        );
        timed_inputs += usize::from(rep.timed_ops > 0);
        judged_total += rep.judged;
    }
    println!("{timed_inputs} inputs with GPU timing, {judged_total} samples judged in all");
    assert!(
        timed_inputs >= 5,
        "the real inputs with GPU timing were read"
    );
    assert!(
        judged_total >= 1000,
        "the Inspector dump alone gives thousands of judged instances"
    );
}
