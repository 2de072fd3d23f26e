//! Every real NCCL log in ../shared/data/real/nccl-logs parses, and golden
//! figures hold for the richest ones. Where a figure can be checked by an
//! independent method (a plain substring count over the file), the test does
//! that too, so the golden numbers are not just the parser agreeing with itself.

mod common;

use commlens_core::{Algorithm, LinkKind, OpKind, Protocol};
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::{load_path, ReadOptions};
use commlens_ingest::IngestError;
use std::collections::HashMap;

fn count_substr(hay: &[u8], needle: &[u8]) -> usize {
    memchr::memmem::find_iter(hay, needle).count()
}

#[test]
fn every_shared_log_parses() {
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let res = load_path(&path, &ReadOptions::default());
        if path.extension().is_some_and(|e| e == "xml") {
            // Topology XML is not a debug log: a clear error naming the file.
            let err = res.unwrap_err();
            assert!(matches!(err, IngestError::NotNcclLog { .. }), "{err}");
            assert!(err.to_string().contains(path.file_name().unwrap().to_str().unwrap()));
            continue;
        }
        let (t, r) = res.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
        let op_lines = count_substr(&bytes, b": opCount ");
        eprintln!(
            "{}: {} lines, {} ops of {} opCount occurrences, {} recovered, {} unrecovered, {} malformed, {} processes, {} devices, {} comms, {} topologies",
            path.file_name().unwrap().to_string_lossy(),
            r.lines, r.ops, op_lines, r.recovered_ops, r.broken_unrecovered, r.malformed.total(),
            t.processes.len(), t.devices.len(), t.comms.len(), t.topologies.len()
        );
        assert!(r.nccl_segments > 0);
        assert_eq!(r.ops as usize, t.n_ops());
        // Plausible totals: never more operations than opCount occurrences, and
        // nearly every occurrence is accounted for (parsed, malformed or broken;
        // overwritten lines can hide a few inside other messages).
        assert!(r.ops as usize <= op_lines, "{}", path.display());
        assert!(r.ops + r.malformed.total() + r.broken_unrecovered >= op_lines as u64 * 995 / 1000, "{}", path.display());
        for op in t.ops() {
            assert_eq!(t.comms[op.comm.ix()].device, Some(op.dev));
            if let Some(size) = op.dtype.size_bytes() {
                assert_eq!(op.bytes, op.count * size);
            }
        }
    }
    assert!(n >= 11, "expected the 11 shared logs, found {n}");
}

#[test]
fn golden_2_27_7_allreduce() {
    let Some(path) = common::nccl_log("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log") else {
        return;
    };
    let loaded = load_inputs(&[path], &ReadOptions::default()).unwrap();
    let (t, r) = (&loaded.table, &loaded.reports[0]);
    assert_eq!(t.processes.len(), 1);
    assert_eq!(t.processes[0].nccl_version.unwrap().to_string(), "2.27.7");
    assert_eq!(t.devices.len(), 2, "one process driving two GPUs");
    assert_eq!((r.ops, r.tuning_lines, r.tuned_ops, r.tuning_unmatched), (990, 495, 990, 0));
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        assert_eq!(ops.len(), 495, "device {d}");
        // Independent figure: sum of count*4 over the rank's lines (python regex).
        assert_eq!(ops.iter().map(|o| o.bytes).sum::<u64>(), 772_716_625_920);
        assert!(ops.iter().all(|o| o.kind == OpKind::AllReduce
            && o.algo == Some(Algorithm::Ring)
            && o.proto == Some(Protocol::Simple)
            && o.channels == Some((0, 23))));
        assert!(ops.to_vec().windows(2).all(|w| w[0].line < w[1].line));
    }
    // The bracket says [1] for rank 0's calls; the init line's cudaDev decides.
    let ranks: Vec<_> = t.devices.iter().map(|d| (d.cuda_dev, d.global_rank, d.bus_id)).collect();
    assert!(ranks.contains(&(Some(0), Some(0), Some(0x17000))));
    assert!(ranks.contains(&(Some(1), Some(1), Some(0x65000))));
    assert_eq!(t.logical.len(), 1);
    assert_eq!(t.logical[0].comm_id, Some(0x54fe282d32a87d85));
    assert_eq!(t.logical[0].members.len(), 2);
    let topo = &t.topologies[0];
    assert_eq!(topo.host, "mew0");
    let g0 = topo.gpu_by_bus(0x17000).unwrap();
    let g1 = topo.gpu_by_bus(0x65000).unwrap();
    assert_eq!(topo.gpu_pair_bw(g0, g1), Some((240.0, LinkKind::Nvl)));
    let c = &t.comms[t.logical[0].members[0].ix()];
    assert_eq!(c.rings.len(), 24, "24 ring channels");
    assert!(!c.trees.is_empty());
}

#[test]
fn golden_2_28_9_interleaved_send_recv() {
    let name = "sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log";
    let Some(path) = common::nccl_log(name) else { return };
    let bytes = std::fs::read(&path).unwrap();
    let loaded = load_inputs(&[path], &ReadOptions::default()).unwrap();
    let (t, r) = (&loaded.table, &loaded.reports[0]);
    assert_eq!(t.processes.len(), 4, "debris host names folded into 'stone'");
    assert!(t.processes.iter().all(|p| p.host == "stone"));
    let mut per_pid: HashMap<u32, usize> = HashMap::new();
    for op in t.ops() {
        assert!(matches!(op.kind, OpKind::Send | OpKind::Recv));
        assert!(op.peer.is_some_and(|p| p < 4));
        *per_pid.entry(t.processes[op.proc.ix()].pid).or_default() += 1;
    }
    // Golden records per process, with independent bounds: at least the lines
    // that survived whole, at most the `Send|Recv: opCount` segments of that pid.
    let golden = [(2984735u32, 355usize), (2984736, 1918), (2984737, 4773), (2984738, 2706)];
    for (pid, want) in golden {
        let got = per_pid.get(&pid).copied().unwrap_or(0);
        let seg_send = count_substr(&bytes, format!("stone:{pid}:{pid} [").as_bytes());
        assert_eq!(got, want, "pid {pid}");
        assert!(got <= seg_send);
    }
    // Lines cut by other writers: the recovered ones come back, the rest are counted.
    assert_eq!(r.recovered_ops, 1771);
    assert_eq!(r.broken_unrecovered, 605);
    assert_eq!(r.ops + r.broken_unrecovered, 10357, "= the 10360 opCount segments minus 3 malformed beyond use");
    // One communicator of 4 ranks, although three of its init lines were broken.
    let world: Vec<_> = t.logical.iter().filter(|l| l.nranks == 4).collect();
    assert_eq!(world.len(), 1);
    assert_eq!(world[0].members.len(), 4);
}

#[test]
fn golden_2_26_6_modified_trace_allgather() {
    let name = "ssbandjl-nccl-tests-run_with_mpi_2node_4gpu_trace-4xV100-2node-IB-2.26.6-modified.log";
    let Some(path) = common::nccl_log(name) else { return };
    let loaded = load_inputs(&[path], &ReadOptions::default()).unwrap();
    let (t, r) = (&loaded.table, &loaded.reports[0]);
    assert_eq!(t.processes.len(), 4);
    // Global ranks from the world communicator's init lines.
    let rank_of = |host: &str, pid: u32| {
        t.devices
            .iter()
            .find(|d| t.processes[d.proc.ix()].host == host && t.processes[d.proc.ix()].pid == pid)
            .and_then(|d| d.global_rank)
    };
    assert_eq!(rank_of("gdr114", 842735), Some(0));
    assert_eq!(rank_of("gdr114", 842736), Some(1));
    assert_eq!(rank_of("gdr116", 67599), Some(2));
    assert_eq!(rank_of("gdr116", 67600), Some(3));
    // Independent per-comm counts of whole lines (regex): 1197, 1197, 1186, 1185;
    // the reader adds the lines it rebuilt from call lines.
    let mut per_ptr: HashMap<u64, usize> = HashMap::new();
    for op in t.ops() {
        assert_eq!(op.kind, OpKind::AllGather);
        *per_ptr.entry(t.comms[op.comm.ix()].ptr).or_default() += 1;
    }
    assert_eq!(per_ptr[&0x5f9d550eb560], 1197);
    assert_eq!(per_ptr[&0x559c73a146b0], 1197);
    assert!(per_ptr[&0x63ad602f5be0] >= 1186);
    assert!(per_ptr[&0x64a3ea3aa5a0] >= 1185);
    assert_eq!(r.ops, 4768);
    assert_eq!((r.tuning_lines, r.tuned_ops), (1056, 1053));
    assert_eq!(r.malformed.total(), 7);
    assert_eq!(t.topologies.len(), 2, "one per host");
    // Only the two ranks of the modified build print tuning lines.
    let tuned = t.ops().filter(|o| o.algo == Some(Algorithm::Ring)).count();
    assert_eq!(tuned, 1053);
    let tuned_ranks: std::collections::BTreeSet<_> =
        t.ops().filter(|o| o.algo.is_some()).map(|o| t.processes[o.proc.ix()].host.as_str()).collect();
    assert_eq!(tuned_ranks.into_iter().collect::<Vec<_>>(), vec!["gdr114"]);
}

#[test]
fn golden_2_26_6_single_rank_allreduce() {
    let Some(path) = common::nccl_log("ssbandjl-nccl-tests-all_ref_log-V100-2.26.6-modified.log") else { return };
    let (t, r) = load_path(&path, &ReadOptions::default()).unwrap();
    assert_eq!(r.ops, 1187);
    assert_eq!(t.comms.len(), 1);
    assert_eq!(t.comms[0].nranks, Some(1));
    assert!(t.ops().all(|o| o.kind == OpKind::AllReduce && o.dtype == commlens_core::DataType::Float32));
    assert_eq!(t.processes[0].nccl_version.unwrap().to_string(), "2.26.6");
}

#[test]
fn golden_2_20_5_eight_ranks_two_nodes() {
    let Some(path) = common::nccl_log("alcf-nccl-tests-VAE-2024-11-08-21-21-27-with_aws-2.20.5.log") else { return };
    let loaded = load_inputs(&[path], &ReadOptions::default()).unwrap();
    let t = &loaded.table;
    assert_eq!(t.devices.len(), 8);
    let mut ranks: Vec<u32> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
    ranks.sort();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>());
    let hosts: std::collections::BTreeSet<_> = t.processes.iter().map(|p| p.host.as_str()).collect();
    assert_eq!(hosts.len(), 2);
    let world = t.logical.iter().find(|l| l.nranks == 8).unwrap();
    assert_eq!(world.members.len(), 8);
    assert!(t.comms.iter().all(|c| c.n_nodes == Some(2) || c.n_nodes.is_none()));
}

#[test]
fn golden_topologies_2_16_5_and_2_18_1() {
    let Some(p16) = common::nccl_log("thomaslie210-NCCL_Test_Results-n013-GDR_ON-all_reduce-2xA100PCIe-PCIeonly-2.16.5.log")
    else {
        return;
    };
    let (t, _) = load_path(&p16, &ReadOptions::default()).unwrap();
    let topo = &t.topologies[0];
    let g0 = topo.gpu_by_bus(0x81000).unwrap();
    let g1 = topo.gpu_by_bus(0xa1090).unwrap();
    assert_eq!(topo.gpu_pair_bw(g0, g1), Some((24.0, LinkKind::Phb)), "PCIe only, through the CPU");
    assert_eq!(t.devices.iter().filter_map(|d| d.bus_id).count(), 2);

    let p18 = common::nccl_log("panlichen-nccl-tests-log-RTX3090-PCIe-dualsocket-GRAPH-2.18.1.log").unwrap();
    let (t, r) = load_path(&p18, &ReadOptions::default()).unwrap();
    assert_eq!(r.topology_blocks, 16);
    assert_eq!(t.topologies.len(), 2, "first block per host");
    for topo in &t.topologies {
        assert_eq!(topo.gpus().count(), 8);
        assert_eq!(topo.net_bw_gb_s(), Some(7.0));
    }
}

#[test]
fn directory_input_skips_non_logs_with_a_note() {
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    let loaded = load_inputs(&[dir], &ReadOptions::default()).unwrap();
    assert_eq!(loaded.reports.len(), 11);
    assert_eq!(loaded.skipped_files.len(), 2, "the two topology XML files");
    assert!(loaded.skipped_files.iter().all(|(p, why)| p.extension().unwrap() == "xml" && why.contains("not an NCCL debug log")));
}

/// `split_line`'s fast path (one prefix at the line start) must give exactly
/// what the general colon scan gives, on every line of every real log.
#[test]
fn fast_and_general_prefix_paths_agree() {
    use commlens_ingest::nccl_log::prefix::{split_line, split_line_scan, KnownHosts};
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let (mut h1, mut h2) = (KnownHosts::default(), KnownHosts::default());
        let (mut o1, mut o2) = (Vec::new(), Vec::new());
        for (i, line) in data.split(|&b| b == b'\n').enumerate() {
            let a = split_line(line, &mut h1, &mut o1);
            let b = split_line_scan(line, &mut h2, &mut o2);
            assert!(a == b && o1 == o2, "{}:{}", path.display(), i + 1);
        }
    }
}

/// Input kinds are recognised by content, and logs and traces are not mixed.
#[test]
fn sniffing_and_mixed_inputs() {
    use commlens_ingest::{load_any, sniff, InputFormat};
    let Some(logs) = common::shared_dir("nccl-logs") else { return };
    let kineto = common::shared_dir("kineto").unwrap();
    let log = logs.join("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log");
    let trace = kineto.join("hta-trace_diff-control-rank3of8-A100.json.gz");
    assert_eq!(sniff(&log).unwrap(), InputFormat::NcclLog);
    assert_eq!(sniff(&trace).unwrap(), InputFormat::Kineto);
    let loaded = load_any(&[trace.clone()], &ReadOptions::default()).unwrap();
    assert_eq!(loaded.traces.len(), 1);
    assert_eq!(loaded.table.n_ops(), 60);
    assert_eq!(loaded.table.devices[0].global_rank, Some(3), "rank from distributedInfo");
    let err = load_any(&[log, trace], &ReadOptions::default()).err().unwrap().to_string();
    assert!(err.contains("2.27.7.log") && err.contains("Kineto trace"), "{err}");
}

/// Plugin output is recognised by its header line and is not merged with logs.
#[test]
fn plugin_output_is_sniffed_and_not_mixed() {
    use commlens_ingest::{load_any, sniff, InputFormat};
    let Some(logs) = common::shared_dir("nccl-logs") else { return };
    let dir = std::env::temp_dir().join(format!("commlens-sniff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clp = dir.join("commlens-h-1-0.clp");
    std::fs::write(&clp, "commlens-plugin v1 host=h pid=1 session=0 mono_ns=0 real_ns=0\n").unwrap();
    assert_eq!(sniff(&clp).unwrap(), InputFormat::PluginOutput);
    let log = logs.join("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log");
    // A plugin output without operations beside a log: the log is read, the
    // plugin file is named as holding none (two sides with operations are
    // refused: see sniffing_and_mixed_inputs above).
    let loaded = load_any(&[clp.clone(), log], &ReadOptions::default()).unwrap();
    assert!(loaded.table.n_ops() > 0);
    assert!(
        loaded.notes.iter().any(|n| n.contains("profiler-plugin outputs") && n.contains("commlens-h-1-0.clp") && n.contains("no operations")),
        "{:?}",
        loaded.notes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// NVIDIA plugin outputs go through `load_any` too.
#[test]
fn inspector_files_load_through_load_any() {
    use commlens_ingest::{load_any, sniff, InputFormat};
    let Some(dir) = common::shared_dir("plugin-json") else { return };
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 4);
    assert!(files.iter().all(|f| sniff(f).unwrap() == InputFormat::Inspector));
    let loaded = load_any(&files, &ReadOptions::default()).unwrap();
    assert_eq!(loaded.table.n_ops(), 1900 + 1889 + 1900 + 1904);
    assert_eq!(loaded.nvidia_reports.len(), 4);
    let ring = dir.join("pha-Z-nccl-example-profiler-trace-p2p-ring-4rank-rank0.txt");
    assert_eq!(sniff(&ring).unwrap(), InputFormat::ExamplePlugin);
    assert_eq!(load_any(&[ring], &ReadOptions::default()).unwrap().table.n_ops(), 8);
}
