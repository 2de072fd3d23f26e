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

#[test]
fn alternatives_and_forced_algorithms() {
    // PCCL's two-level AllGather against NCCL's ring at 512 GPUs: far faster for
    // small messages (log-depth inter-node stage), close for 1 GiB (bandwidth-bound).
    let out = commlens(&["predict", "all_gather", "--cluster", "dgx-h100", "--nodes", "64", "--algo", "pccl", "-b", "1M", "-e", "1G", "-f", "4", "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r["algo"] == "pccl" && r["formula"].is_string()));
    let first = rows[0]["speedup"].as_f64().unwrap();
    let last = rows[5]["speedup"].as_f64().unwrap();
    assert!(first > 5.0 && last < first, "speedups {first} … {last}");
    // NCCL_ALGO semantics: forcing Ring on one node.
    let out = commlens(&["predict", "all_reduce", "--cluster", "dgx-a100", "--algo", "ring", "-b", "1G", "-e", "1G", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["algo"], "Ring");
    // An alternative that does not implement the collective says so.
    let out = commlens(&["predict", "broadcast", "--algo", "ncclx-bruck"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not implement"));
}
