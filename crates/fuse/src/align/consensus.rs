//! Joint alignment of a run's ranks: [`align_run`]. Every member of a
//! communicator runs each of its collectives, and the collective's kernels end
//! together on all members (nobody finishes before the last one arrived), so a
//! kernel lost from one rank's trace is still seen on its peers'.
//!
//! Per logical communicator (a `commId` shared by its members' handles):
//!
//! 1. each member's kernel stream for it is the one [`super::streams::plan`]
//!    pairs with its records (only streams that carry this communicator's
//!    collectives alone are used; point-to-point kernels are never shared);
//! 2. the members' trace clocks are related to the member with most kernels
//!    by voting: every kernel proposes `end − end'` to the same-kind kernels
//!    of the other member near its proportional position, and the densest
//!    bin is the offset (the same voting as the launch clock, [`super::lag`]);
//!    a member whose kernels then mostly meet none of the reference's is left out;
//! 3. the members' kernels are merged into *instances* (ends within a tolerance
//!    of a few spreads, same kind or Generic, at most one kernel per member);
//! 4. every instance a member lacks becomes a *stand-in* kernel on that member
//!    (the peer's name features, its times moved to the member's clock, no
//!    launch time), appended to the member's kernels;
//! 5. *hints*: the members' records are numbered by call (`opCount` divided
//!    by the records a member logs per call: 2 on a 2:1 batching rank, found
//!    from how far its counts run against the other members'), the calls of
//!    all members merged into one list (one record per call), and that list
//!    aligned with the instances as one rank would be. Both sides are nearly
//!    complete (a call or an instance is missing only where every member lost
//!    it), so this alignment is far surer than any one rank's. Each record's
//!    hint is its member's kernel (or stand-in) of its call's instance.
//!
//! Communicators of more than `MAX_PANEL` members are split into panels that
//! are treated alone (work and memory per instance stay bounded).
//!
//! Each rank is then aligned once, as [`super::align_rank`] does, with its
//! stand-ins and with the hints as one more emission feature (`consensus`
//! in [`super::features`]); records matched to a stand-in ran as a kernel
//! the trace lost and are reported unmatched. Without this, a kernel lost from
//! a periodic run (`AllGather ReduceScatter AllGather …`) shifts the records
//! around it by a period whenever no launch time links the two sides.
//!
//! Assumes what NCCL does: a collective's `opCount` is the same on every
//! member, and its kernels end within a few µs of each other on all members.
//! Point-to-point operations take no part.

use super::features::NO_HINT;
use super::production::{align_rank, align_rank_hinted, AlignConfig};
use super::signature::runs_as_p2p;
use super::streams;
use super::MAX_GROUP;
use super::{Alignment, Match};
use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::OpKind;
use rayon::prelude::*;
use std::collections::HashMap;

/// One rank's inputs to [`align_run`].
#[derive(Debug, Clone, Copy)]
pub struct RankInput<'a> {
    pub logs: &'a [LogEntry],
    pub kernels: &'a [KernelEntry],
    /// `(LogEntry::comm, logical communicator)`: the logical id must be the same
    /// on every member rank. Records of communicators not listed take no part.
    pub comm_groups: &'a [(u64, u64)],
}

/// Index positions on each side of a kernel's proportional position that vote for a clock offset.
const VOTE_REACH: usize = 24;
/// Most reference kernels that vote (evenly spread).
const MAX_VOTERS: usize = 4096;
/// Fewest kernels a member's stream needs to take part.
const MIN_KERNELS: usize = 8;
/// Share of a member's kernels that must meet a reference kernel after the offset.
const MIN_MET: f64 = 0.3;
/// Most members compared together (a larger communicator is split into panels).
const MAX_PANEL: usize = 32;
/// Floor and cap of the end-time tolerance of one instance (ns).
const TOL_NS: (f64, f64) = (3_000.0, 50_000.0);

/// Aligns every rank with its stand-ins and hints (module doc); results in
/// input order. Ranks without peers are aligned as [`align_rank`] would.
pub fn align_run(ranks: &[RankInput], cfg: &AlignConfig) -> Vec<Alignment> {
    let joint = joint_evidence(ranks, cfg);
    let run = |(r, (extra, hints)): (&RankInput, &(Vec<KernelEntry>, Vec<u32>))| {
        if extra.is_empty() && hints.is_empty() {
            return align_rank(r.logs, r.kernels, cfg);
        }
        let mut all = Vec::with_capacity(r.kernels.len() + extra.len());
        all.extend_from_slice(r.kernels);
        all.extend_from_slice(extra);
        let a = align_rank_hinted(r.logs, &all, hints, cfg);
        without_stand_ins(a, r.logs.len(), r.kernels.len())
    };
    if cfg.parallel {
        ranks.par_iter().zip(&joint).map(run).collect()
    } else {
        ranks.iter().zip(&joint).map(run).collect()
    }
}

/// Drops the matches of kernels `n_kernels..` (stand-ins): their records are unmatched.
fn without_stand_ins(a: Alignment, n_logs: usize, n_kernels: usize) -> Alignment {
    let kept: Vec<Match> = a
        .matches
        .into_iter()
        .filter(|m| (m.kernel as usize) < n_kernels)
        .collect();
    let mut out = Alignment::from_matches(kept, n_logs, n_kernels);
    out.streams = a.streams;
    out
}

/// One member's kernels of one communicator: (rank, kernel indices by start).
struct Member {
    rank: usize,
    stream: u64,
    kernels: Vec<u32>,
}

/// Stand-in kernels and hints per rank.
fn joint_evidence(ranks: &[RankInput], cfg: &AlignConfig) -> Vec<(Vec<KernelEntry>, Vec<u32>)> {
    let mut out: Vec<(Vec<KernelEntry>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); ranks.len()];
    // Logical communicator → members.
    let mut groups: HashMap<u64, Vec<Member>> = HashMap::new();
    let found: Vec<Vec<(u64, Member)>> = ranks
        .par_iter()
        .enumerate()
        .map(|(r, inp)| members_of(r, inp, cfg))
        .collect();
    for (g, m) in found.into_iter().flatten() {
        groups.entry(g).or_default().push(m);
    }
    let mut keys: Vec<u64> = groups.keys().copied().collect();
    keys.sort_unstable();
    for g in keys {
        let members = &groups[&g];
        if members.len() < 2 {
            continue;
        }
        // Panels of at most MAX_PANEL members keep the work per instance bounded.
        let panels = members.len().div_ceil(MAX_PANEL);
        for panel in members.chunks(members.len().div_ceil(panels)) {
            group_evidence(ranks, g, panel, cfg, &mut out);
        }
    }
    out
}

/// The communicators of one rank whose collectives have a kernel stream of their own.
fn members_of(r: usize, inp: &RankInput, cfg: &AlignConfig) -> Vec<(u64, Member)> {
    if inp.comm_groups.is_empty() {
        return Vec::new();
    }
    let group: HashMap<u64, u64> = inp.comm_groups.iter().copied().collect();
    let tasks = streams::plan(
        inp.logs,
        inp.kernels,
        cfg.per_stream,
        cfg.min_stream_similarity,
    );
    let mut out = Vec::new();
    for t in tasks {
        let Some(stream) = t.kernel_stream else {
            continue;
        };
        // The one logical communicator whose collectives this stream carries.
        let mut g = None;
        let mut single = true;
        for &i in &t.log_idx {
            let l = &inp.logs[i as usize];
            if runs_as_p2p(l.kind) {
                continue;
            }
            match (g, group.get(&l.comm)) {
                (_, None) => single = false,
                (None, Some(&x)) => g = Some(x),
                (Some(a), Some(&b)) if a != b => single = false,
                _ => {}
            }
        }
        let kernels: Vec<u32> = t
            .kern_idx
            .iter()
            .copied()
            .filter(|&j| inp.kernels[j as usize].kind != KernelKind::Op(OpKind::SendRecv))
            .collect();
        if let (Some(g), true) = (g, single) {
            if kernels.len() >= MIN_KERNELS {
                out.push((
                    g,
                    Member {
                        rank: r,
                        stream,
                        kernels,
                    },
                ));
            }
        }
    }
    out
}

fn same_kind(a: KernelKind, b: KernelKind) -> bool {
    a == b || a == KernelKind::Generic || b == KernelKind::Generic
}

/// One collective instance: common-clock end, a kernel that represents it,
/// and each member's kernel of it (member position, position in its list).
struct Instance {
    t: f64,
    rep: (usize, u32),
    at: Vec<(usize, u32)>,
}

/// Stand-ins and hints of one communicator, added to `out`.
fn group_evidence(
    ranks: &[RankInput],
    g: u64,
    members: &[Member],
    cfg: &AlignConfig,
    out: &mut [(Vec<KernelEntry>, Vec<u32>)],
) {
    let kern = |m: &Member, x: usize| &ranks[m.rank].kernels[m.kernels[x] as usize];
    let reference = (0..members.len())
        .max_by_key(|&x| (members[x].kernels.len(), std::cmp::Reverse(x)))
        .expect("two members");
    let rm = &members[reference];
    // Offsets (common clock = member clock + offset) and spreads.
    let mut offsets: Vec<Option<(f64, f64)>> = vec![None; members.len()];
    offsets[reference] = Some((0.0, 0.0));
    for (x, m) in members.iter().enumerate() {
        if x == reference {
            continue;
        }
        let (na, nb) = (rm.kernels.len(), m.kernels.len());
        let stride = (na / MAX_VOTERS).max(1);
        let mut votes = Vec::new();
        for a in (0..na).step_by(stride) {
            let ka = kern(rm, a);
            let b0 = a * nb / na;
            for b in b0.saturating_sub(VOTE_REACH)..(b0 + VOTE_REACH + 1).min(nb) {
                let kb = kern(m, b);
                if ka.kind == kb.kind && ka.kind != KernelKind::Generic {
                    votes.push((ka.end_ns - kb.end_ns) as f64);
                }
            }
        }
        offsets[x] = super::lag::launch_offset(&votes, 500.0);
    }
    let spread = offsets.iter().flatten().map(|o| o.1).fold(0.0f64, f64::max);
    let tol = (5.0 * spread).clamp(TOL_NS.0, TOL_NS.1);
    // Instances: the reference's kernels, then each member merged in.
    let mut inst: Vec<Instance> = (0..rm.kernels.len())
        .map(|a| Instance {
            t: kern(rm, a).end_ns as f64,
            rep: (reference, a as u32),
            at: vec![(reference, a as u32)],
        })
        .collect();
    let mut used = vec![false; members.len()];
    used[reference] = true;
    for (x, m) in members.iter().enumerate() {
        let Some((off, _)) = offsets[x].filter(|_| x != reference) else {
            continue;
        };
        let times: Vec<f64> = (0..m.kernels.len())
            .map(|b| kern(m, b).end_ns as f64 + off)
            .collect();
        let near = |i: &Instance, b: usize| {
            let ki = kern(&members[i.rep.0], i.rep.1 as usize);
            (i.t - times[b]).abs() <= tol && same_kind(ki.kind, kern(m, b).kind)
        };
        let (mut i, mut b) = (0usize, 0usize);
        let mut pairs = Vec::new();
        while i < inst.len() && b < times.len() {
            if near(&inst[i], b) {
                // Prefer the closer of two neighbours on either side.
                let d = (inst[i].t - times[b]).abs();
                if i + 1 < inst.len()
                    && near(&inst[i + 1], b)
                    && (inst[i + 1].t - times[b]).abs() < d
                {
                    i += 1;
                    continue;
                }
                if b + 1 < times.len()
                    && near(&inst[i], b + 1)
                    && (inst[i].t - times[b + 1]).abs() < d
                {
                    b += 1;
                    continue;
                }
                pairs.push((i, b));
                i += 1;
                b += 1;
            } else if inst[i].t < times[b] {
                i += 1;
            } else {
                b += 1;
            }
        }
        if (pairs.len() as f64) < MIN_MET * m.kernels.len().min(rm.kernels.len()) as f64 {
            continue;
        }
        used[x] = true;
        let mut met = vec![false; times.len()];
        for &(i, b) in &pairs {
            met[b] = true;
            inst[i].at.push((x, b as u32));
            let rep = kern(&members[inst[i].rep.0], inst[i].rep.1 as usize);
            if rep.kind == KernelKind::Generic {
                inst[i].rep = (x, b as u32);
            }
        }
        inst.extend((0..times.len()).filter(|&b| !met[b]).map(|b| Instance {
            t: times[b],
            rep: (x, b as u32),
            at: vec![(x, b as u32)],
        }));
        inst.sort_by(|p, q| p.t.total_cmp(&q.t));
    }
    // Each instance's kernel on every member taking part: its own, or a stand-in.
    let mut slot = vec![NO_HINT; inst.len() * members.len()];
    for (n, i) in inst.iter().enumerate() {
        let (rx, rb) = i.rep;
        let rep = kern(&members[rx], rb as usize);
        let rep_off = offsets[rx].map_or(0.0, |o| o.0);
        for &(x, b) in &i.at {
            slot[n * members.len() + x] = members[x].kernels[b as usize];
        }
        for (x, m) in members.iter().enumerate() {
            if !used[x] || i.at.iter().any(|a| a.0 == x) {
                continue;
            }
            let shift = (rep_off - offsets[x].map_or(0.0, |o| o.0)).round() as i64;
            let extra = &mut out[m.rank].0;
            slot[n * members.len() + x] = (ranks[m.rank].kernels.len() + extra.len()) as u32;
            extra.push(KernelEntry {
                stream: m.stream,
                start_ns: rep.start_ns + shift,
                end_ns: rep.end_ns + shift,
                launch_ns: None,
                ..*rep
            });
        }
    }
    let common: Vec<i64> = inst
        .iter()
        .map(|i| offsets[i.rep.0].map_or(0.0, |o| o.0).round() as i64)
        .collect();
    hints(ranks, g, members, &used, (&inst, &common), &slot, cfg, out);
}

/// Places the members' records on instances: every member's records of the
/// communicator are numbered by call (`opCount ÷ records per call`, a member
/// whose counts run `k` times as far as the slowest member's logs `k` records
/// per call), the calls of all members are merged (one record per call), and
/// that list is aligned with the instances as one rank would be. A record's
/// hint is its member's kernel (or stand-in) of its call's instance.
#[allow(clippy::too_many_arguments)]
fn hints(
    ranks: &[RankInput],
    g: u64,
    members: &[Member],
    used: &[bool],
    (inst, common): (&[Instance], &[i64]),
    slot: &[u32],
    cfg: &AlignConfig,
    out: &mut [(Vec<KernelEntry>, Vec<u32>)],
) {
    // Per member: its records of the communicator, with opCounts.
    let recs: Vec<Vec<(u32, u64)>> = members
        .iter()
        .map(|m| {
            let inp = &ranks[m.rank];
            let comms: Vec<u64> = inp
                .comm_groups
                .iter()
                .filter(|c| c.1 == g)
                .map(|c| c.0)
                .collect();
            inp.logs
                .iter()
                .enumerate()
                .filter(|(_, l)| !runs_as_p2p(l.kind) && comms.contains(&l.comm))
                .filter_map(|(i, l)| Some((i as u32, l.op_count?)))
                .collect()
        })
        .collect();
    let span = |v: &[(u32, u64)]| {
        let lo = v.iter().map(|r| r.1).min().unwrap_or(0);
        let hi = v.iter().map(|r| r.1).max().unwrap_or(0);
        (hi - lo + 1) as f64
    };
    let min_span = (0..members.len())
        .filter(|&x| used[x] && recs[x].len() >= MIN_KERNELS)
        .map(|x| span(&recs[x]))
        .fold(f64::INFINITY, f64::min);
    if !min_span.is_finite() {
        return;
    }
    let per_call: Vec<u64> = recs
        .iter()
        .map(|v| (span(v) / min_span).round().clamp(1.0, MAX_GROUP as f64) as u64)
        .collect();
    // One record per call, from the members logging one per call first.
    let mut calls: Vec<(u64, usize, u32)> = Vec::new();
    for (x, v) in recs.iter().enumerate() {
        if used[x] && recs[x].len() >= MIN_KERNELS {
            calls.extend(v.iter().map(|&(i, oc)| (oc / per_call[x], x, i)));
        }
    }
    calls.sort_by_key(|&(c, x, i)| (c, per_call[x], x, i));
    calls.dedup_by_key(|c| c.0);
    let logs: Vec<LogEntry> = calls
        .iter()
        .map(|&(c, x, i)| LogEntry {
            comm: 0,
            stream: None,
            op_count: Some(c),
            cpu_ts_ns: None,
            ..ranks[members[x].rank].logs[i as usize]
        })
        .collect();
    // On the common clock, so that they keep the instances' order.
    let kernels: Vec<KernelEntry> = inst
        .iter()
        .zip(common)
        .map(|(i, &off)| {
            let m = &members[i.rep.0];
            let k = &ranks[m.rank].kernels[m.kernels[i.rep.1 as usize] as usize];
            KernelEntry {
                stream: 0,
                start_ns: k.start_ns + off,
                end_ns: k.end_ns + off,
                launch_ns: None,
                ..*k
            }
        })
        .collect();
    let flat = AlignConfig {
        parallel: false,
        allow_batching: false,
        ..cfg.clone()
    };
    let a = align_rank(&logs, &kernels, &flat);
    let mut call_inst: HashMap<u64, usize> = HashMap::with_capacity(a.matches.len());
    for m in &a.matches {
        for &u in m.logs() {
            call_inst.insert(calls[u as usize].0, m.kernel as usize);
        }
    }
    for (x, v) in recs.iter().enumerate() {
        if !used[x] {
            continue;
        }
        let rank = members[x].rank;
        let h = &mut out[rank].1;
        if h.is_empty() {
            h.resize(ranks[rank].logs.len(), NO_HINT);
        }
        for &(i, oc) in v {
            if let Some(&n) = call_inst.get(&(oc / per_call[x])) {
                h[i as usize] = slot[n * members.len() + x];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks of one communicator, 60 alternating AllGather/ReduceScatter
    /// calls, GPU start times only and no record timestamps; rank 1's trace
    /// lost the kernels of calls `lost` and the records of calls `gone`. Kernel
    /// ends agree across ranks up to 1 µs, on clocks 1 ms apart.
    fn run(
        lost: &[usize],
        gone: &[usize],
    ) -> Vec<(Vec<LogEntry>, Vec<KernelEntry>, Vec<Option<u32>>)> {
        (0..2)
            .map(|r| {
                let (mut logs, mut kernels, mut truth) = (Vec::new(), Vec::new(), Vec::new());
                let mut t = 1_000_000 * r as i64;
                for c in 0..60usize {
                    let kind = if c % 2 == 0 {
                        OpKind::AllGather
                    } else {
                        OpKind::ReduceScatter
                    };
                    // Irregular compute between calls: no rhythm to lean on.
                    t += 20_000 + (c as i64 * 7_919) % 50_000;
                    let keep = r == 0 || !lost.contains(&c);
                    if r == 0 || !gone.contains(&c) {
                        truth.push(keep.then_some(kernels.len() as u32));
                        logs.push(LogEntry {
                            comm: 0xc0 + r as u64,
                            op_count: Some(c as u64),
                            ..LogEntry::of_kind(kind)
                        });
                    }
                    if keep {
                        kernels.push(KernelEntry {
                            start_ns: t,
                            end_ns: t + 15_000 + r as i64 * 1_000,
                            ..KernelEntry::of_kind(KernelKind::Op(kind))
                        });
                    }
                }
                (logs, kernels, truth)
            })
            .collect()
    }

    fn align(
        ranks: &[(Vec<LogEntry>, Vec<KernelEntry>, Vec<Option<u32>>)],
        groups: &[[(u64, u64); 1]],
    ) -> Vec<Alignment> {
        let inputs: Vec<RankInput> = ranks
            .iter()
            .zip(groups)
            .map(|(r, g)| RankInput {
                logs: &r.0,
                kernels: &r.1,
                comm_groups: g,
            })
            .collect();
        align_run(&inputs, &AlignConfig::default())
    }

    const LOST: [usize; 4] = [11, 12, 30, 41];
    const GONE: [usize; 4] = [5, 6, 33, 34];

    #[test]
    fn peers_place_the_records_of_lost_kernels() {
        let (lost, gone) = (LOST, GONE);
        let ranks = run(&lost, &gone);
        let cfg = AlignConfig::default();
        let alone = align_rank(&ranks[1].0, &ranks[1].1, &cfg);
        let joint = align(&ranks, &[[(0xc0, 7)], [(0xc1, 7)]]);
        let wrong = |a: &Alignment, r: usize| {
            a.log_to_kernel(ranks[r].0.len())
                .iter()
                .zip(&ranks[r].2)
                .filter(|(a, b)| a != b)
                .count()
        };
        assert!(wrong(&alone, 1) > 0, "the lone rank is ambiguous here");
        assert_eq!(wrong(&joint[1], 1), 0, "{:?}", joint[1].unmatched_logs);
        // Stand-ins never leak out: every real kernel is matched or listed once.
        assert_eq!(
            joint[1].matches.len() + joint[1].unmatched_kernels.len(),
            ranks[1].1.len()
        );
        assert_eq!(wrong(&joint[0], 0), 0);
    }

    #[test]
    fn ranks_without_a_shared_communicator_align_alone() {
        let ranks = run(&[11, 30], &[20]);
        let cfg = AlignConfig::default();
        let joint = align(&ranks, &[[(0xc0, 7)], [(0xc1, 8)]]);
        for (r, a) in ranks.iter().zip(&joint) {
            assert_eq!(*a, align_rank(&r.0, &r.1, &cfg));
        }
    }
}
