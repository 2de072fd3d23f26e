//! `commlens cluster` through the binary: the preset list, a preset with a NIC
//! override, the example TOML file, a damaged TOML file, an unknown name, and
//! clusters built from real runs (skipped with a note without ../shared).

use std::path::{Path, PathBuf};
use std::process::Command;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = commlens(args);
    assert_eq!(code, 0, "commlens {args:?}: {err}");
    out
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-cli-cluster-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn example() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cluster.toml"))
}

#[test]
fn list_names_every_preset() {
    let out = ok(&["cluster", "list"]);
    let names = [
        "dgx-v100", "dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "gh200-slingshot", "pcie-a100",
        "rtx4090-pcie", "rtx3090-pcie", "a3-mega", "hgx-h20",
    ];
    for n in names {
        assert!(out.lines().any(|l| l.starts_with(n)), "{n} missing:\n{out}");
    }
    assert_eq!(out.lines().count(), names.len(), "{out}");
    assert!(out.contains("NVIDIA DGX H100"));
}

#[test]
fn preset_with_nic_override() {
    let out = ok(&["cluster", "show", "dgx-h100", "--nic", "4x200g"]);
    assert!(out.contains("4x 200 Gbit/s InfiniBand (25 GB/s each, 100 GB/s per node)"), "{out}");
    assert!(out.contains("1 node x 8 GPUs = 8 GPUs"), "{out}");
    assert!(out.contains("--nic 4x200g"), "{out}");

    let out = ok(&["cluster", "show", "dgx-a100", "--nodes", "4", "--gpus-per-node", "4", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 4);
    assert_eq!(v["gpus_per_node"], 4);
    assert_eq!(v["gpu"]["name"], "A100");
    assert_eq!(v["intra"]["fabric"], "NvSwitch");
    assert_eq!(v["intra"]["nvlink_domain"], 4);
    assert_eq!(v["nics"]["per_node"], 8);

    let (code, _, err) = commlens(&["cluster", "show", "dgx-h100", "--nic", "lots"]);
    assert_ne!(code, 0);
    assert!(err.contains("COUNTxSPEED"), "{err}");
}

#[test]
fn unknown_name_lists_the_presets() {
    let (code, _, err) = commlens(&["cluster", "show", "dgx-h9000"]);
    assert_ne!(code, 0);
    assert!(err.contains("dgx-h9000") && err.contains("dgx-h100") && err.contains("a3-mega"), "{err}");
}

#[test]
fn toml_file_and_its_errors() {
    let ex = example();
    let out = ok(&["cluster", "show", ex.to_str().unwrap()]);
    assert!(out.contains("Cluster h100-2node-4x400g"), "{out}");
    assert!(out.contains("2 nodes x 8 GPUs = 16 GPUs"), "{out}");
    assert!(out.contains("4x 400 Gbit/s InfiniBand (50 GB/s each, 200 GB/s per node), rail-aligned"), "{out}");
    assert!(out.contains("2:1 oversubscribed"), "{out}");
    let json = ok(&["cluster", "show", ex.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["network"]["oversubscription"], 2.0);

    let d = scratch("toml");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "preset = \"dgx-h100\"\nnodes = 2\n\n[nics]\ncount = 4\nspeeed = \"400g\"\n").unwrap();
    let (code, _, err) = commlens(&["cluster", "show", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("bad.toml:6:"), "{err}");
    assert!(err.contains("speeed") && err.contains("`speed`"), "{err}");

    let bad_value = d.join("value.toml");
    std::fs::write(&bad_value, "preset = \"dgx-h100\"\n[network]\nshape = \"torus\"\n").unwrap();
    let (code, _, err) = commlens(&["cluster", "show", bad_value.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("value.toml:3:") && err.contains("rail-fat-tree"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

fn real(name: &str) -> Option<PathBuf> {
    let p = commlens_testdata::real_dir("nccl-logs")?.join(name);
    if p.is_file() {
        Some(p)
    } else {
        commlens_testdata::skip("cluster from a real run", &format!("{} not found", p.display()));
        None
    }
}

#[test]
fn real_log_builds_its_cluster() {
    let Some(log) = real("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log") else { return };
    let out = ok(&["cluster", "show", log.to_str().unwrap()]);
    assert!(out.contains("1 node x 2 GPUs = 2 GPUs"), "{out}");
    assert!(out.contains("A100-PCIe (sm_80)"), "{out}");
    assert!(out.contains("NVLink bridges between GPU pairs, NVLink 300 GB/s per GPU one direction, NCCL rates it 240 GB/s"), "{out}");
    assert!(out.contains("2x 100 Gbit/s RoCE"), "{out}");
    assert!(out.contains("from the topology dump of host mew0"), "{out}");

    // A folder with the log and its topology XML; the JSON form.
    let d = scratch("real");
    let xml = log.with_file_name("timez-zx-nccl-tests-nccl_topo_dump_normal.xml");
    std::fs::copy(&log, d.join("run.log")).unwrap();
    if xml.is_file() {
        std::fs::copy(&xml, d.join("topo.xml")).unwrap();
    }
    let v: serde_json::Value = serde_json::from_str(&ok(&["cluster", "show", d.to_str().unwrap(), "--format", "json"])).unwrap();
    assert_eq!(v["intra"]["fabric"], "NvLinkPairs");
    assert_eq!(v["gpus_per_node"], 2);
    assert_eq!(v["nics"]["tech"], "RoCE");
    assert!(v["provenance"].as_array().unwrap().len() > 5);
    let _ = std::fs::remove_dir_all(&d);

    // The topology XML alone, and a two-host log.
    if xml.is_file() {
        let out = ok(&["cluster", "show", xml.to_str().unwrap()]);
        assert!(out.contains("2x 100 Gbit/s"), "{out}");
        assert!(out.contains("sm_80 in the topology XML"), "{out}");
    }
    if let Some(two) = real("panlichen-nccl-tests-log-RTX3090-PCIe-dualsocket-GRAPH-2.18.1.log") {
        let out = ok(&["cluster", "show", two.to_str().unwrap(), "--nic", "2x100g"]);
        assert!(out.contains("2 nodes x 8 GPUs = 16 GPUs"), "{out}");
        assert!(out.contains("RTX3090") && out.contains("PCIe only"), "{out}");
        assert!(out.contains("2x 100 Gbit/s"), "the override wins: {out}");
    }
}

#[test]
fn input_without_hardware_facts_is_an_error() {
    let d = scratch("empty").join("empty-run");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("notes.txt"), "nothing about NCCL here\n").unwrap();
    let (code, _, err) = commlens(&["cluster", "show", d.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(!err.is_empty());
    let _ = std::fs::remove_dir_all(Path::new(&d).parent().unwrap());
}
