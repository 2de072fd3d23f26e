//! GPU-free end-to-end tests of the plugin: a C program (`tests/harness/fake_nccl.c`,
//! compiled here with the `cc` crate's compiler detection) `dlopen`s the cdylib built
//! with this test and replays NCCL's profiler call sequences; the files it makes are
//! read back with `commlens_ingest::plugin_out` and checked with exact counts.
//!
//! The C side runs under AddressSanitizer (poison PXN pointers, use-after-free, leaks);
//! the whole harness also runs under valgrind, which sees the Rust side too (skipped
//! with a note when valgrind is absent, a failure under `CI=true`).
//! `cargo test -p commlens-plugin --release --test harness -- --ignored --nocapture bench`
//! prints the benchmark figures, with metrics off and on.

use commlens_analyze::stats::{Aggregate, StatsReport};
use commlens_core::model::Grouping;
use commlens_core::{Algorithm, DataType, OpKind, OpTable, Protocol};
use commlens_ingest::plugin_out::{self, Fields, PluginTrace, FLAG_CTX_FOREIGN, FLAG_CTX_NULL, FLAG_PARENT_FOREIGN};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;
use support::{harness, out_dir, plugin_so, run};

/// `EMITTED starts=… stops=… states=… null_handles=…` → the four numbers.
fn emitted(o: &Output) -> [u64; 4] {
    let s = String::from_utf8_lossy(&o.stdout);
    let line = s.lines().find(|l| l.starts_with("EMITTED ")).expect("EMITTED line");
    let v: Vec<u64> =
        line.split_whitespace().skip(1).map(|kv| kv.split_once('=').unwrap().1.parse().unwrap()).collect();
    [v[0], v[1], v[2], v[3]]
}

fn traces(dir: &Path) -> Vec<PluginTrace> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "the plugin wrote no file in {}", dir.display());
    files.iter().map(|f| plugin_out::read_trace(f).unwrap_or_else(|e| panic!("{e}"))).collect()
}

/// Every START/STOP/STATE the harness made is in the files, and nothing else is lost.
fn check_event_counts(ts: &[PluginTrace], em: [u64; 4]) {
    let sum = |f: fn(&PluginTrace) -> u64| ts.iter().map(f).sum::<u64>();
    assert_eq!(em[3], 0, "the plugin returned NULL handles");
    assert_eq!(sum(|t| t.report.dropped), 0, "records were dropped");
    assert_eq!(sum(|t| t.report.truncated_bytes), 0);
    assert_eq!(sum(|t| t.report.starts), em[0]);
    assert_eq!(sum(|t| t.report.stops), em[1]);
    assert_eq!(sum(|t| t.report.states), em[2]);
    assert_eq!(sum(|t| t.report.orphan_stops + t.report.orphan_states + t.report.open_events), 0);
    assert!(ts.iter().all(|t| t.report.clean_end), "a file lacks its END record");
}

fn by_kind(t: &OpTable) -> BTreeMap<OpKind, usize> {
    let mut m = BTreeMap::new();
    for op in t.ops() {
        *m.entry(op.kind).or_default() += 1;
    }
    m
}

#[test]
fn replay_under_asan_round_trips_exactly() {
    let dir = out_dir("replay");
    let mut cmd = Command::new(&harness().asan);
    cmd.arg(plugin_so()).arg("replay");
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_TEST_PANIC_STATE", "77"), ("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    let ts = traces(&dir);
    check_event_counts(&ts, emitted(&o));
    assert_eq!(ts.iter().map(|t| t.report.panics).max(), Some(1), "the caught panic is counted");

    // Every event type, decoded from the descriptor of the API version it came through.
    let mut types: BTreeMap<String, u64> = BTreeMap::new();
    for t in &ts {
        for (k, v) in &t.report.events_by_type {
            *types.entry(k.clone()).or_default() += v;
        }
    }
    #[rustfmt::skip]
    let want = [("CeBatch", 1), ("CeColl", 1), ("CeSync", 1), ("Coll", 25), ("CollApi", 25), ("Group", 32),
        ("GroupApi", 19), ("KernelCh", 55), ("KernelLaunch", 31), ("KernelPhase", 1), ("NetPlugin", 48), ("P2p", 17),
        ("P2pApi", 17), ("ProxyCtrl", 4), ("ProxyOp", 27), ("ProxyStep", 53), ("type20", 1)];
    let want: BTreeMap<String, u64> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(types, want);

    let t = &ts[0];
    let events: Vec<_> = ts.iter().flat_map(|t| t.events.iter().map(move |e| (t, e))).collect();
    // PXN: the foreign proxy op keeps the other process's parent as a number; its step is ours.
    let pxn: Vec<_> = events.iter().filter(|(_, e)| e.ty == 3 && e.flags & FLAG_PARENT_FOREIGN != 0).collect();
    assert_eq!(pxn.len(), 1);
    let (_, op) = pxn[0];
    assert_eq!((op.parent, op.comm, op.flags & FLAG_CTX_FOREIGN), (0xbadc_0ffe_e0dd_f00d, 0, FLAG_CTX_FOREIGN));
    assert!(matches!(op.fields, Fields::ProxyOp { pid, channel: 3, .. } if pid as u32 == t.header.pid + 4242));
    let step = events.iter().find(|(_, e)| e.ty == 4 && e.parent == op.id).expect("PXN step");
    assert_eq!(step.1.flags, FLAG_CTX_FOREIGN, "a step's parent is our own proxy op");
    let kch = events.iter().filter(|(_, e)| e.ty == 6 && e.flags & FLAG_PARENT_FOREIGN != 0).count();
    assert_eq!(kch, 1);
    // NULL context, unknown type and state, NULL state args.
    assert_eq!(events.iter().filter(|(_, e)| e.flags & FLAG_CTX_NULL != 0).count(), 1);
    let unknown = events.iter().find(|(_, e)| e.ty == 20).unwrap().1;
    let st: Vec<_> = ts.iter().flat_map(|t| &t.states).filter(|s| s.id == unknown.id).collect();
    assert_eq!((st.len(), st[0].state, st[0].arg), (1, 99, Some(123)));
    let no_args = ts.iter().flat_map(|t| &t.states).filter(|s| s.arg.is_none() && (s.state == 9 || s.state == 22));
    assert_eq!(no_args.count(), 3, "SendWait and two KernelChStop without args");
    // Parent chains: task events under API events (v4: under the Group), children under tasks.
    for (tr, e) in &events {
        let parent = tr.parent_of(e).map(|p| p.ty);
        match e.ty {
            1 | 2 => assert!(matches!(parent, Some(9) | Some(10) | Some(0)), "coll/p2p parent {parent:?}"),
            12 => assert_eq!(parent, Some(9)),
            4 => assert!(e.parent == 0 || parent == Some(3)),
            7 => assert_eq!(parent, Some(4)),
            15 => assert_eq!(parent, Some(6)),
            9..=11 => assert_eq!(parent, Some(8)),
            _ => {}
        }
    }
    // v7 fields, net-plugin and CE details, interned strings.
    let v7 = events.iter().find(|(_, e)| matches!(e.fields, Fields::Coll { user_tag: 0x1234, .. })).unwrap();
    let Fields::Coll { kernel_variant, is_sym, algo, .. } = v7.1.fields else { unreachable!() };
    assert_eq!((v7.0.string(kernel_variant), is_sym, v7.0.string(algo)), ("SymLL", true, "NVLS"));
    let phase = events.iter().find(|(_, e)| e.ty == 15).unwrap();
    assert!(matches!(phase.1.fields, Fields::KernelPhase { phase_id: 1, .. }) && phase.1.gpu_stop.is_some());
    let nets = events.iter().filter(|(_, e)| matches!(e.fields, Fields::NetPlugin { net_kind: 1, length: 65536, .. }));
    assert_eq!(nets.count(), 48);
    let ce = events.iter().find(|(_, e)| e.ty == 12).unwrap();
    assert!(matches!(ce.1.fields, Fields::CeColl { sync_strategy, .. } if ce.0.string(sync_strategy) == "barrier"));

    // Communicators: concurrent init, device probe, API versions, finalize.
    let comms: Vec<_> = ts.iter().flat_map(|t| &t.comms).collect();
    assert_eq!(comms.len(), 10);
    assert!(comms.iter().all(|c| c.fini_ns.is_some()));
    let mut apis: Vec<u8> = comms.iter().map(|c| c.api).collect();
    apis.sort();
    assert_eq!(apis, vec![4, 5, 6, 6, 6, 6, 6, 6, 6, 7]);
    let world: Vec<_> = comms.iter().filter(|c| c.comm_hash == 0xA11A11).collect();
    assert!(world.iter().all(|c| c.cuda_dev == Some(c.rank) && c.bus_id == Some((0x10 + c.rank as i64) << 12)));
    assert!(world.iter().all(|c| t.string(c.name) == "world" && c.mask == 0x1F4F));

    // The canonical table, as `commlens stats` would load it.
    let (table, reports) = plugin_out::load_plugin_outputs(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(reports.len(), ts.len());
    #[rustfmt::skip]
    let want = BTreeMap::from([(OpKind::AllReduce, 14), (OpKind::AllGather, 9), (OpKind::ReduceScatter, 1),
        (OpKind::Broadcast, 2), (OpKind::Send, 9), (OpKind::Recv, 8)]);
    assert_eq!(by_kind(&table), want);
    assert_eq!(table.ops().filter(|o| o.gpu.is_some()).count(), 41, "all but the CE AllGather and the v5 Send");
    assert_eq!(table.devices.len(), 4);
    for d in &table.devices {
        assert_eq!(d.global_rank, d.cuda_dev, "global ranks from the world communicator");
        assert_eq!(d.bus_id, Some((0x10 + d.cuda_dev.unwrap() as u64) << 12));
    }
    assert_eq!(table.comms.len(), 10);
    assert_eq!(table.logical.len(), 6);
    let w = table.logical.iter().find(|l| l.comm_id == Some(0xA11A11)).unwrap();
    assert_eq!((w.members.len(), w.grouping), (4, Grouping::CommId));
    let start_epoch = t.header.real_ns as i64;
    for op in table.ops() {
        assert!(op.cpu_ts_ns.unwrap() >= start_epoch - 1_000_000_000);
        assert_eq!(table.comms[op.comm.ix()].device, Some(op.dev));
        match op.kind {
            OpKind::AllGather => assert_eq!(
                (op.count, op.dtype, op.bytes),
                (
                    if op.gpu.is_some() { 1000 } else { 256 },
                    DataType::Float32,
                    if op.gpu.is_some() { 4000 } else { 1024 }
                )
            ),
            OpKind::Broadcast => assert_eq!((op.count, op.dtype, op.root), (512, DataType::Float16, Some(1))),
            OpKind::Send | OpKind::Recv if table.comms[op.comm.ix()].comm_id == Some(0xA11A11) => {
                let r = table.comms[op.comm.ix()].rank.unwrap();
                let peer = if op.kind == OpKind::Send { (r + 1) % 4 } else { (r + 3) % 4 };
                assert_eq!((op.peer, op.count, op.channels), (Some(peer), 256, Some((0, 0))));
            }
            _ => {}
        }
        if let Some(g) = op.gpu {
            let nch = op.channels.map_or(1, |(lo, hi)| (hi - lo + 1) as i64);
            assert_eq!(g.end_ns - g.start_ns, 100 * (nch - 1) + 1000 + (nch - 1), "{op:?}");
            assert!((g.start_ns - op.cpu_ts_ns.unwrap()).abs() < 2_000_000_000, "GPU clock not calibrated: {op:?}");
        }
    }
    for r in &table.per_rank {
        let ar: Vec<_> = r.iter().filter(|o| o.kind == OpKind::AllReduce && o.channels == Some((0, 1))).collect();
        assert_eq!(ar.iter().map(|o| o.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(ar.iter().all(|o| o.algo == Some(Algorithm::Ring) && o.proto == Some(Protocol::Simple)));
    }
    let report = StatsReport::build(&table, &Aggregate::from_table(&table));
    assert_eq!((report.total_ops, report.total_bytes), (43, 249_232));
}

#[test]
fn sixty_four_threads_under_asan() {
    let (threads, iters) = (64usize, 500u64);
    let dir = out_dir("stress");
    let mut cmd = Command::new(&harness().asan);
    cmd.arg(plugin_so()).args(["stress", &threads.to_string(), &iters.to_string()]);
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_BUF_KB", "1024"), ("COMMLENS_PLUGIN_FLUSH_MS", "5")]);
    let em = emitted(&o);
    // Per iteration: 12 group/API/task callbacks, 3 KernelCh, 3 ProxyOp, 5 ProxyStep.
    assert_eq!(em, [threads as u64 * iters * 8, threads as u64 * iters * 8, threads as u64 * iters * 7, 0]);
    let ts = traces(&dir);
    check_event_counts(&ts, em);
    assert_eq!(ts[0].report.threads, threads as u64);
    let (table, _) = plugin_out::load_plugin_outputs(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(table.n_ops(), threads * iters as usize);
    assert_eq!(table.devices.len(), threads);
    assert_eq!(table.logical.len(), 1);
    for r in &table.per_rank {
        let seq: Vec<u64> = r.iter().map(|o| o.seq).collect();
        assert_eq!(seq, (0..iters).collect::<Vec<_>>(), "one rank's AllReduces, in order");
        assert!(r.iter().enumerate().all(|(i, o)| o.comm_seq == i as u64 && o.gpu.is_some()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn full_buffers_drop_and_count_instead_of_blocking() {
    let n = 5000u64;
    let dir = out_dir("drops");
    let mut cmd = Command::new(&harness().plain);
    cmd.arg(plugin_so()).args(["drops", &n.to_string()]);
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_BUF_KB", "4"), ("COMMLENS_PLUGIN_FLUSH_MS", "0")]);
    assert_eq!(emitted(&o), [n, n, 0, 0]);
    let ts = traces(&dir);
    assert_eq!(ts.len(), 1);
    let r = &ts[0].report;
    assert_eq!(r.starts + r.stops + r.dropped, 2 * n, "every record is written or counted as dropped");
    assert!(r.dropped > n, "a 4 KiB buffer with no writer holds only a few dozen records");
    assert!(r.clean_end);
}

#[test]
fn a_forked_child_leaves_the_parents_file_alone() {
    let dir = out_dir("fork");
    let mut cmd = Command::new(&harness().asan);
    cmd.arg(plugin_so()).arg("fork");
    // No writer: the parent's first records are still buffered when it forks.
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_FLUSH_MS", "0")]);
    let ts = traces(&dir);
    assert_eq!(ts.len(), 2, "the parent's file and the child's own");
    let (parent, child): (Vec<_>, Vec<_>) = ts.iter().partition(|t| t.comms.iter().any(|c| c.comm_hash == 0xF0F0));
    check_event_counts(&parent.iter().map(|t| (*t).clone()).collect::<Vec<_>>(), emitted(&o));
    assert_eq!((parent[0].report.starts, parent[0].report.stops), (20, 20), "no duplicates from the child");
    let c = child[0];
    assert_eq!((c.report.starts, c.report.stops, c.comms.len(), c.report.clean_end), (1, 1, 1, true));
    assert_ne!(c.header.pid, parent[0].header.pid);
    let Fields::Coll { func, dtype, .. } = c.events[0].fields else { panic!("a Coll") };
    assert_eq!(
        (c.string(func), c.string(dtype)),
        ("Broadcast", "ncclFloat32"),
        "strings re-declared in the child's file"
    );
}

#[test]
fn dlclose_then_dlopen_starts_afresh_without_leaks() {
    // Init and events on threads that exit, as with NCCL's async init jobs: nothing pins the
    // image, so every dlclose really unloads it (with and without the writer thread, which
    // must have been joined), its exit handler runs, and LeakSanitizer sees anything its
    // statics still owned. Each load is a new session and file.
    for (name, flush_ms) in [("unload", "0"), ("unload-writer", "10")] {
        let dir = out_dir(name);
        let mut cmd = Command::new(&harness().asan);
        cmd.arg(plugin_so()).args(["unload", "3"]);
        let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_FLUSH_MS", flush_ms)]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let unloaded = stdout.lines().filter(|l| *l == "UNLOADED 1").count();
        let ts = traces(&dir);
        check_event_counts(&ts, emitted(&o));
        assert_eq!((unloaded, ts.len()), (3, 3), "one session (file) per load");
        let (table, _) = plugin_out::load_plugin_outputs(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(table.n_ops(), 3);
        assert_eq!(table.logical.len(), 3, "three communicators, one per round");
    }
}

#[test]
fn harness_under_valgrind() {
    let valgrind = Path::new("/usr/bin/valgrind");
    let found = valgrind.is_file() || Command::new("valgrind").arg("--version").output().is_ok();
    if !found {
        commlens_testdata::skip_unless_ci("plugin under valgrind", "valgrind not found", "apt-get install valgrind");
        return;
    }
    for (name, mode) in
        [("vg-replay", vec!["replay"]), ("vg-stress", vec!["stress", "8", "50"]), ("vg-unload", vec!["unload", "2"])]
    {
        let dir = out_dir(name);
        let mut cmd = Command::new("valgrind");
        cmd.args(["--error-exitcode=1", "--quiet", "--trace-children=no"]).arg(&harness().plain).arg(plugin_so());
        cmd.args(&mode);
        let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_TEST_PANIC_STATE", "77")]);
        check_event_counts(&traces(&dir), emitted(&o));
    }
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn bench() {
    let iters = std::env::var("COMMLENS_BENCH_ITERS").unwrap_or_else(|_| "200000".into());
    let threads = std::env::var("COMMLENS_BENCH_THREADS").unwrap_or_else(|_| "8".into());
    let dir = out_dir("bench");
    let mut cmd = Command::new(&harness().plain);
    cmd.arg(plugin_so()).args(["bench", &iters, &threads]);
    let buf_kb = std::env::var("COMMLENS_BENCH_BUF_KB").unwrap_or_else(|_| "65536".into());
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_BUF_KB", &buf_kb)]);
    println!("metrics off:\n{}", String::from_utf8_lossy(&o.stdout));
    let dropped: u64 = traces(&dir).iter().map(|t| t.report.dropped).sum();
    println!("per-thread buffer {buf_kb} KiB; records dropped during the benchmark: {dropped}");
    let _ = std::fs::remove_dir_all(&dir);
    // The same run with metrics on (file and HTTP port, refreshed every 100 ms by the writer).
    let dir = out_dir("bench-metrics");
    let prom = dir.join("prom");
    let mut cmd = Command::new(&harness().plain);
    cmd.arg(plugin_so()).args(["bench", &iters, &threads]);
    #[rustfmt::skip]
    let env = [("COMMLENS_PLUGIN_BUF_KB", buf_kb.as_str()), ("COMMLENS_PLUGIN_PROM_DIR", prom.to_str().unwrap()),
        ("COMMLENS_PLUGIN_PROM_PORT", "0"), ("COMMLENS_PLUGIN_PROM_INTERVAL_MS", "100")];
    let o = run(&mut cmd, &dir, &env);
    println!("metrics on:\n{}", String::from_utf8_lossy(&o.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}
