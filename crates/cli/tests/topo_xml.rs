//! `commlens topo` on NCCL's topology XML (`NCCL_TOPO_DUMP_FILE`): alone, next to
//! the log of the same machine (whose own dump wins), next to that log with its dump
//! taken out (the XML then serves the log's host and its communicator's bottleneck),
//! inside a folder, and damaged.

use std::path::{Path, PathBuf};
use std::process::Command;

const XML: &str = "timez-zx-nccl-tests-nccl_topo_dump_normal.xml";
const LOG: &str = "timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log";

fn commlens(args: &[&Path]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&Path]) -> serde_json::Value {
    let mut a: Vec<&Path> = args.to_vec();
    a.extend([Path::new("--format"), Path::new("json")]);
    let (code, out, err) = commlens(&a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-cli-topo-xml-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The log without the lines of NCCL's topology dump (header, node and edge lines,
/// separator, `X :` path lines).
fn without_dump(log: &str) -> String {
    let mut out = String::new();
    for line in log.lines() {
        let dump = line.split_once("NCCL INFO ").is_some_and(|(_, m)| {
            m.starts_with("===")
                || m.starts_with("CPU/")
                || m.trim_start().starts_with("+ ")
                || (["GPU/", "NET/", "NIC/"].iter().any(|p| m.starts_with(p)) && m.contains(" :"))
        });
        if !dump {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn topo_reads_nccl_topology_xml() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else {
        return;
    };
    let (xml, log) = (dir.join(XML), dir.join(LOG));

    // Alone: the same tables as for a log's dump.
    let (code, out, err) = commlens(&[Path::new("topo"), &xml]);
    assert_eq!(code, 0, "{err}");
    let host = "timez-zx-nccl-tests-nccl_topo_dump_normal (host_hash 0xd3524fac75ffbc89)";
    assert!(
        out.contains(&format!(
            "Topology of {host} (maxBw 240 GB/s, totalBw 240 GB/s)"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("Links of {host}")), "{out}");
    assert!(out.contains("GPU-to-GPU bottleneck bandwidth"), "{out}");
    assert!(out.contains("240.0 NVL"), "{out}");
    assert!(
        err.contains(XML) && err.contains("2 GPUs, 1 CPUs, 1 NICs"),
        "{err}"
    );
    let v = json(&[Path::new("topo"), &xml]);
    let topos = v["topologies"].as_array().unwrap();
    assert_eq!(topos.len(), 1);
    assert_eq!(topos[0]["host"], host);
    let gpus: Vec<_> = topos[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "Gpu")
        .collect();
    assert_eq!(gpus.len(), 2);
    assert_eq!(
        (gpus[0]["bus_id"].as_u64(), gpus[0]["rank"].as_u64()),
        (Some(0x17000), Some(0))
    );

    // With the log of the same machine: its own dump is shown, the XML noted.
    let (code, out, err) = commlens(&[Path::new("topo"), &log, &xml]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Topology of mew0") && !out.contains("host_hash"),
        "{out}"
    );
    assert!(err.contains("same GPUs as host mew0"), "{err}");
    assert_eq!(
        json(&[Path::new("topo"), &log, &xml])["topologies"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // The log without its dump: no topology alone (naming the XML as the other source),
    // and with the XML the topology serves host mew0 and its communicator.
    let tmp = scratch();
    let stripped = tmp.join("mew0-nodump.log");
    std::fs::write(
        &stripped,
        without_dump(&std::fs::read_to_string(&log).unwrap()),
    )
    .unwrap();
    // (It is an nccl-tests output too: without a dump, its `Rank` lines give
    // the job's GPUs per host, and stderr says how to get the topology.)
    let (code, out, err) = commlens(&[Path::new("topo"), &stripped]);
    assert!(code == 0 && out.contains("GPUs per host") && out.contains("mew0"), "{out}");
    assert!(
        err.contains("no topology") && err.contains("NCCL_TOPO_DUMP_FILE"),
        "{err}"
    );
    let v = json(&[Path::new("topo"), &stripped, &xml]);
    assert_eq!(v["topologies"][0]["host"], "mew0");
    assert_eq!(v["bottlenecks"][0]["bottleneck"]["bw_gb_s"], 240.0);
    assert_eq!(v["bottlenecks"][0]["bottleneck"]["link"], "Nvl");

    // A folder holding both: the XML is found by its content, not noted as a non-log.
    std::fs::copy(&xml, tmp.join("topo.xml")).unwrap();
    let (code, out, err) = commlens(&[Path::new("topo"), &tmp]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Communicator bottlenecks") && out.contains("240.0"),
        "{out}"
    );
    assert!(
        err.contains("used for host mew0") && !err.contains("not an NCCL debug log"),
        "{err}"
    );
    // Only XML in the folder.
    std::fs::remove_file(&stripped).unwrap();
    let (code, out, err) = commlens(&[Path::new("topo"), &tmp]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Topology of topo (host_hash 0xd3524fac75ffbc89)"),
        "{out}"
    );

    // Damaged: the error names the file and the line.
    let text = std::fs::read_to_string(&xml).unwrap();
    let bad = tmp.join("cut.xml");
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let (code, out, err) = commlens(&[Path::new("topo"), &bad]);
    let lines = text[..text.len() / 2].lines().count();
    assert!(code != 0 && out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("cut.xml:{lines}:")) && err.contains("file truncated?"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
