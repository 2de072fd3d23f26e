//! Drops, and the assembly of the capture and its truth.
//!
//! Owns [`drop_log_ops`] (removing op records from log text: the op line with its `NCCL CALL`
//! line and its tuning line, so the reader sees the record vanish rather than a broken one),
//! the kernel drops (a profiler that lost kernels: kernel and launch call gone, the CPU-side
//! op and the log record kept), and [`assemble`], which turns the timeline into epoch-ns
//! kernels with correlation ids, the Kineto CPU ops, NVTX/ProfilerStep ranges and the
//! [`TraceTruth`]. Drop counts are exact: `round(fraction × n)` per rank, chosen by a seeded
//! partial shuffle.

use super::logside::{op_rec, RankLog};
use super::names;
use super::timeline::{RankGpu, Src};
use super::{CpuOp, KernelTruth, LogOpRef, RankCapture, TraceConfig, TraceKernel, TraceTruth};
use crate::config::RunConfig;
use crate::layout::Layout;
use crate::rng::SplitMix64;
use crate::sim::SimOutput;
use crate::GeneratedFile;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// One op record removed from a log by [`drop_log_ops`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedLogOp {
    /// Index of the record among the file's op lines (0-based).
    pub ordinal: usize,
    /// 1-based line number of the op line in the input text.
    pub line: usize,
    /// The op line.
    pub text: String,
}

/// `<Op>: opCount <hex> ...` after `NCCL INFO `: the op name.
fn op_name(line: &str) -> Option<&str> {
    let msg = &line[line.find("NCCL INFO ")? + 10..];
    let (name, rest) = msg.split_once(": opCount ")?;
    (name.bytes().all(|b| b.is_ascii_alphabetic()) && rest.bytes().next().is_some_and(|b| b.is_ascii_hexdigit()))
        .then_some(name)
}

/// `<Op>: <n> Bytes -> Algo ...`: the op name of a tuning line.
fn tuning_name(line: &str) -> Option<&str> {
    let msg = &line[line.find("NCCL INFO ")? + 10..];
    let (name, rest) = msg.split_once(": ")?;
    rest.contains(" Bytes -> Algo ").then_some(name)
}

/// The `host:pid:tid` token of a line.
fn thread_of(line: &str) -> &str {
    line.split_whitespace().find(|w| w.matches(':').count() == 2).unwrap_or("")
}

/// `k` distinct indices below `n`, seeded.
fn choose(n: usize, k: usize, rng: &mut SplitMix64) -> HashSet<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    for i in 0..k.min(n) {
        let j = i + rng.below((n - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k.min(n));
    idx.into_iter().collect()
}

fn count_of(fraction: f64, n: usize) -> usize {
    ((fraction.clamp(0.0, 1.0) * n as f64).round() as usize).min(n)
}

/// Removes exactly `round(fraction × n)` of the `n` op records of one process's log text
/// (seeded choice). A record is its op line, the `NCCL CALL nccl<Op>(` line right after it
/// and the tuning line of the same thread that follows it (collectives only). Returns the new
/// text and the removed records in file order.
pub fn drop_log_ops(text: &str, fraction: f64, seed: u64) -> (String, Vec<DroppedLogOp>) {
    let lines: Vec<&str> = text.lines().collect();
    let ops: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| op_name(l).is_some()).map(|(i, _)| i).collect();
    let chosen = choose(ops.len(), count_of(fraction, ops.len()), &mut SplitMix64::new(seed));
    let mut remove = vec![false; lines.len()];
    let mut dropped = Vec::new();
    for (ordinal, &i) in ops.iter().enumerate() {
        if !chosen.contains(&ordinal) {
            continue;
        }
        remove[i] = true;
        dropped.push(DroppedLogOp { ordinal, line: i + 1, text: lines[i].to_string() });
        let (name, tid) = (op_name(lines[i]).unwrap_or(""), thread_of(lines[i]));
        let call = format!("NCCL CALL nccl{name}(");
        if lines.get(i + 1).is_some_and(|l| l.contains(&call) && thread_of(l) == tid) {
            remove[i + 1] = true;
        }
        for (j, l) in lines.iter().enumerate().skip(i + 1) {
            if thread_of(l) != tid {
                continue;
            }
            if op_name(l).is_some() {
                break;
            }
            if tuning_name(l) == Some(name) {
                remove[j] = true;
                break;
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    for (l, _) in lines.iter().zip(&remove).filter(|(_, &r)| !r) {
        out.push_str(l);
        out.push('\n');
    }
    (out, dropped)
}

pub(super) struct Assembled {
    pub logs: Vec<GeneratedFile>,
    pub truth: TraceTruth,
    pub ranks: Vec<RankCapture>,
}

/// Sorts by start and makes start times unique per rank (+1 ns on ties) so that every reader
/// orders kernels the same way.
fn unique_starts(ks: &mut [(i64, i64, usize)]) {
    ks.sort_by_key(|k| (k.0, k.2));
    for i in 1..ks.len() {
        if ks[i].0 <= ks[i - 1].0 {
            ks[i].0 = ks[i - 1].0 + 1;
            ks[i].1 = ks[i].1.max(ks[i].0 + 1);
        }
    }
}

/// Total time during which both sets of intervals (each sorted by start) are active.
fn overlap(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let merge = |v: &[(i64, i64)]| {
        let mut m: Vec<(i64, i64)> = Vec::new();
        let mut v = v.to_vec();
        v.sort();
        for (s, e) in v {
            match m.last_mut() {
                Some(l) if s <= l.1 => l.1 = l.1.max(e),
                _ => m.push((s, e)),
            }
        }
        m
    };
    let (a, b) = (merge(a), merge(b));
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        sum += (hi - lo).max(0);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
    cfg: &RunConfig,
    tcfg: &TraceConfig,
    layout: &Layout,
    out: &SimOutput,
    logs: &[RankLog],
    gpus: Vec<RankGpu>,
    files: Vec<GeneratedFile>,
    rng: &mut SplitMix64,
) -> Assembled {
    let base_ns = cfg.start_epoch_s as i64 * 1_000_000_000;
    let ns = |us: f64| base_ns + (us * 1000.0).round() as i64;
    let base_us = cfg.start_epoch_s as f64 * 1e6;
    let new_family = crate::config::parse_version(&cfg.nccl_version).map(|v| v.minor >= 19).unwrap_or(true);
    let mut truth = TraceTruth::default();
    let (mut out_logs, mut ranks) = (Vec::new(), Vec::new());
    for (r, (gpu, file)) in gpus.into_iter().zip(files).enumerate() {
        let events = &out.events[r];
        let log = &logs[r];
        // Log side.
        let (text, dropped) = drop_log_ops(&file.contents, tcfg.drop_log_ops, rng.next_u64());
        let gone: HashSet<usize> = dropped.iter().map(|d| d.ordinal).collect();
        let mut written = 0;
        let refs: Vec<LogOpRef> = log
            .recs
            .iter()
            .enumerate()
            .map(|(i, rec)| {
                let op = op_rec(events, rec.ev);
                let index = (!gone.contains(&i)).then(|| {
                    written += 1;
                    written - 1
                });
                LogOpRef {
                    rank: r,
                    comm: layout.comms[op.comm].name.clone(),
                    op_count: rec.op_count,
                    kind: op.name.to_string(),
                    seq: i,
                    index,
                    t_us: rec.t_us,
                }
            })
            .collect();
        out_logs.push(GeneratedFile { name: file.name, contents: text });

        // Kernels: unique starts, then drops among the NCCL ones.
        let mut order: Vec<(i64, i64, usize)> =
            gpu.kernels.iter().enumerate().map(|(i, k)| (ns(k.start), ns(k.end), i)).collect();
        unique_starts(&mut order);
        let nccl_pos: Vec<usize> =
            order.iter().enumerate().filter(|(_, k)| matches!(gpu.kernels[k.2].src, Src::Nccl(_))).map(|(p, _)| p).collect();
        let drop_set: HashSet<usize> = choose(nccl_pos.len(), count_of(tcfg.drop_kernels, nccl_pos.len()), rng)
            .into_iter()
            .map(|i| nccl_pos[i])
            .collect();
        // Correlation ids in launch order over the kept kernels (ids are per process).
        let mut launches: Vec<(i64, usize)> = order
            .iter()
            .enumerate()
            .filter(|(p, _)| !drop_set.contains(p))
            .map(|(p, k)| (ns(gpu.kernels[k.2].launch), p))
            .collect();
        launches.sort();
        let mut corr_of: HashMap<usize, (u64, i64)> = HashMap::new();
        let mut last_launch = i64::MIN;
        for (i, &(t, p)) in launches.iter().enumerate() {
            let t = t.max(last_launch + 1);
            last_launch = t;
            corr_of.insert(p, (1_000 + 4 * i as u64, t));
        }

        // CPU ops of the NCCL units (launch inside the last record's op).
        let mut cpu: Vec<(CpuOp, Option<usize>)> = Vec::new();
        let mut seq: HashMap<usize, u64> = HashMap::new();
        for (ui, u) in gpu.units.iter().enumerate() {
            let records: Vec<&usize> = if u.kind == "SendRecv" { u.recs.iter().collect() } else { vec![&u.recs[0]] };
            for (j, &&ri) in records.iter().enumerate() {
                let rec = &log.recs[ri];
                let op = op_rec(events, rec.ev);
                let last = j + 1 == records.len();
                let t = rec.t_us as f64 - base_us;
                let (coll, ann) = names::collective_words(op.name);
                let s = seq.entry(u.comm).or_insert(0);
                *s += 1;
                let nranks = layout.comms[u.comm].nranks() as u64;
                // PyTorch records whole buffers: an all-to-all's is one count per peer.
                let out_nelems = if matches!(op.name, "AllGather" | "AllToAll" | "AlltoAll") { op.count * nranks } else { op.count };
                let in_nelems = if matches!(op.name, "ReduceScatter" | "AllToAll" | "AlltoAll") { op.count * nranks } else { op.count };
                cpu.push((
                    CpuOp {
                        start_ns: ns(t - 1.5),
                        end_ns: if last { ns(u.t_e + 5.0) } else { ns(t + 0.5) },
                        name: "record_param_comms".to_string(),
                        collective: Some(coll),
                        annotation: Some(ann),
                        in_nelems,
                        out_nelems,
                        dtype: names::torch_dtype(op.dtype),
                        comm: u.comm,
                        seq: *s,
                        kernel: None,
                    },
                    last.then_some(ui),
                ));
            }
        }
        cpu.sort_by_key(|c| c.0.start_ns);
        for i in 1..cpu.len() {
            if cpu[i].0.start_ns <= cpu[i - 1].0.start_ns {
                cpu[i].0.start_ns = cpu[i - 1].0.start_ns + 1;
            }
        }
        let cpu_of_unit: HashMap<usize, usize> =
            cpu.iter().enumerate().filter_map(|(i, c)| c.1.map(|u| (u, i))).collect();

        // Kernels of the capture and their truth.
        let (mut kernels, mut nccl_truth) = (Vec::new(), Vec::new());
        for (p, &(start_ns, end_ns, ki)) in order.iter().enumerate() {
            let k = &gpu.kernels[ki];
            let (name, grid, block, ss, ds, regs, unit) = match &k.src {
                Src::Compute((name, grid, block, regs)) => (name.to_string(), *grid, *block, 0, 0, *regs, None),
                Src::Nccl(ui) => {
                    let u = &gpu.units[*ui];
                    let c = &layout.comms[u.comm];
                    let (proto, nc) = if u.kind == "SendRecv" {
                        ("SIMPLE", c.p2p_channels().1 as u32)
                    } else {
                        names::tuning(u.kind, u.bytes, c.nranks(), c.channels)
                    };
                    let name = names::nccl_kernel(new_family, u.kind, u.dtype, u.redop, proto);
                    let (g, b, ss, ds) = names::nccl_launch(new_family, u.kind, proto, nc);
                    (name, g, b, ss, ds, 96, Some(*ui))
                }
            };
            let ops = unit.map(|ui| gpu.units[ui].recs.iter().map(|&ri| refs[ri].clone()).collect::<Vec<_>>());
            let nccl = unit.map(|ui| KernelTruth {
                rank: r,
                name: name.clone(),
                start_ns,
                end_ns,
                stream: k.stream,
                correlation: corr_of.get(&p).map_or(0, |c| c.0),
                ops: ops.unwrap_or_default(),
                cpu_op: cpu_of_unit[&ui],
            });
            if drop_set.contains(&p) {
                truth.dropped_kernels.extend(nccl);
                continue;
            }
            let (correlation, launch_ns) = corr_of[&p];
            let idx = nccl.map(|t| {
                cpu[t.cpu_op].0.kernel = Some(kernels.len());
                nccl_truth.push(t);
                nccl_truth.len() - 1
            });
            kernels.push(TraceKernel {
                short_name: names::short_name(&name),
                name,
                start_ns,
                end_ns,
                stream: k.stream,
                correlation,
                launch_ns,
                launch_end_ns: launch_ns + 2_500,
                grid,
                block,
                static_smem: ss,
                dynamic_smem: ds,
                registers: regs,
                nccl: idx,
            });
        }

        let spans = |nccl: bool| -> Vec<(i64, i64)> {
            kernels.iter().filter(|k| k.nccl.is_some() == nccl).map(|k| (k.start_ns, k.end_ns)).collect()
        };
        truth.overlap_ns.push(overlap(&spans(true), &spans(false)));
        truth.compute_kernels.push(kernels.iter().filter(|k| k.nccl.is_none()).count());
        truth.cpu_ops.push(cpu.len());
        let iters: Vec<(i64, i64)> = gpu.iterations.iter().map(|&(s, e)| (ns(s), ns(e))).collect();
        let mut nvtx: Vec<(i64, i64, String, bool)> =
            iters.iter().enumerate().map(|(i, &(s, e))| (s, e, format!("iteration {i}"), false)).collect();
        for rec in log.recs.iter().filter(|r| !r.dup) {
            let t = rec.t_us as f64 - base_us;
            nvtx.push((ns(t - 1.0), ns(t + 3.0), format!("nccl{}", op_rec(events, rec.ev).name), true));
        }
        nvtx.sort_by_key(|n| n.0);
        truth.iterations.push(iters);
        truth.log_ops.push(refs);
        truth.kernels.push(nccl_truth);
        if log.batching {
            truth.batching_ranks.push(r);
        }
        let p = &layout.procs[r];
        ranks.push(RankCapture {
            pid: p.pid,
            host: p.host.clone(),
            node: p.node,
            dev: p.dev,
            bus_id: p.bus_id,
            kernels,
            cpu_ops: cpu.into_iter().map(|c| c.0).collect(),
            nvtx,
        });
    }
    Assembled { logs: out_logs, truth, ranks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_of_intervals() {
        assert_eq!(overlap(&[(0, 10), (5, 12)], &[(8, 20)]), 4);
        assert_eq!(overlap(&[(0, 10)], &[(10, 20)]), 0);
    }

    #[test]
    fn log_drop_removes_whole_records() {
        let text = "1.000001 h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 comm 0x2 stream 0x3\n\
                    1.000002 h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n\
                    1.000003 h:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
                    1.000004 h:1:1 [0] NCCL INFO Send: opCount 1 sendbuff (nil) recvbuff 0x1 count 1 datatype 7 op 0 root 1 comm 0x2 stream 0x3\n";
        let (out, d) = drop_log_ops(text, 0.5, 3);
        assert_eq!(d.len(), 1);
        assert_eq!(out.lines().count(), if d[0].ordinal == 0 { 2 } else { 3 });
        assert!(out.contains("Channel 00/0"));
        assert!(!out.contains(&d[0].text));
    }
}
