//! Fusion scored on our own real captures (torch 2.11, NCCL 2.28.9, four
//! ranks on one H100, TP 2 × DP 2, `scripts/gpu/capture_job.py`), against a
//! truth built from the job itself, not from the aligner's own features:
//!
//! * a log record's **iteration**: per rank, communicator and kind (send and
//!   receive together), its distinct `opCount`s in order, split
//!   evenly over the job's 16 iterations (a communicator whose count is not a
//!   multiple of 16, the world's broadcast/barrier/stall, is outside the steps);
//! * a kernel's **iteration**: the `ProfilerStep#N` range holding its launch
//!   call (its CPU op when it has no launch);
//! * within an iteration, the k-th operation of a class (`AllReduce` of a given
//!   size, `AllGather`, `ReduceScatter`, the TP send/recv pair, the all-to-all)
//!   on either side is the same operation.
//!
//! A predicted (record, kernel) pair is right when both keys agree. The
//! timestamped capture must fuse almost perfectly (F1 0.994: precision 1,
//! 158 of 160 true pairs; it was 0.664 before the rank clock trusted the
//! absolute clocks). On the capture without log timestamps the periodic job
//! makes order-only alignment ambiguous (the trace's five iterations align as
//! well with any five of the log's sixteen; F1 0 there, the first five are
//! taken), and the confidences must say so: no confident wrong pair.
//!
//! `REAL_CAPTURE_VERBOSE=1` lists every wrong and missed pair.

use commlens_core::{OpKind, OpTable};
use commlens_fuse::join::LOW_CONFIDENCE;
use commlens_fuse::{fuse_traces, FuseConfig, FuseReport};
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::kineto::{load_kineto, KernelTrace, RangeKind};
use commlens_ingest::nccl_log::ReadOptions;
use std::collections::HashMap;
use std::path::PathBuf;

const ITERATIONS: u64 = 16;

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/captures").join(name)
}

/// `(iteration, class, ordinal)`: the same operation on both sides.
type Key = (u64, String, usize);

/// Keys of one rank's log records (None outside the steps).
fn record_keys(table: &OpTable, d: usize) -> Vec<Option<Key>> {
    let ops = &table.per_rank[d].to_vec();
    let p2p = |k: OpKind| k.is_p2p();
    // Per (communicator, class): distinct opCounts in order.
    let class_of = |k: OpKind| if p2p(k) { OpKind::SendRecv } else { k };
    let mut seqs: HashMap<(u32, OpKind), Vec<u64>> = HashMap::new();
    for o in ops {
        let v = seqs.entry((o.comm.0, class_of(o.kind))).or_default();
        if !v.contains(&o.seq) {
            v.push(o.seq);
        }
    }
    let iteration = |o: &commlens_core::CollOp| -> Option<u64> {
        let v = &seqs[&(o.comm.0, class_of(o.kind))];
        let n = v.len() as u64;
        if n == 0 || n % ITERATIONS != 0 {
            return None;
        }
        let idx = v.iter().position(|&s| s == o.seq)? as u64;
        Some(idx / (n / ITERATIONS))
    };
    let class = |o: &commlens_core::CollOp| -> String {
        match o.kind {
            OpKind::AllReduce => format!("AllReduce:{}", o.bytes),
            k if k.is_p2p() => "P2P".into(),
            OpKind::AllToAll => "AllToAll".into(),
            k => k.name().to_string(),
        }
    };
    // Ordinal: distinct (comm, opCount) of the class seen before in the iteration.
    let mut seen: HashMap<(u64, String), Vec<(u32, u64)>> = HashMap::new();
    ops.iter()
        .map(|o| {
            let it = iteration(o)?;
            let c = class(o);
            let v = seen.entry((it, c.clone())).or_default();
            let id = (o.comm.0, o.seq);
            let ord = match v.iter().position(|x| *x == id) {
                Some(p) => p,
                None => {
                    v.push(id);
                    v.len() - 1
                }
            };
            Some((it, c, ord))
        })
        .collect()
}

/// Keys of one trace rank's kernels.
fn kernel_keys(trace: &KernelTrace, r: usize) -> Vec<Option<Key>> {
    let rt = &trace.ranks[r];
    let steps: Vec<(i64, i64, u64)> = trace
        .ranges
        .iter()
        .filter(|g| g.kind == RangeKind::ProfilerStep && g.pid == rt.pid)
        .filter_map(|g| {
            let n = trace.names[g.name as usize].rsplit('#').next()?.parse().ok()?;
            Some((g.start_ns, g.end_ns, n))
        })
        .collect();
    let mut order: Vec<usize> = (0..rt.kernels.len()).collect();
    order.sort_by_key(|&i| rt.kernels[i].start_ns);
    let mut seen: HashMap<(u64, String), usize> = HashMap::new();
    let mut out = vec![None; rt.kernels.len()];
    for i in order {
        let k = &rt.kernels[i];
        let cpu = k.cpu_op.map(|c| &rt.cpu_ops[c as usize]);
        let t = k.launch.map(|l| l.ts_ns).or(cpu.map(|c| c.ts_ns));
        let Some(it) = t.and_then(|t| steps.iter().find(|s| s.0 <= t && t <= s.1)).map(|s| s.2) else { continue };
        let meta = k.meta.as_deref().or(cpu.map(|c| &c.meta));
        let class = match k.parsed.kind {
            Some(OpKind::AllReduce) => {
                let m = meta.expect("an all-reduce kernel names its call");
                let n = m.in_nelems.unwrap().min(m.out_nelems.unwrap());
                format!("AllReduce:{}", n * m.dtype.unwrap().size_bytes().unwrap())
            }
            Some(OpKind::SendRecv) => {
                if meta.and_then(|m| m.collective.as_deref()).is_some_and(|c| c.contains("all_to_all")) {
                    "AllToAll".into()
                } else {
                    "P2P".into()
                }
            }
            Some(k) => k.name().to_string(),
            None => continue,
        };
        let n = seen.entry((it, class.clone())).or_default();
        out[i] = Some((it, class, *n));
        *n += 1;
    }
    out
}

struct Score {
    predicted: usize,
    right: usize,
    truth: usize,
    /// Predicted pairs with confidence ≥ 0.5, and how many of them are right.
    confident: usize,
    confident_right: usize,
}

impl Score {
    fn precision(&self) -> f64 {
        self.right as f64 / self.predicted.max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.right as f64 / self.truth.max(1) as f64
    }
    fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) }
    }
}

/// Fuses the capture's logs with its Kineto traces and scores every rank.
fn score(name: &str) -> (Score, FuseReport) {
    let dir = capture(name);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir.join("logs")).unwrap().map(|e| e.unwrap().path()).collect();
    logs.sort();
    let mut table = load_inputs(&logs, &ReadOptions::default()).unwrap().table;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("kineto")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let traces: Vec<KernelTrace> = files.iter().map(|f| load_kineto(f).unwrap()).collect();
    let report = fuse_traces(&mut table, &traces, &FuseConfig::default()).unwrap();
    assert_eq!(report.ranks.len(), 4, "{name}: every rank paired");
    let mut s = Score { predicted: 0, right: 0, truth: 0, confident: 0, confident_right: 0 };
    for rf in &report.ranks {
        let (d, tr) = (rf.pairing.dev.ix(), &traces[rf.pairing.trace]);
        let rk = record_keys(&table, d);
        let kk = kernel_keys(tr, rf.pairing.rank);
        let kernels = &tr.ranks[rf.pairing.rank].kernels;
        let by_key: HashMap<&Key, usize> = kk.iter().enumerate().filter_map(|(i, k)| Some((k.as_ref()?, i))).collect();
        let by_span: HashMap<(i64, i64), usize> =
            kernels.iter().enumerate().map(|(i, k)| ((tr.base_time_ns + k.start_ns, tr.base_time_ns + k.end_ns), i)).collect();
        let (mut p, mut r, mut t) = (0, 0, 0);
        for (i, o) in table.per_rank[d].iter().enumerate() {
            let truth = rk[i].as_ref().and_then(|k| by_key.get(k)).copied();
            t += usize::from(truth.is_some());
            let Some(g) = o.gpu else {
                if truth.is_some() && std::env::var_os("REAL_CAPTURE_VERBOSE").is_some() {
                    eprintln!("  missed: record {i} {:?} seq {} cpu {:?} key {:?} (kernel {:?})", o.kind, o.seq, o.cpu_ts_ns, rk[i], truth);
                }
                continue;
            };
            let got = by_span[&(g.start_ns, g.end_ns)];
            p += 1;
            let ok = truth == Some(got);
            r += usize::from(ok);
            if !ok && std::env::var_os("REAL_CAPTURE_VERBOSE").is_some() {
                let k = &kernels[got];
                eprintln!(
                    "  wrong: record {i} {:?} seq {} cpu {:?} key {:?} -> kernel {got} {} launch {:?} key {:?} (conf {:?})",
                    o.kind, o.seq, o.cpu_ts_ns, rk[i], k.name.split('(').next().unwrap(),
                    k.launch.map(|l| tr.base_time_ns + l.ts_ns), kk[got], report.confidence[d][i]
                );
            }
            if report.confidence[d][i].is_some_and(|c| c >= LOW_CONFIDENCE) {
                s.confident += 1;
                s.confident_right += usize::from(ok);
            }
        }
        eprintln!("{name} {}: {r} right of {p} predicted, {t} true pairs, mean confidence {:.2}", rf.label, rf.mean_confidence);
        (s.predicted, s.right, s.truth) = (s.predicted + p, s.right + r, s.truth + t);
    }
    eprintln!(
        "{name}: precision {:.3} recall {:.3} F1 {:.3}; confident pairs {} of which right {}",
        s.precision(),
        s.recall(),
        s.f1(),
        s.confident,
        s.confident_right
    );
    (s, report)
}

#[test]
fn timestamped_capture_fuses_every_kernel_to_its_record() {
    let (s, _) = score("h100-nccl2.28.9-tp2dp2-ep-ts");
    // Per rank and iteration: two TP all-reduces, all-gather, reduce-scatter,
    // send+recv (one SendRecv kernel), all-to-all, DP all-reduce = 8 records.
    assert_eq!(s.truth, 4 * 5 * 8, "the truth covers every record of the profiled iterations");
    assert!(s.f1() >= 0.95, "F1 {:.3}", s.f1());
}

#[test]
fn capture_without_log_timestamps_is_not_confidently_wrong() {
    let (s, _) = score("h100-nccl2.28.9-tp2dp2");
    assert_eq!(s.truth, 4 * 5 * 8);
    let wrong = s.confident - s.confident_right;
    assert!(wrong * 10 <= s.confident.max(1), "{wrong} confident pairs of {} are wrong", s.confident);
    eprintln!("without log timestamps: F1 {:.3} ({} confident pairs)", s.f1(), s.confident);
}
