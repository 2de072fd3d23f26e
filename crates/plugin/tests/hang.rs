//! In-flight dumps end to end: the fake-NCCL harness (`tests/harness/hang.c`, under
//! AddressSanitizer) drives four ranks into a hang, the plugin writes one
//! `commlens-hang` JSON per device, and `commlens_ingest::hang_dump::read_dumps` +
//! `commlens_analyze::hang::analyze` must name the stalled collective and the culprit,
//! for each trigger: `commlens_profiler_dump_inflight()`, the timeout, and SIGUSR1.
//! The same scenarios also run under valgrind, which sees the Rust side.

use commlens_analyze::hang::{analyze, HangReport, Instance, MemberState, Verdict};
use commlens_core::inflight::{CommInflight, RankInflight};
use commlens_ingest::hang_dump::read_dumps;
use commlens_ingest::plugin_out;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;
use support::{harness, out_dir, plugin_so, run};

fn run_hang(name: &str, exe: &Path, valgrind: bool, env: &[(&str, &str)]) -> (PathBuf, String) {
    let dir = out_dir(&format!("hang-{name}"));
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["--error-exitcode=1", "--quiet", "--trace-children=no"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.arg(plugin_so()).arg(format!("hang-{}", name.trim_start_matches("vg-")));
    let o: Output = run(&mut cmd, &dir, env);
    (dir, String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The dumps in `dir`, by global rank; every other file there is the plugin's trace.
fn dumps(dir: &Path) -> Vec<RankInflight> {
    let (mut d, skipped) = read_dumps(&[dir.to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
    assert!(skipped.iter().all(|(p, _)| p.extension().is_some_and(|e| e == "clp")), "{skipped:?}");
    d.sort_by_key(|d| d.global_rank);
    for (i, r) in d.iter().enumerate() {
        assert_eq!(r.global_rank, Some(i as u32), "global ranks from the world communicator");
        assert_eq!((r.pid, r.host.as_str()), (d[0].pid, d[0].host.as_str()), "one process drives all devices");
        let name = format!("commlens-hang-{}-{}-dev{i}.json", r.host, r.pid);
        assert!(dir.join(&name).is_file(), "{name}");
    }
    d
}

fn comm(d: &RankInflight, hash: u64) -> &CommInflight {
    d.comms.iter().find(|c| c.comm_hash == hash).expect("communicator in the dump")
}

fn progress(r: &HangReport) -> Vec<Option<(u64, u64)>> {
    r.first_stalled.as_ref().unwrap().members.iter().map(|m| m.progress).collect()
}

fn stdout_value(out: &str, key: &str) -> i64 {
    let line = out.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in {out}"));
    line[key.len()..].trim().parse().unwrap()
}

fn check_join(dir: &Path, out: &str) {
    assert!(out.contains("DUMPED 4"), "{out}");
    let ds = dumps(dir);
    assert_eq!(ds.len(), 4);
    const TP: u64 = 0x7E57;
    // Device 0 is TP rank 3: four completed collectives, nothing open.
    let c = comm(&ds[0], TP);
    assert_eq!((c.rank, c.nranks, c.desc.as_str()), (3, 4, "TP0"));
    assert_eq!(
        c.past.iter().map(|o| (o.seq, o.op.as_str())).collect::<Vec<_>>(),
        [(0, "AllReduce"), (1, "AllReduce"), (2, "AllGather"), (3, "AllReduce")]
    );
    for o in &c.past {
        let (e, s, f) = (o.enqueue_ns.unwrap(), o.start_ns.unwrap(), o.end_ns.unwrap());
        assert!(e <= s && s <= f && f <= ds[0].time_ns, "{o:?}");
        assert_eq!(o.bytes, 4096);
    }
    assert!(c.current.is_empty() && c.pending.is_empty());
    // Devices 1-3 run TP seq 4 (2 channels started, none done); their world AllReduce waits.
    for d in &ds[1..] {
        let cur = &comm(d, TP).current;
        assert_eq!(cur.len(), 1);
        assert_eq!((cur[0].seq, cur[0].op.as_str(), cur[0].bytes), (4, "AllReduce", 4096));
        assert_eq!((cur[0].progress_done, cur[0].progress_total), (Some(0), Some(2)));
        assert!(cur[0].start_ns.unwrap() >= cur[0].enqueue_ns.unwrap());
        let w = comm(d, 0xA11A11);
        assert_eq!((w.pending.len(), w.pending[0].seq, w.current.len()), (1, 0, 0));
    }
    let r = analyze(&ds, 0);
    let s = r.first_stalled.as_ref().expect("a stalled collective");
    assert_eq!(s.instance, Instance { comm_hash: TP, seq: 4 });
    assert_eq!((s.op.as_str(), s.desc.as_str(), s.nranks, s.bytes), ("AllReduce", "TP0", 4, 4096));
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["r0".into()] });
    let states: Vec<_> = s.members.iter().map(|m| (m.who.as_str(), m.state)).collect();
    use MemberState::*;
    assert_eq!(states, [("r3", Running), ("r2", Running), ("r1", Running), ("r0", NotReached)]);
    assert_eq!(r.blocked.len(), 3, "the world AllReduce waits behind it on devices 1-3");
    assert!(r.other_roots.is_empty());
    // NCCL's own per-function number rides along: the stalled AllReduce is the TP's fourth AllReduce.
    let raw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("commlens-hang-{}-{}-dev1.json", ds[1].host, ds[1].pid))).unwrap(),
    )
    .unwrap();
    let tp = raw["comms"].as_array().unwrap().iter().find(|c| c["comm_hash"] == TP).unwrap();
    assert_eq!((tp["current"][0]["seq"].as_u64(), tp["current"][0]["nccl_seq"].as_u64()), (Some(4), Some(3)));
    assert_eq!(raw["reason"], "request");
}

#[test]
fn rank_that_never_joined_is_named() {
    let (dir, out) = run_hang("join", &harness().asan, false, &[("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    check_join(&dir, &out);
    // The trace file agrees: the six kernel channels that never stopped are open events.
    let clp: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "clp"))
        .collect();
    assert_eq!(clp.len(), 1);
    let t = plugin_out::read_trace(&clp[0]).unwrap();
    assert_eq!((t.report.open_events, t.report.dropped), (6, 0));
}

fn check_ring(dir: &Path, out: &str) {
    assert!(out.contains("DUMPED 4"), "{out}");
    let ds = dumps(dir);
    let r = analyze(&ds, 0);
    assert_eq!(r.first_stalled.as_ref().unwrap().instance, Instance { comm_hash: 0x121A6, seq: 2 });
    assert_eq!(r.verdict, Verdict::StuckInside { lowest_progress: Some("r2".into()) });
    assert_eq!(progress(&r), [Some((12, 16)), Some((12, 16)), Some((3, 16)), Some((12, 16))], "proxy steps posted");
    assert!(ds.iter().all(|d| comm(d, 0x121A6).past.len() == 2));
}

#[test]
fn ring_stuck_midway_names_the_rank_with_least_progress() {
    // ProxyStep (0x10) on top of the default mask: progress counts proxy steps.
    let env = [("COMMLENS_PLUGIN_FLUSH_MS", "20"), ("COMMLENS_PLUGIN_MASK", "0x1F5F")];
    let (dir, out) = run_hang("ring", &harness().asan, false, &env);
    check_ring(&dir, &out);
}

#[test]
fn timeout_dumps_once_per_stall_without_being_asked() {
    let env = [("COMMLENS_PLUGIN_FLUSH_MS", "20"), ("COMMLENS_PLUGIN_HANG_TIMEOUT_S", "0.3")];
    let (dir, out) = run_hang("timeout", &harness().asan, false, &env);
    assert!(stdout_value(&out, "FIRST_DUMP_AFTER_MS") >= 300, "{out}");
    assert_eq!(stdout_value(&out, "TIMEOUT_DUMPS"), 2, "one dump per stall, two stalls");
    let ds = dumps(&dir);
    assert_eq!(ds.len(), 2);
    assert!(ds.iter().all(|d| d.reason == "timeout"));
    // The files hold the second stall: an AllGather rank 1 never joined.
    let r = analyze(&ds, 0);
    let s = r.first_stalled.as_ref().unwrap();
    assert_eq!((s.instance, s.op.as_str()), (Instance { comm_hash: 0x71E0, seq: 1 }, "AllGather"));
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["r1".into()] });
    let stuck = &comm(&ds[0], 0x71E0).current[0];
    assert!(ds[0].time_ns - stuck.enqueue_ns.unwrap() >= 300_000_000, "dumped after the timeout");
    assert_eq!(comm(&ds[1], 0x71E0).past.iter().map(|o| o.seq).collect::<Vec<_>>(), [0]);
}

fn check_signal(dir: &Path, out: &str) {
    assert!(out.contains("CHAINED 2"), "the handler installed before the plugin's ran both times: {out}");
    assert!(out.contains("RESTORED 1"), "the last finalize put it back: {out}");
    let ds = dumps(dir);
    assert!(ds.iter().all(|d| d.reason == "signal"));
    let r = analyze(&ds, 0);
    assert_eq!(r.first_stalled.as_ref().unwrap().instance, Instance { comm_hash: 0x5167, seq: 1 });
    assert_eq!(r.verdict, Verdict::StuckInside { lowest_progress: Some("r3".into()) });
    assert_eq!(progress(&r), [Some((3, 4)), Some((3, 4)), Some((3, 4)), Some((1, 4))], "kernel channels stopped");
}

#[test]
fn sigusr1_dumps_and_chains_to_the_previous_handler() {
    let (dir, out) = run_hang("signal", &harness().asan, false, &[("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    check_signal(&dir, &out);
}

#[test]
fn hang_scenarios_under_valgrind() {
    let valgrind = Path::new("/usr/bin/valgrind");
    let found = valgrind.is_file() || Command::new("valgrind").arg("--version").output().is_ok();
    if !found {
        commlens_testdata::skip_unless_ci("plugin under valgrind", "valgrind not found", "apt-get install valgrind");
        return;
    }
    let (dir, out) = run_hang("vg-join", &harness().plain, true, &[("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    check_join(&dir, &out);
    let (dir, out) = run_hang("vg-signal", &harness().plain, true, &[("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    check_signal(&dir, &out);
}

#[test]
fn self_p2p_neither_dumps_nor_hides_a_stall() {
    // NCCL 2.28's all-to-all with a self pair, then a world AllReduce rank 3 joins late (the
    // first real capture, scripts/gpu/capture_job.py): no spurious dump for the self pair,
    // and the stall is dumped although NCCL's KernelCh events call it finished at once.
    let env = [("COMMLENS_PLUGIN_FLUSH_MS", "20"), ("COMMLENS_PLUGIN_HANG_TIMEOUT_S", "0.3")];
    let (dir, out) = run_hang("selfp2p", &harness().asan, false, &env);
    assert_eq!(stdout_value(&out, "NOSPURIOUS"), 1, "a self send/recv kept open: {out}");
    assert_eq!(stdout_value(&out, "DUMPED"), 1, "{out}");
    let ds = dumps(&dir);
    assert_eq!(ds.len(), 4);
    assert!(ds.iter().all(|d| d.reason == "timeout"));
    for d in &ds {
        let w = comm(d, 0x5E1F);
        assert_eq!(w.past.len(), 8, "the all-to-all is done, its self pair included");
        assert!(w.past.iter().all(|o| o.op == "Send" || o.op == "Recv"));
    }
    let r = analyze(&ds, 0);
    let s = r.first_stalled.as_ref().expect("the stalled AllReduce");
    assert_eq!((s.instance, s.op.as_str()), (Instance { comm_hash: 0x5E1F, seq: 8 }, "AllReduce"));
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["r3".into()] });
}
