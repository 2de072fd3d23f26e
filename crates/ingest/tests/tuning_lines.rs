//! What NCCL prints about tuning while a communicator initialises — search
//! graphs (`Pattern …`), `threadThresholds`, the latency/bandwidth table rank 0
//! prints — lands in `CommMember::tuning` of the communicator the printing
//! thread initialises, whichever side of the thread's init lines it comes on.
//!
//! Synthetic logs check the attachment rules and the error counting; the real
//! logs check golden figures, with counts taken independently by grep over the
//! files (commands in the comments).

mod common;

use commlens_core::model::CommMember;
use commlens_core::tuning::TuningInfo;
use commlens_core::{Algorithm, LinkKind, OpKind, OpTable, Protocol};
use commlens_ingest::nccl_log::{load_path, read_stream, ReadOptions, ReadReport};
use std::path::Path;

fn read(text: &str) -> (OpTable, ReadReport) {
    read_stream(Path::new("synthetic.log"), text.as_bytes(), &ReadOptions::default(), &mut |_| {}).unwrap()
}

fn comm(t: &OpTable, ptr: u64) -> &CommMember {
    t.comms.iter().find(|c| c.ptr == ptr).unwrap_or_else(|| panic!("no comm {ptr:#x}"))
}

fn tuning(t: &OpTable, ptr: u64) -> &TuningInfo {
    comm(t, ptr).tuning.as_deref().unwrap_or_else(|| panic!("comm {ptr:#x} has no tuning"))
}

const RING: &str = "Pattern 4, crossNic 0, nChannels 2, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1";
const TREE: &str = "Pattern 1, crossNic 0, nChannels 2, bw 40.000000/40.000000, type NVL/PIX, sameChannels 0";
const THRESH: &str = "threadThresholds 8/8/64 | 16/8/64 | 512 | 512";
/// A two-algorithm block of the table (as NCCL 2.12-2.18 printed with four algorithms).
const TABLE: [&str; 5] = [
    "  Algorithm   |                            Tree                  |                            Ring                  |",
    "  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |",
    " Max NThreads |            512 |            640 |            512 |            512 |            640 |            256 |",
    "    AllGather |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     7.2/ 175.4 |    15.9/ 441.6 |    11.8/ 480.0 |",
    "    AllReduce |     8.0/  37.9 |    16.5/ 112.0 |    16.4/ 144.0 |     7.8/  87.7 |    17.8/ 220.8 |    15.2/ 240.0 |",
];

fn lines(prefix: &str, msgs: &[&str]) -> String {
    msgs.iter().map(|m| format!("{prefix} NCCL INFO {m}\n")).collect()
}

fn check_full(t: &TuningInfo) {
    assert_eq!(t.graphs.len(), 2);
    assert_eq!((t.graphs[0].pattern, t.graphs[1].pattern), (4, 1), "print order");
    assert_eq!(t.thread_thresholds, vec![8, 8, 64, 16, 8, 64, 512, 512]);
    assert_eq!(t.table.len(), 12);
    assert_eq!(t.max_threads.len(), 6);
    assert_eq!(t.max_threads[5], (Algorithm::Ring, Protocol::Simple, 256));
    let c = t.cell(OpKind::AllReduce, Algorithm::Ring, Protocol::Simple).unwrap();
    assert_eq!((c.latency_us, c.bw_gb_s), (15.2, 240.0));
    let c = t.cell(OpKind::AllGather, Algorithm::Ring, Protocol::Ll).unwrap();
    assert_eq!((c.latency_us, c.bw_gb_s), (7.2, 175.4));
}

#[test]
fn init_start_before_the_tuning_lines() {
    let p = "h:1:10 [0]";
    let mut log = lines(p, &["ncclCommInitRank comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START", RING, TREE]);
    log += &lines(p, &TABLE);
    log += &lines(p, &[THRESH, "ncclCommInitRank comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]);
    let (t, r) = read(&log);
    check_full(tuning(&t, 0xa0));
    assert_eq!(tuning(&t, 0xa0).graphs[0].line, 2);
    assert_eq!(tuning(&t, 0xa0).graphs[0].type_intra, LinkKind::Nvl);
    assert_eq!(r.tuning_init_lines, 2 + 5 + 1);
    assert_eq!((r.malformed.total(), r.unknown.total()), (0, 0));
}

#[test]
fn layout_line_after_the_graphs_and_complete_only() {
    // NCCL 2.26: graphs, then `comm … nRanks …`, then the table.
    let p = "h:1:10 [0] initTransportsRank, 1000";
    let mut log = lines(p, &[RING, TREE, "comm 0xb0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"]);
    log += &lines(p, &TABLE);
    log += &lines(p, &[THRESH]);
    // NCCL 2.16: no START and no layout line, only COMPLETE at the end.
    let q = "h:1:11 [1]";
    log += &lines(q, &[RING, TREE, THRESH, "comm 0xc0 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE"]);
    let (t, r) = read(&log);
    check_full(tuning(&t, 0xb0));
    let c = tuning(&t, 0xc0);
    assert_eq!((c.graphs.len(), c.thread_thresholds.len(), c.table.len()), (2, 8, 0));
    assert_eq!(r.malformed.total(), 0);
}

#[test]
fn lines_go_to_the_printing_threads_comm_and_wait_for_the_next_one() {
    let a = "h:1:10 [0]";
    let b = "h:1:11 [1]";
    let mut log = lines(a, &["comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START"]);
    log += &lines(b, &["comm 0xb0 rank 1 nranks 2 cudaDev 1 busId 2000 - Init START"]);
    // Interleaved: thread 11's graph between thread 10's.
    log += &lines(a, &[RING]);
    log += &lines(b, &[TREE]);
    log += &lines(a, &[TREE]);
    log += &lines(a, &["comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]);
    log += &lines(b, &["comm 0xb0 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE"]);
    // After COMPLETE the thread names no comm: its lines wait for its next init.
    log += &lines(a, &[RING, THRESH]);
    // Another process with the same thread id does not take them.
    log += &lines("h:2:10 [0]", &["comm 0xd0 rank 0 nranks 1 cudaDev 0 busId 1000 - Init START"]);
    log += &lines(a, &["comm 0xe0 rank 0 nranks 1 cudaDev 0 busId 1000 - Init START", TREE]);
    let (t, _) = read(&log);
    let pats = |ptr| tuning(&t, ptr).graphs.iter().map(|g| g.pattern).collect::<Vec<_>>();
    assert_eq!(pats(0xa0), vec![4, 1]);
    assert_eq!(pats(0xb0), vec![1]);
    assert_eq!(pats(0xe0), vec![4, 1], "held back, then in print order");
    assert_eq!(tuning(&t, 0xe0).thread_thresholds.len(), 8);
    assert!(comm(&t, 0xd0).tuning.is_none());
}

#[test]
fn modified_prefix_and_old_one_line_table() {
    // NCCL 2.4-2.11 print the table as one header line with `Algo/Proto` columns.
    let p = "h:1:10 [0] ncclTopoTuneModel, 456";
    let log = lines(
        p,
        &[
            "comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
            "Pattern 4, crossNic 0, nChannels 2, speed 12.000000/12.000000, type PHB/PIX, sameChannels 1",
            "Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |    Tree/Simple |    Ring/    LL |    Ring/ LL128 |    Ring/Simple | CollNet/    LL | CollNet/ LL128 | CollNet/Simple |",
            " Max NThreads |            512 |            640 |            512 |            512 |            640 |            512 |            512 |            640 |            512 |",
            "    Broadcast |     4.6/   0.0 |    21.8/   0.0 |    15.0/   0.0 |     4.6/  24.0 |    13.8/  22.5 |    12.0/  24.0 |     4.6/   0.0 |     4.6/   0.0 |    15.0/   0.0 |",
        ],
    );
    let (t, r) = read(&log);
    let tu = tuning(&t, 0xa0);
    assert_eq!(tu.graphs[0].bw_intra, 12.0);
    assert_eq!(tu.graphs[0].type_intra, LinkKind::Phb);
    assert_eq!((tu.table.len(), tu.max_threads.len()), (9, 9));
    let c = tu.cell(OpKind::Broadcast, Algorithm::Ring, Protocol::Ll128).unwrap();
    assert_eq!((c.latency_us, c.bw_gb_s), (13.8, 22.5));
    assert!(tu.cell(OpKind::Broadcast, Algorithm::CollNetDirect, Protocol::Simple).is_some());
    assert_eq!(r.malformed.total(), 0);
}

#[test]
fn malformed_lines_are_counted_not_kept() {
    let p = "h:1:10 [0]";
    let mut log = lines(p, &["comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START"]);
    log += &lines(
        p,
        &[
            // A row before any header, a garbled graph, cut thresholds.
            TABLE[4],
            "Pattern 4, crossNic 0, nChannels 2, bw 20.000000/2x.000000, type NVL/PIX, sameChannels 1",
            "threadThresholds 8/8/64 | 16/8/",
            "Protocol line without algorithms",
            "  Protocol    |             LL |          LL128 |         Simple |",
        ],
    );
    log += &lines(p, &TABLE[..3]);
    log += &lines(
        p,
        &[
            // Cut short (no writer after it), one cell too few, a garbled cell.
            "    AllReduce |     8.0/  37.9 |    16.5/ 112.0 |    16.4/ 14",
            "    AllReduce |     8.0/  37.9 |    16.5/ 112.0 |    16.4/ 144.0 |     7.8/  87.7 |    17.8/ 220.8 |",
            "    AllReduce |     8.0/  37.9 |    16.5/ 112.0 |    16.4/ 144.0 |     7.8/  87.7 |    17.8/ 220.8 |    15.2/ 2?0.0 |",
            TABLE[4],
        ],
    );
    let (t, r) = read(&log);
    assert_eq!(r.malformed.count_of("tuning table"), 5);
    assert_eq!(r.malformed.count_of("Pattern"), 1);
    assert_eq!(r.malformed.count_of("threadThresholds"), 1);
    let tu = tuning(&t, 0xa0);
    assert!(tu.graphs.is_empty() && tu.thread_thresholds.is_empty());
    assert_eq!(tu.table.len(), 6, "only the good row");
    // A line another writer cut is a broken segment, never a malformed one.
    let cut = format!("{p} NCCL INFO {}{p} NCCL INFO {RING}\n", &TABLE[4][..40]);
    let (t, r) = read(&(lines(p, &["comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START"]) + &cut));
    assert_eq!((r.malformed.total(), r.broken_segments), (0, 1));
    assert_eq!(tuning(&t, 0xa0).graphs.len(), 1);
}

#[test]
fn real_2_27_7_two_comms_and_rank_0_table() {
    let Some(path) = common::nccl_log("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log") else {
        return;
    };
    let (t, r) = load_path(&path, &ReadOptions::default()).unwrap();
    // grep -c 'NCCL INFO Pattern ' → 4; grep -c 'NCCL INFO threadThresholds ' → 2;
    // grep -c 'NCCL INFO   Algorithm   |' → 3 (also Protocol, Max NThreads: 3 each);
    // grep -cE 'NCCL INFO +(Broadcast|Reduce|AllGather|ReduceScatter|AllReduce) \|' → 15.
    assert_eq!(r.tuning_init_lines, 4 + 2 + 3 * 3 + 15);
    assert_eq!(r.malformed.total(), 0);
    assert_eq!(t.comms.len(), 2);
    for c in &t.comms {
        let tu = c.tuning.as_deref().unwrap();
        assert_eq!(tu.graphs.len(), 2, "rank {:?}", c.rank);
        let (ring, tree) = (&tu.graphs[0], &tu.graphs[1]);
        assert_eq!((ring.pattern, ring.n_channels, ring.bw_intra, ring.bw_inter), (4, 12, 20.0, 20.0));
        assert_eq!((ring.type_intra, ring.type_inter, ring.same_channels), (LinkKind::Nvl, LinkKind::Pix, true));
        assert_eq!((tree.pattern, tree.n_channels, tree.bw_intra, tree.bw_inter), (1, 12, 40.0, 40.0));
        assert_eq!((tree.type_intra, tree.type_inter, tree.same_channels), (LinkKind::Nvl, LinkKind::Pix, false));
        assert_eq!(tu.graph(Algorithm::Tree).map(|g| g.pattern), Some(1));
        assert_eq!(tu.thread_thresholds, vec![8, 8, 64, 16, 8, 64, 512, 512]);
    }
    // The table: rank 0's comm (0x55b6aa64a990, printed by its init thread 64920) only.
    let rank0 = comm(&t, 0x55b6aa64a990);
    assert_eq!(rank0.rank, Some(0));
    assert!(comm(&t, 0x55b6aa754530).tuning.as_ref().unwrap().table.is_empty());
    let tu = rank0.tuning.as_deref().unwrap();
    // 5 collectives × 7 algorithms (Tree Ring CollNetDirect | CollNetChain NVLS NVLSTree | PAT) × 3 protocols.
    assert_eq!((tu.table.len(), tu.max_threads.len()), (105, 21));
    let cell = |k, a, p| {
        let c = tu.cell(k, a, p).unwrap();
        (c.latency_us, c.bw_gb_s)
    };
    assert_eq!(cell(OpKind::AllReduce, Algorithm::Ring, Protocol::Simple), (15.2, 240.0));
    assert_eq!(cell(OpKind::AllReduce, Algorithm::Tree, Protocol::Ll), (8.0, 37.9));
    assert_eq!(cell(OpKind::AllGather, Algorithm::Ring, Protocol::Ll), (7.2, 175.4));
    assert_eq!(cell(OpKind::AllReduce, Algorithm::CollNetChain, Protocol::Simple), (35.6, 0.0));
    assert_eq!(cell(OpKind::ReduceScatter, Algorithm::Pat, Protocol::Simple), (0.0, 0.0));
    assert_eq!(tu.max_threads[1], (Algorithm::Tree, Protocol::Ll128, 640));
    assert_eq!(tu.max_threads[20], (Algorithm::Pat, Protocol::Simple, 0));
}

#[test]
fn real_2_26_6_modified_prefix_trace() {
    let name = "ssbandjl-nccl-tests-run_with_mpi_2node_4gpu_trace-4xV100-2node-IB-2.26.6-modified.log";
    let Some(path) = common::nccl_log(name) else { return };
    let (t, r) = load_path(&path, &ReadOptions::default()).unwrap();
    // grep -c 'NCCL INFO Pattern ' → 8; grep -c 'NCCL INFO threadThresholds ' → 4;
    // Algorithm/Protocol/Max NThreads lines: 3 each; collective rows (grep -cE as above): 15.
    assert_eq!(r.tuning_init_lines, 8 + 4 + 3 * 3 + 15);
    let with_graphs = t.comms.iter().filter(|c| c.tuning.as_ref().is_some_and(|x| x.graphs.len() == 2)).count();
    assert_eq!(with_graphs, 4, "every rank's ring and tree");
    // Graphs come before the layout line here (no Init START in this build).
    let g = &comm(&t, 0x64a3ea3aa5a0).tuning.as_deref().unwrap().graphs;
    assert_eq!((g[1].pattern, g[1].bw_intra, g[1].bw_inter, g[1].type_inter), (1, 4.0, 3.0, LinkKind::Sys));
    assert_eq!(g[0].line, 119);
    let rank0 = comm(&t, 0x64a3ea3aa5a0);
    assert_eq!(rank0.rank, Some(0));
    let tu = rank0.tuning.as_deref().unwrap();
    assert_eq!(tu.thread_thresholds, vec![8, 8, 64, 32, 8, 64, 512, 512]);
    assert_eq!(tu.table.len(), 105, "other threads' lines between the PAT rows do not break the table");
    let cell = |k, a, p| {
        let c = tu.cell(k, a, p).unwrap();
        (c.latency_us, c.bw_gb_s)
    };
    assert_eq!(cell(OpKind::AllReduce, Algorithm::Ring, Protocol::Simple), (59.2, 3.2));
    assert_eq!(cell(OpKind::AllReduce, Algorithm::Tree, Protocol::Ll), (18.8, 0.6));
    assert_eq!(cell(OpKind::AllGather, Algorithm::Ring, Protocol::Simple), (33.8, 6.4));
    assert_eq!(cell(OpKind::AllReduce, Algorithm::NvlsTree, Protocol::Simple), (28.0, 0.0));
    assert_eq!(tu.max_threads[5], (Algorithm::Ring, Protocol::Simple, 256));
    let tables = t.comms.iter().filter(|c| c.tuning.as_ref().is_some_and(|x| !x.table.is_empty())).count();
    assert_eq!(tables, 1, "rank 0 only");
}

#[test]
fn real_logs_graph_and_threshold_counts() {
    // Per file: (graphs attached, comms with thresholds), against
    // grep -c 'NCCL INFO Pattern ' / grep -c 'NCCL INFO threadThresholds '.
    let Some(dir) = common::shared_dir("nccl-logs") else { return };
    for (name, graphs, thresholds) in [
        // 6 Pattern lines (ring, tree, tree pattern 3 per rank); 2 thresholds.
        ("thomaslie210-NCCL_Test_Results-n013-GDR_ON-all_reduce-2xA100PCIe-PCIeonly-2.16.5.log", 6, 2),
        // 2 Pattern lines on the ncclCommInitAll thread; no threadThresholds.
        ("ssbandjl-nccl-tests-all_ref_log-V100-2.26.6-modified.log", 2, 0),
        // 8 threadThresholds, one per rank, no Pattern lines.
        ("alcf-nccl-tests-VAE-2024-11-08-21-21-27-with_aws-2.20.5.log", 0, 8),
        // 32 Pattern lines but no comm line at all (GRAPH subsystem only): nothing to attach to.
        ("panlichen-nccl-tests-log-RTX3090-PCIe-dualsocket-GRAPH-2.18.1.log", 0, 0),
    ] {
        let (t, r) = load_path(&dir.join(name), &ReadOptions::default()).unwrap();
        let n_graphs: usize = t.comms.iter().filter_map(|c| c.tuning.as_ref()).map(|x| x.graphs.len()).sum();
        let n_thresh = t.comms.iter().filter_map(|c| c.tuning.as_ref()).filter(|x| !x.thread_thresholds.is_empty()).count();
        assert_eq!((n_graphs, n_thresh), (graphs, thresholds), "{name}");
        assert_eq!(r.malformed.count_of("Pattern") + r.malformed.count_of("tuning table"), 0, "{name}");
    }
}
