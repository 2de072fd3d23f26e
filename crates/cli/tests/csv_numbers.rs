//! CSV is for machines: numeric columns hold plain numbers in base units
//! named in the header (`size_bytes`, `busbw_gb_s`), empty when unknown,
//! never the text view's `16.0 MiB` or `216.61 GB/s`. Through the binary.

mod common;

fn csv(args: &[&str]) -> Vec<Vec<String>> {
    let r = common::run_limited(common::commlens_cmd(args), 120, &format!("{args:?}"));
    assert!(r.code == 0 || r.code == 1, "{args:?}: {}", r.err);
    // Blocks (one per table) are separated by blank or `# title` lines: kept as empty rows.
    r.out
        .lines()
        .map(|l| if l.is_empty() || l.starts_with('#') { Vec::new() } else { l.split(',').map(str::to_string).collect() })
        .collect()
}

/// Every cell of the named columns, in every block whose header has them,
/// is a number or empty.
fn assert_numeric(rows: &[Vec<String>], cols: &[&str]) -> usize {
    let mut checked = 0;
    let mut header: Option<&Vec<String>> = None;
    let mut block_start = true;
    for row in rows {
        if row.is_empty() {
            (header, block_start) = (None, true);
            continue;
        }
        if std::mem::replace(&mut block_start, false) && row.iter().any(|c| cols.contains(&c.as_str())) {
            header = Some(row);
            continue;
        }
        let Some(h) = header else { continue };
        for (name, cell) in h.iter().zip(row) {
            if cols.contains(&name.as_str()) {
                assert!(cell.is_empty() || cell.parse::<f64>().is_ok(), "column {name}: {cell:?} is not a number in {row:?}");
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn nccl_tests_tables_in_csv_are_numbers() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    let log = dir.join("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log");
    let rows = csv(&["stats", "--format", "csv", log.to_str().unwrap()]);
    let n = assert_numeric(
        &rows,
        &["min_size_bytes", "max_size_bytes", "peak_busbw_gb_s", "peak_at_bytes", "size_bytes", "oop_time_us", "oop_busbw_gb_s", "ip_busbw_gb_s"],
    );
    assert!(n >= 11 * 4, "{n} cells checked");
    // 8 GiB is exact, not "8.0 GiB".
    assert!(rows.iter().any(|r| r.first().is_some_and(|c| c == "8589934592")), "{rows:?}");
}

#[test]
fn diff_and_model_csv_are_numbers() {
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo-model.conf");
    let rows = csv(&["model", conf, "--format", "csv"]);
    assert!(assert_numeric(&rows, &["theory_bytes", "per_iteration_bytes", "observed_moved_bytes", "ratio"]) >= 4);
    let dir = common::temp_dir("csv", "diff");
    let r = common::run_limited(common::commlens_cmd(&["demo", "--out", dir.join("demo").to_str().unwrap()]), 300, "demo");
    assert_eq!(r.code, 0, "{}", r.err);
    let logs = dir.join("demo/logs");
    let rows = csv(&["diff", logs.to_str().unwrap(), logs.to_str().unwrap(), "--format", "csv", "--all"]);
    assert!(rows.iter().any(|r| r == &["figure", "unit", "a", "b", "change_pct", "verdict"]), "{rows:?}");
    assert!(assert_numeric(&rows, &["a", "b", "change_pct"]) >= 10);
    assert!(rows.iter().any(|r| r.get(1).is_some_and(|u| u == "B")), "byte figures carry their unit column");
}

/// One all_reduce_perf run (2 sizes) in nccl-tests' format, on host `box`.
fn bench_run(scale: f64) -> String {
    format!(
        "# nThread 1 nGpus 2 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on        box device  0 [0000:17:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4242 on        box device  1 [0000:65:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    20.00   52.43   {:.2}      0    20.00   52.43   52.43      0
     2097152        524288     float     sum      -1    30.00   69.91   {:.2}      0    30.00   69.91   69.91      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 60.00
#
",
        52.43 * scale,
        69.91 * scale
    )
}

#[test]
fn a_sweep_of_many_runs_is_summarised_unless_sizes_is_asked() {
    let dir = common::temp_dir("csv", "sweep");
    let sweep = dir.join("sweep.out");
    let text: String = (0..6).map(|i| bench_run(1.0 + i as f64 / 10.0)).collect();
    std::fs::write(&sweep, text).unwrap();
    let r = common::run_limited(common::commlens_cmd(&["stats", sweep.to_str().unwrap()]), 60, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("6 runs summarised") && !r.out.contains("oop busbw"), "{}", r.out);
    let r = common::run_limited(common::commlens_cmd(&["stats", sweep.to_str().unwrap(), "--sizes"]), 60, "stats");
    assert_eq!(r.out.matches("oop busbw").count(), 6, "{}", r.out);
    // CSV has every run's rows without asking.
    let rows = csv(&["stats", sweep.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(rows.iter().filter(|r| r.first().is_some_and(|c| c == "1048576")).count(), 6);
}
