//! The Chakra front end on every real trace of `../shared/data/real/workloads`: each loads
//! with counts checked against an independent count (raw byte scans, JSON value walks), or
//! fails with a message naming the file.

use commlens_core::{DataType, OpKind};
use commlens_workload::chakra::{load_path, load_path_with, LoadOptions};
use commlens_workload::{GroupKind, Stream, Work, Workload};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

fn workloads() -> Option<PathBuf> {
    commlens_testdata::real_dir("workloads")
}

fn colls(w: &Workload, rank: u32) -> Vec<(OpKind, u64)> {
    w.program_of(rank)
        .tasks
        .iter()
        .filter_map(|t| match &t.work {
            Work::Coll(c) => Some((c.kind, c.bytes())),
            _ => None,
        })
        .collect()
}

fn summary(w: &Workload) -> String {
    let mut s = format!(
        "{} world={} programs={} groups={} iters={}\n",
        w.name,
        w.world,
        w.programs.len(),
        w.groups.len(),
        w.iterations
    );
    for (pi, p) in w.programs.iter().enumerate().take(3) {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for t in &p.tasks {
            let k = match &t.work {
                Work::Compute(c) => format!(
                    "compute:{:?}{}",
                    c.kind,
                    if c.time_us.is_some() { "+t" } else { "" }
                ),
                Work::Coll(c) => format!("{}:{:?}", c.kind, c.group.kind),
                Work::P2p { .. } => "p2p".into(),
                Work::IterationEnd { .. } => "iterend".into(),
            };
            *kinds.entry(k).or_default() += 1;
        }
        s += &format!("  program {pi}: {} tasks {:?}\n", p.tasks.len(), kinds);
    }
    for n in w.notes.iter().take(8) {
        s += &format!("  note: {n}\n");
    }
    s
}

/// Gunzips a tar.gz and returns its regular members (name, bytes) via the system `tar`-free
/// path: a minimal independent walk of the 512-byte headers.
fn tar_members(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut raw = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut pax_name: Option<String> = None;
    while pos + 512 <= raw.len() {
        let h = &raw[pos..pos + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let name = String::from_utf8_lossy(&h[..100])
            .trim_end_matches('\0')
            .to_string();
        let size_s = String::from_utf8_lossy(&h[124..136])
            .trim_matches(|c| c == '\0' || c == ' ')
            .to_string();
        let size = usize::from_str_radix(&size_s, 8).unwrap_or(0);
        let data = raw[pos + 512..pos + 512 + size].to_vec();
        match h[156] {
            b'x' => {
                pax_name = String::from_utf8_lossy(&data)
                    .lines()
                    .find_map(|l| l.split_once("path=").map(|(_, v)| v.to_string()));
            }
            b'0' | 0 => out.push((pax_name.take().unwrap_or(name), data)),
            _ => {}
        }
        pos += 512 + size.div_ceil(512) * 512;
    }
    out
}

#[test]
fn astra_sim_microbenchmark_all_reduce() {
    let Some(dir) = workloads() else { return };
    let d = dir.join("astra-sim-microbench-all_reduce-8npus_1MB");
    // Independent check: every file holds the varint 1048576 after a "comm_size" name.
    for r in 0..8 {
        let b = std::fs::read(d.join(format!("all_reduce.{r}.et"))).unwrap();
        let at = b
            .windows(9)
            .position(|x| x == b"comm_size")
            .expect("comm_size attribute");
        assert_eq!(
            &b[at + 9..at + 13],
            &[0x48, 0x80, 0x80, 0x40],
            "rank {r}: int64 1048576"
        );
    }
    for input in [d.clone(), d.join("all_reduce"), d.join("all_reduce.3.et")] {
        let w = load_path(&input).unwrap_or_else(|e| panic!("{e}"));
        println!("{}", summary(&w));
        let single = input.extension().is_some_and(|e| e == "et");
        assert_eq!(w.world, if single { 1 } else { 8 }, "{}", input.display());
        for r in 0..w.world {
            assert_eq!(colls(&w, r), vec![(OpKind::AllReduce, 1_048_576)]);
            let p = w.program_of(r);
            assert_eq!(p.tasks[0].stream, Stream::Comm(0));
            let Work::Coll(c) = &p.tasks[0].work else {
                unreachable!()
            };
            assert_eq!(
                (c.dtype, c.count, c.group.kind),
                (DataType::Uint8, 1_048_576, GroupKind::World)
            );
        }
        if !single {
            assert_eq!(w.rank_program, (0..8).collect::<Vec<u32>>());
            assert!(w.representative.is_empty());
        }
    }
    // The same rank set with an explicit size, one file.
    let w = load_path_with(
        &d.join("all_reduce.0.et"),
        &LoadOptions {
            world: Some(8),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((w.world, w.groups[0].ranks.len()), (8, 8));
}

#[test]
fn chakra_tests_protobuf_et() {
    let Some(dir) = workloads() else { return };
    let path = dir.join("chakra-tests-data-chakra.0.et");
    let w = load_path(&path).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&w));
    let bytes = std::fs::read(&path).unwrap();
    // Independent: GPU NCCL kernel nodes are the names starting "ncclKernel_" (each name is
    // stored once per node).
    let count = |pat: &[u8]| bytes.windows(pat.len()).filter(|x| *x == pat).count();
    let ar =
        count(b"\x12\x9encclKernel_AllReduce") + count(b"ncclKernel_AllReduce_RING_LL_Sum_float(");
    assert!(ar >= 5);
    let c = colls(&w, 0);
    assert_eq!(
        c.iter().filter(|x| x.0 == OpKind::AllReduce).count(),
        count(b"ncclKernel_AllReduce_RING_LL_Sum_float(")
    );
    assert_eq!(
        c.iter().filter(|x| x.0 == OpKind::Broadcast).count(),
        count(b"ncclKernel_Broadcast_RING_LL_Sum_int8_t(")
    );
    assert!(
        c.contains(&(OpKind::Broadcast, 212_480)) && c.contains(&(OpKind::AllReduce, 31_502_336)),
        "{c:?}"
    );
    let timed = w
        .program_of(0)
        .tasks
        .iter()
        .filter(|t| matches!(&t.work, Work::Compute(c) if c.time_us.is_some()))
        .count();
    assert!(timed > 0);
}

/// Counts, by walking the JSON independently, the `record_param_comms` nodes naming a real
/// collective (not `wait`) — the collectives a PyTorch ET holds.
fn pytorch_et_collectives(doc: &serde_json::Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in doc["nodes"].as_array().unwrap() {
        if n["name"] != "record_param_comms" {
            continue;
        }
        let vals = if n["inputs"].is_object() {
            &n["inputs"]["values"]
        } else {
            &n["inputs"]
        };
        let name = vals
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        if name != "wait" {
            *out.entry(name).or_default() += 1;
        }
    }
    out
}

fn kind_counts(w: &Workload, rank: u32) -> BTreeMap<OpKind, usize> {
    let mut m = BTreeMap::new();
    for (k, _) in colls(w, rank) {
        *m.entry(k).or_default() += 1;
    }
    m
}

#[test]
fn chakra_tests_json_trace_archive() {
    let Some(dir) = workloads() else { return };
    let path = dir.join("chakra-tests-data-json_trace.tar.gz");
    // Two sets in one archive: refused without a choice, naming both.
    let e = load_path(&path).unwrap_err().to_string();
    assert!(
        e.contains("chakra-tests-data-json_trace.tar.gz")
            && e.contains("small_chakra")
            && e.contains("2 trace sets"),
        "{e}"
    );
    let members = tar_members(&path);
    for set in ["small_chakra", "jsonData/chakra"] {
        let w = load_path_with(
            &path,
            &LoadOptions {
                set: Some(set.into()),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        println!("{}", summary(&w));
        let (_, bytes) = members
            .iter()
            .find(|(n, _)| {
                n.ends_with(&format!("{}.0.json", set.trim_start_matches("jsonData/")))
                    && (set.contains('/') || n.contains("small"))
            })
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        // Independent: GPU-side (is_cpu_op false) NodeType 7 nodes are the collectives.
        let gpu_colls = doc["workload_graph"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["NodeType"] == 7 && n["is_cpu_op"] == false)
            .count();
        assert_eq!(colls(&w, 0).len(), gpu_colls, "{set}");
        assert!(gpu_colls > 0);
    }
}

#[test]
fn chakra_tests_pytorch_et_tgz() {
    let Some(dir) = workloads() else { return };
    let path = dir.join("chakra-tests-data-1.0.2-chakra.0.0.4-pytorch-et.tgz");
    let w = load_path(&path).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&w));
    let (_, bytes) = tar_members(&path)
        .into_iter()
        .find(|(n, _)| n == "1.0.2-chakra.0.0.4.json")
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let expect = pytorch_et_collectives(&doc);
    assert_eq!(expect.get("all_gather"), Some(&10));
    // The process-group record says 2 ranks: the lone trace runs on both.
    assert_eq!((w.world, w.rank_program.clone()), (2, vec![0, 0]));
    assert_eq!(
        kind_counts(&w, 0),
        BTreeMap::from([(OpKind::AllGather, 10)])
    );
    assert!(
        colls(&w, 1).iter().all(|&(_, b)| b == 4),
        "one float per rank: {:?}",
        colls(&w, 1)
    );
}

#[test]
fn param_resnet_pytorch_et() {
    let Some(dir) = workloads() else { return };
    let path = dir.join("param-resnet_2gpu_et-1.1.0-chakra.0.0.4.json.gz");
    let w = load_path(&path).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&w));
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let expect = pytorch_et_collectives(&doc);
    assert_eq!(w.world, 2);
    let got = kind_counts(&w, 0);
    assert_eq!(
        got.get(&OpKind::AllReduce),
        expect.get("allreduce"),
        "{expect:?}"
    );
    assert_eq!(
        got.get(&OpKind::Broadcast),
        expect.get("broadcast"),
        "{expect:?}"
    );
    // Three profiler steps → three iterations.
    let steps = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["name"]
                .as_str()
                .is_some_and(|s| s.starts_with("ProfilerStep#"))
        })
        .count();
    assert_eq!(w.iterations as usize, steps);
    // Bytes from in_msg_nelems × dtype: every all-reduce is a float bucket.
    assert!(colls(&w, 0).iter().all(|&(_, b)| b > 0));
}

#[test]
fn param_dlrm_pytorch_et_8_ranks() {
    let Some(dir) = workloads() else { return };
    let path = dir.join("param-dlrm_pytorch_et-8rank.tar.gz");
    let w = load_path(&path).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&w));
    assert_eq!((w.world, w.programs.len()), (8, 8));
    assert_eq!(
        w.groups.len(),
        1,
        "one process group (a pointer per process) → WORLD"
    );
    for (name, bytes) in tar_members(&path) {
        let r: u32 = name
            .trim_end_matches(".json")
            .rsplit('_')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let expect = pytorch_et_collectives(&doc);
        let a2a = expect
            .iter()
            .filter(|(k, _)| k.starts_with("all_to_all"))
            .map(|(_, v)| v)
            .sum::<usize>();
        let got = kind_counts(&w, r);
        assert_eq!(
            got.get(&OpKind::AllToAll).copied().unwrap_or(0),
            a2a,
            "rank {r}"
        );
        assert_eq!(
            got.get(&OpKind::AllReduce),
            expect.get("allreduce"),
            "rank {r}"
        );
        // and the nccl:* record-function markers agree
        let marks = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["name"].as_str().is_some_and(|s| s.starts_with("nccl:")))
            .count();
        assert_eq!(colls(&w, r).len(), marks, "rank {r}");
    }
    // all_to_allv of 6144 floats = 24576 bytes
    assert!(colls(&w, 0).contains(&(OpKind::AllToAll, 24_576)));
}
