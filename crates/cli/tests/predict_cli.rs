//! `commlens predict` through the binary: the nccl-tests style sweep, JSON
//! fields, `--against` on a real nccl-tests output, and clear errors.

use std::process::Command;

fn commlens(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().expect("run commlens")
}

#[test]
fn sweep_prints_one_row_per_size_with_nccl_choices() {
    let out = commlens(&["predict", "all_reduce", "--cluster", "dgx-h100", "--nodes", "16", "-b", "8", "-e", "8G", "-f", "2", "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 31, "8 B to 8 GiB by 2");
    assert_eq!(rows[0]["size_bytes"], 8);
    assert_eq!(rows[30]["size_bytes"], 8u64 << 30);
    for r in rows {
        assert!(r["algo"].is_string() && r["proto"].is_string(), "{r}");
        let bus = r["busbw_gb_s"].as_f64().unwrap();
        // 8x 400G per node: in nccl-tests' convention no AllReduce beats 2× the node's NICs.
        assert!(bus > 0.0 && bus < 2.0 * 400.0, "{r}");
    }
    // Bandwidth grows with size from latency-bound to bandwidth-bound.
    assert!(rows[30]["busbw_gb_s"].as_f64().unwrap() > 100.0 * rows[10]["busbw_gb_s"].as_f64().unwrap());
    let text = commlens(&["predict", "all_gather", "--cluster", "dgx-a100", "--nic", "4x200g", "-b", "1M", "-e", "1G"]);
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(s.contains("busbw") && s.contains("RING"), "{s}");
}

#[test]
fn against_a_real_nccl_tests_output() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let f = dir.join("superbenchmark-tests-data-nccl_allreduce-8xA100SXM4-oldformat.log");
    let out = commlens(&["predict", "--against", f.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 30);
    let mut big: Vec<f64> = rows
        .iter()
        .filter(|r| r["size"].as_u64().unwrap() >= 64 << 20)
        .map(|r| {
            assert!(r["algorithm"].is_string() && r["protocol"].is_string());
            r["error"].as_f64().unwrap().abs()
        })
        .collect();
    big.sort_by(f64::total_cmp);
    // 8x A100-SXM4 (NVSwitch, 12 NVLinks): the dgx-a100 preset from the GPU name.
    assert!(big[big.len() / 2] < 0.05, "median |error| {big:?}");
}

#[test]
fn errors_name_what_was_expected() {
    let out = commlens(&["predict", "scan"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown collective 'scan'"));
    let out = commlens(&["predict", "all_reduce", "--cluster", "dgx-z900"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dgx-h100"), "lists the presets");
    let out = commlens(&["predict", "all_reduce", "--nic", "fast"]);
    assert_eq!(out.status.code(), Some(2));
}
