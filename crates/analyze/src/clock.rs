//! Clock synchronization across ranks from collective instances (thesis
//! §4.2.4, eqs. 4.7–4.8): every rank's GPU clock is assumed to differ from
//! the reference rank's by a constant offset, and the kernels of one
//! collective instance are assumed to be aligned in time on a common clock.
//!
//! **Matching instances.** Inside one logical communicator, the operations of
//! the member handles are matched by `CollOp::comm_seq`, the per-handle
//! ordinal: every member issues the same sequence of collectives, so the k-th
//! operation of each handle is the same instance, as long as no source lost
//! operations (a source that drops an operation must keep the gap in
//! `comm_seq`; a shifted sequence pairs neighbours). Point-to-point operations
//! are never sync points (members run different Send/Recv sequences); on a
//! communicator that has any, collectives are matched by their ordinal among
//! the handle's collectives instead. Within an instance the members must agree
//! on kind and bytes: entries that disagree with the majority are dropped and
//! counted ([`CommSync::mismatched`]). Operations without a GPU span do not
//! take part.
//!
//! **Offsets within a communicator** (thesis steps 1–5). For each instance,
//! `t_ref = median(t_r)` over its members and `δ_r = t_ref − t_r`; a member's
//! offset is the median of its `δ_r` over instances. `t_r` is the kernel
//! midpoint by default ([`SyncPoint`]; start as the thesis writes, or end).
//! The thesis's single pass is biased when members miss instances (the
//! median then moves); further passes recompute `t_ref` on corrected times
//! until the correction is below 0.5 ns.
//!
//! **Across communicators.** Each communicator fixes its members' offsets up
//! to a constant. Starting from global rank 0 (eq. 4.7's reference), the
//! communicator with the most instances among those sharing a rank with the
//! ranks already placed is added, its constant being the median over the
//! shared ranks (chaining; a world communicator connects everyone at once).
//! A weighted least-squares refinement (weights = instance counts) then
//! reconciles all communicators. Ranks not connected to rank 0 form further
//! components, each relative to its lowest rank.
//!
//! **Clock domains.** Ranks that read one clock (the GPUs of one host: nsys
//! and Kineto put every GPU timestamp on the host's clock) differ only by
//! arrival skew, which per-rank offsets would wrongly absorb.
//! [`ClockSync::per_domain`] gives every rank of a domain the median offset
//! of its members, so only the offsets between hosts are corrected.
//!
//! **Applying** (eq. 4.8): `t_sync = t_original + δ_r`. [`ClockSync::apply`]
//! returns synchronized spans beside the table; [`ClockSync::apply_in_place`]
//! shifts the table's spans and returns the originals.
//!
//! Limits (as the thesis says): arrival skew that is systematic per rank is
//! indistinguishable from clock offset; drift is not modelled.

use commlens_core::model::{CommIdx, DevIdx, GpuSpan, LogicalCommIdx};
use commlens_core::{OpKind, OpTable};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// Which instant of a kernel is aligned across ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum SyncPoint {
    /// `(start + end) / 2`: the choice; arrival skew enters halved.
    #[default]
    Midpoint,
    /// Kernel start, as the thesis writes: arrival skew enters whole.
    Start,
    /// Kernel end: a collective completes nearly together on all members.
    End,
}

#[derive(Debug, Clone, Copy)]
pub struct ClockOptions {
    pub point: SyncPoint,
    /// Communicators with fewer matched instances are ignored (the thesis
    /// advises more than ten).
    pub min_instances: usize,
    /// Passes of the per-communicator estimate (1 = the thesis's single pass).
    pub max_passes: u32,
}

impl Default for ClockOptions {
    fn default() -> Self {
        ClockOptions { point: SyncPoint::Midpoint, min_instances: 1, max_passes: 8 }
    }
}

/// How a communicator's instances were matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MatchKey {
    CommSeq,
    /// Ordinal among the handle's collectives (the communicator has Send/Recv).
    CollectiveOrdinal,
}

/// What one logical communicator contributed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommSync {
    pub comm: LogicalCommIdx,
    pub name: String,
    pub key: MatchKey,
    /// Members with at least one matched instance.
    pub members: usize,
    /// Instances with at least two agreeing members.
    pub instances: usize,
    /// Member entries dropped because kind or bytes disagreed with the majority.
    pub mismatched: usize,
    /// Took part in the solution (enough instances, two members).
    pub used: bool,
}

/// The offset of one rank: add `offset_ns` to its timestamps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankOffset {
    pub dev: DevIdx,
    pub global_rank: Option<u32>,
    /// `δ_r^final` (eq. 4.7), nanoseconds.
    pub offset_ns: f64,
    /// Instances that constrained it, over all communicators.
    pub instances: usize,
    /// Median |t_sync − t_ref| over those instances after synchronization.
    pub residual_ns: f64,
    /// 0 for ranks connected to the reference rank.
    pub component: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockSync {
    pub point: SyncPoint,
    /// Reference device of each component (offset 0).
    pub reference: Vec<DevIdx>,
    /// Devices with an offset, by device index.
    pub ranks: Vec<RankOffset>,
    pub comms: Vec<CommSync>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn instant(s: GpuSpan, p: SyncPoint) -> i64 {
    match p {
        SyncPoint::Start => s.start_ns,
        SyncPoint::End => s.end_ns,
        SyncPoint::Midpoint => s.start_ns.saturating_add(s.end_ns.saturating_sub(s.start_ns) / 2),
    }
}

/// One communicator's matched instances: (member position, time) lists.
struct Matched {
    devs: Vec<DevIdx>,
    instances: Vec<Vec<(usize, i64)>>,
    sync: CommSync,
}

fn match_instances(t: &OpTable, l: LogicalCommIdx, by_handle: &[Vec<u32>], point: SyncPoint) -> Matched {
    let lc = &t.logical[l.ix()];
    let members: Vec<(CommIdx, DevIdx)> =
        lc.members.iter().filter_map(|&m| t.comms[m.ix()].device.map(|d| (m, d))).collect();
    let ops_of = |c: CommIdx, d: DevIdx| by_handle[c.ix()].iter().map(move |&i| t.per_rank[d.ix()].op(i as usize));
    let has_p2p = members.iter().any(|&(c, d)| ops_of(c, d).any(|o| o.kind.is_p2p()));
    let key = if has_p2p { MatchKey::CollectiveOrdinal } else { MatchKey::CommSeq };
    // Per key: (member position, kind, bytes, instant).
    type Entry = (usize, OpKind, u64, i64);
    let mut by_key: HashMap<u64, Vec<Entry>> = HashMap::default();
    for (pos, &(c, d)) in members.iter().enumerate() {
        let mut ops: Vec<_> = ops_of(c, d).filter(|o| !o.kind.is_p2p()).collect();
        ops.sort_by_key(|o| o.comm_seq);
        for (ordinal, op) in ops.into_iter().enumerate() {
            let Some(span) = op.gpu else { continue };
            let k = if has_p2p { ordinal as u64 } else { op.comm_seq };
            by_key.entry(k).or_default().push((pos, op.kind, op.bytes, instant(span, point)));
        }
    }
    let mut keyed: Vec<(u64, Vec<Entry>)> = by_key.into_iter().collect();
    keyed.sort_unstable_by_key(|e| e.0);
    let mut instances = Vec::new();
    let mut mismatched = 0;
    let mut seen_member = vec![false; members.len()];
    for (_, entries) in keyed {
        if entries.len() < 2 {
            continue;
        }
        let mut votes: Vec<((OpKind, u64), usize)> = Vec::new();
        for e in &entries {
            match votes.iter_mut().find(|v| v.0 == (e.1, e.2)) {
                Some(v) => v.1 += 1,
                None => votes.push(((e.1, e.2), 1)),
            }
        }
        let majority = votes.iter().max_by_key(|v| v.1).map(|v| v.0).expect("two entries");
        let mut inst: Vec<(usize, i64)> = Vec::with_capacity(entries.len());
        for e in entries {
            if (e.1, e.2) != majority || inst.iter().any(|x| x.0 == e.0) {
                mismatched += 1;
            } else {
                inst.push((e.0, e.3));
            }
        }
        if inst.len() >= 2 {
            for x in &inst {
                seen_member[x.0] = true;
            }
            instances.push(inst);
        }
    }
    let sync = CommSync {
        comm: l,
        name: lc.name.clone(),
        key,
        members: seen_member.iter().filter(|&&s| s).count(),
        instances: instances.len(),
        mismatched,
        used: false,
    };
    Matched { devs: members.iter().map(|m| m.1).collect(), instances, sync }
}

/// Residuals `t_ref − (t_r + o_r)` of every member over every instance.
fn residuals(instances: &[Vec<(usize, i64)>], o: &[f64]) -> Vec<Vec<f64>> {
    let mut d = vec![Vec::new(); o.len()];
    let mut vals = Vec::new();
    for inst in instances {
        let base = inst[0].1;
        vals.clear();
        vals.extend(inst.iter().map(|&(p, t)| t.saturating_sub(base) as f64 + o[p]));
        let corrected = vals.clone();
        let t_ref = median(&mut vals);
        for (&(p, _), v) in inst.iter().zip(corrected) {
            d[p].push(t_ref - v);
        }
    }
    d
}

/// Relative offsets of one communicator's members (thesis steps 1–5,
/// repeated on corrected times), with instance counts and |residuals|.
fn solve_comm(m: &Matched, max_passes: u32) -> (Vec<f64>, Vec<usize>, Vec<Vec<f64>>) {
    let mut o = vec![0.0; m.devs.len()];
    for _ in 0..max_passes.max(1) {
        let mut step_max: f64 = 0.0;
        for (p, mut d) in residuals(&m.instances, &o).into_iter().enumerate() {
            if !d.is_empty() {
                let step = median(&mut d);
                o[p] += step;
                step_max = step_max.max(step.abs());
            }
        }
        if step_max < 0.5 {
            break;
        }
    }
    let res: Vec<Vec<f64>> =
        residuals(&m.instances, &o).into_iter().map(|v| v.into_iter().map(f64::abs).collect()).collect();
    let counts = res.iter().map(Vec::len).collect();
    (o, counts, res)
}

/// One communicator's relative offsets, ready to be combined.
struct Fit {
    devs: Vec<DevIdx>,
    rel: Vec<f64>,
    weight: Vec<usize>,
    instances: usize,
}

/// Estimates every rank's clock offset from the table's collectives.
pub fn synchronize(t: &OpTable, opts: &ClockOptions) -> ClockSync {
    let mut by_handle: Vec<Vec<u32>> = vec![Vec::new(); t.comms.len()];
    for rank_ops in &t.per_rank {
        for (i, op) in rank_ops.iter().enumerate() {
            if let Some(v) = by_handle.get_mut(op.comm.ix()) {
                v.push(i as u32);
            }
        }
    }
    let n_dev = t.devices.len();
    let mut comms = Vec::new();
    let mut fits: Vec<Fit> = Vec::new();
    let mut abs_res: Vec<Vec<f64>> = vec![Vec::new(); n_dev];
    for l in 0..t.logical.len() {
        let mut m = match_instances(t, LogicalCommIdx(l as u32), &by_handle, opts.point);
        if m.sync.members >= 2 && m.sync.instances >= opts.min_instances.max(1) {
            let (rel, weight, res) = solve_comm(&m, opts.max_passes);
            for (p, r) in res.into_iter().enumerate() {
                abs_res[m.devs[p].ix()].extend(r);
            }
            m.sync.used = true;
            fits.push(Fit { devs: m.devs, rel, weight, instances: m.sync.instances });
        }
        comms.push(m.sync);
    }
    let (offset, component, reference) = combine(t, &fits);
    let mut instances = vec![0usize; n_dev];
    for f in &fits {
        for (p, d) in f.devs.iter().enumerate() {
            instances[d.ix()] += f.weight[p];
        }
    }
    let ranks = (0..n_dev)
        .filter_map(|d| {
            let o = offset[d]?;
            Some(RankOffset {
                dev: DevIdx(d as u32),
                global_rank: t.devices[d].global_rank,
                offset_ns: o,
                instances: instances[d],
                residual_ns: median(&mut abs_res[d]),
                component: component[d]?,
            })
        })
        .collect();
    ClockSync { point: opts.point, reference, ranks, comms }
}

type Combined = (Vec<Option<f64>>, Vec<Option<u32>>, Vec<DevIdx>);

/// Chains the communicators' relative offsets into one offset per device,
/// then refines them by weighted least squares.
fn combine(t: &OpTable, fits: &[Fit]) -> Combined {
    let n_dev = t.devices.len();
    let mut o: Vec<Option<f64>> = vec![None; n_dev];
    let mut comp: Vec<Option<u32>> = vec![None; n_dev];
    let mut reference = Vec::new();
    let mut used = vec![false; fits.len()];
    let mut constrained = vec![false; n_dev];
    for f in fits {
        for (p, d) in f.devs.iter().enumerate() {
            constrained[d.ix()] |= f.weight[p] > 0;
        }
    }
    loop {
        let start = (0..n_dev)
            .filter(|&d| constrained[d] && comp[d].is_none())
            .min_by_key(|&d| (t.devices[d].global_rank.unwrap_or(u32::MAX), d));
        let Some(start) = start else { break };
        let c = reference.len() as u32;
        reference.push(DevIdx(start as u32));
        o[start] = Some(0.0);
        comp[start] = Some(c);
        loop {
            let next = (0..fits.len())
                .filter(|&i| !used[i])
                .filter(|&i| {
                    fits[i].devs.iter().enumerate().any(|(p, d)| fits[i].weight[p] > 0 && comp[d.ix()] == Some(c))
                })
                .max_by_key(|&i| (fits[i].instances, std::cmp::Reverse(i)));
            let Some(i) = next else { break };
            used[i] = true;
            let f = &fits[i];
            let mut shifts: Vec<f64> = (0..f.devs.len())
                .filter(|&p| f.weight[p] > 0 && comp[f.devs[p].ix()] == Some(c))
                .map(|p| o[f.devs[p].ix()].expect("placed") - f.rel[p])
                .collect();
            let shift = median(&mut shifts);
            for (p, d) in f.devs.iter().enumerate() {
                if f.weight[p] > 0 && comp[d.ix()].is_none() {
                    o[d.ix()] = Some(f.rel[p] + shift);
                    comp[d.ix()] = Some(c);
                }
            }
        }
    }
    refine(fits, &mut o, &comp, &reference);
    (o, comp, reference)
}

/// Block coordinate descent on Σ_L Σ_r w (o_r − rel_r − c_L)², reference
/// ranks held at 0.
fn refine(fits: &[Fit], o: &mut [Option<f64>], comp: &[Option<u32>], reference: &[DevIdx]) {
    for _ in 0..500 {
        let consts: Vec<f64> = fits
            .iter()
            .map(|f| {
                let (mut num, mut den) = (0.0, 0.0);
                for (p, d) in f.devs.iter().enumerate() {
                    if let (Some(x), w) = (o[d.ix()], f.weight[p] as f64) {
                        num += w * (x - f.rel[p]);
                        den += w;
                    }
                }
                if den > 0.0 {
                    num / den
                } else {
                    0.0
                }
            })
            .collect();
        let mut num = vec![0.0; o.len()];
        let mut den = vec![0.0; o.len()];
        for (f, c) in fits.iter().zip(&consts) {
            for (p, d) in f.devs.iter().enumerate() {
                let w = f.weight[p] as f64;
                num[d.ix()] += w * (f.rel[p] + c);
                den[d.ix()] += w;
            }
        }
        let mut change: f64 = 0.0;
        for d in 0..o.len() {
            if let (Some(old), true) = (o[d], den[d] > 0.0) {
                let ref_dev = reference[comp[d].expect("placed") as usize].ix();
                let new = num[d] / den[d] - num[ref_dev] / den[ref_dev].max(f64::MIN_POSITIVE);
                change = change.max((new - old).abs());
                o[d] = Some(new);
            }
        }
        for r in reference {
            o[r.ix()] = Some(0.0);
        }
        if change < 0.01 {
            break;
        }
    }
}

/// GPU spans after synchronization, parallel to `OpTable::per_rank`; `None`
/// for operations without a span and for ranks without an offset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncedSpans {
    pub per_rank: Vec<Vec<Option<GpuSpan>>>,
}

impl ClockSync {
    /// The offset to add to a device's timestamps, rounded to nanoseconds.
    pub fn offset_ns(&self, d: DevIdx) -> Option<i64> {
        let i = self.ranks.binary_search_by_key(&d, |r| r.dev).ok()?;
        Some(self.ranks[i].offset_ns.round() as i64)
    }

    /// One offset per clock domain: every rank with an offset and a domain
    /// (`domain_of`, e.g. its host) gets the median offset of the ranks of
    /// its domain and component, and each component's reference domain is
    /// moved to 0. Ranks without a domain keep their own offset; residuals
    /// stay those of the per-rank fit.
    pub fn per_domain<K: Ord + Clone>(&self, domain_of: impl Fn(DevIdx) -> Option<K>) -> ClockSync {
        let mut groups: std::collections::BTreeMap<(u32, K), Vec<f64>> = Default::default();
        for r in &self.ranks {
            if let Some(k) = domain_of(r.dev) {
                groups.entry((r.component, k)).or_default().push(r.offset_ns);
            }
        }
        let medians: std::collections::BTreeMap<(u32, K), f64> =
            groups.into_iter().map(|(k, mut v)| (k, median(&mut v))).collect();
        let collapsed = |r: &RankOffset| {
            domain_of(r.dev).and_then(|k| medians.get(&(r.component, k)).copied()).unwrap_or(r.offset_ns)
        };
        // Keep each component's reference rank at 0.
        let base: Vec<f64> = self
            .reference
            .iter()
            .map(|d| self.ranks.iter().find(|r| r.dev == *d).map_or(0.0, collapsed))
            .collect();
        let mut out = self.clone();
        for r in &mut out.ranks {
            let b = base.get(r.component as usize).copied().unwrap_or(0.0);
            r.offset_ns = collapsed(r) - b;
        }
        out
    }

    fn shift(span: GpuSpan, by: i64) -> GpuSpan {
        GpuSpan { start_ns: span.start_ns.saturating_add(by), end_ns: span.end_ns.saturating_add(by) }
    }

    /// Synchronized spans (eq. 4.8); the table keeps the originals.
    pub fn apply(&self, t: &OpTable) -> SyncedSpans {
        let per_rank = t
            .per_rank
            .iter()
            .enumerate()
            .map(|(d, ops)| {
                let off = self.offset_ns(DevIdx(d as u32));
                ops.iter().map(|op| Some(Self::shift(op.gpu?, off?))).collect()
            })
            .collect();
        SyncedSpans { per_rank }
    }

    /// Shifts the table's spans of every device with an offset and returns
    /// the original spans, parallel to `per_rank`.
    pub fn apply_in_place(&self, t: &mut OpTable) -> Vec<Vec<Option<GpuSpan>>> {
        let mut originals = Vec::with_capacity(t.per_rank.len());
        for (d, ops) in t.per_rank.iter_mut().enumerate() {
            let off = self.offset_ns(DevIdx(d as u32));
            originals.push(ops.iter().map(|op| op.gpu).collect());
            if let Some(off) = off {
                ops.update_all(|_, op| op.gpu = op.gpu.map(|s| Self::shift(s, off)));
            }
        }
        originals
    }
}

#[cfg(test)]
#[path = "clock_tests.rs"]
pub(crate) mod tests;
