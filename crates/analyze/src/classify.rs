//! Which parallelism each logical communicator serves (thesis §4.2.3,
//! "communicator classification"), with the evidence next to each decision.
//!
//! **With sizes** ([`classify_with_sizes`]): the groups of global ranks that
//! Megatron-LM builds are computed the way its `RankGenerator` does: ranks are
//! laid out along the dimensions of the order string (default
//! `tp-cp-ep-dp-pp`, first = fastest), `rank = Σ coord_d × stride_d` with
//! strides the running products of the sizes, and a group along a set of
//! dimensions varies those coordinates while fixing the others. Dense groups
//! use EP = 1 (TP `tp`, CP `cp`, DP `dp` and `dp-cp`, PP `pp`, model-parallel
//! `tp-pp`); expert groups use CP = 1, expert TP = TP and expert DP =
//! world / (tp·ep·pp) (EP `ep`, expert DP `dp`). The embedding group is the
//! first and last stage of each pipeline group. A communicator is matched by
//! its member set (a partly logged one by inclusion in a group of its size).
//! Several classes can share a member set (PP and embedding when pp = 2,
//! TP and model-parallel when pp = 1, world and model-parallel when dp = 1):
//! communicators of one member set are taken in decreasing bytes, each gets
//! the first class of `TP, CP, EP, DP, PP, world, embedding, MP` that fits
//! its operations (PP needs mostly Send/Recv, the others mostly collectives)
//! and that no sibling took; the other matching classes are listed as
//! alternatives.
//!
//! **Without sizes** ([`infer`]), in this order: a one-rank communicator is
//! `Other`; a communicator of all ranks is `World` (when several, the one
//! with the most bytes of large reductions is `Data`: TP = PP = 1); ≥ 90 %
//! Send/Recv is `Pipeline` (thesis rule); ≥ 50 % AllToAll is `Expert`; among
//! collective communicators whose members are contiguous, aligned global
//! ranks (stride 1), the busiest (operations per member, within 4× of the
//! busiest) of the most common size are `Tensor`, which gives the TP size; a
//! two-member collective communicator holding the first and last rank of a
//! pipeline communicator is `Embedding`; one that is a union of TP groups is
//! `ModelParallel`; of the rest, those orthogonal to every TP and PP group
//! (at most one common rank) that carry reductions of at least 1 MiB are
//! `Data`, the largest size winning; everything else is `Other`. Context
//! parallelism is never inferred (its collectives look like TP's or, with
//! ring attention, like PP's); with TP = 1 a contiguous DP group can pass
//! for TP.

use commlens_core::model::LogicalCommIdx;
use commlens_core::{OpKind, OpTable};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// The role of a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Parallelism {
    World,
    Tensor,
    Pipeline,
    Data,
    Expert,
    Context,
    /// Megatron's model-parallel group (TP × PP of one replica).
    ModelParallel,
    /// First and last pipeline stage (tied word embeddings).
    Embedding,
    Other,
}

impl Parallelism {
    pub fn label(self) -> &'static str {
        match self {
            Parallelism::World => "world",
            Parallelism::Tensor => "TP",
            Parallelism::Pipeline => "PP",
            Parallelism::Data => "DP",
            Parallelism::Expert => "EP",
            Parallelism::Context => "CP",
            Parallelism::ModelParallel => "MP",
            Parallelism::Embedding => "embedding",
            Parallelism::Other => "other",
        }
    }
}

/// Megatron-LM parallel sizes; `dp` is Megatron's data-parallel size,
/// world / (tp·cp·pp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParallelSizes {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub ep: u32,
    /// Rank order, fastest dimension first (`RankGenerator`'s `order`).
    pub order: String,
}

impl Default for ParallelSizes {
    fn default() -> Self {
        ParallelSizes { tp: 1, pp: 1, dp: 1, cp: 1, ep: 1, order: "tp-cp-ep-dp-pp".into() }
    }
}

impl ParallelSizes {
    pub fn megatron(tp: u32, pp: u32, dp: u32) -> Self {
        ParallelSizes { tp, pp, dp, ..Default::default() }
    }

    pub fn world(&self) -> u32 {
        self.tp * self.cp * self.dp * self.pp
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError(pub String);

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SizeError {}

const DIMS: [&str; 5] = ["tp", "cp", "ep", "dp", "pp"];

/// Groups of global ranks along the dimensions `along` of a layout with
/// `sizes[d]` for `DIMS[d]`, ordered by `order` (fastest first).
fn rank_groups(sizes: [u32; 5], order: &[usize], along: &[&str]) -> Vec<Vec<u32>> {
    let world: u32 = sizes.iter().product();
    let mut stride = 1u32;
    let (mut masked, mut free) = (Vec::new(), Vec::new());
    for &d in order {
        let dim = (sizes[d], stride);
        if along.contains(&DIMS[d]) {
            masked.push(dim);
        } else {
            free.push(dim);
        }
        stride *= sizes[d];
    }
    let place = |mut index: u32, dims: &[(u32, u32)]| {
        let mut rank = 0;
        for &(size, stride) in dims {
            rank += (index % size) * stride;
            index /= size;
        }
        rank
    };
    let group_size: u32 = masked.iter().map(|m| m.0).product();
    (0..world / group_size).map(|g| (0..group_size).map(|k| place(g, &free) + place(k, &masked)).collect()).collect()
}

/// Parses `tp-cp-ep-dp-pp`-style orders into dimension indices; dimensions
/// left out must have size 1 and are appended.
fn parse_order(order: &str, sizes: [u32; 5]) -> Result<Vec<usize>, SizeError> {
    let mut out = Vec::new();
    for tok in order.split('-').map(str::trim).filter(|s| !s.is_empty()) {
        let d = DIMS
            .iter()
            .position(|x| x.eq_ignore_ascii_case(tok))
            .ok_or_else(|| SizeError(format!("unknown dimension {tok:?} in order {order:?}")))?;
        if out.contains(&d) {
            return Err(SizeError(format!("dimension {tok} twice in order {order:?}")));
        }
        out.push(d);
    }
    for d in 0..5 {
        if !out.contains(&d) {
            if sizes[d] > 1 {
                return Err(SizeError(format!("order {order:?} lacks {} (size {})", DIMS[d], sizes[d])));
            }
            out.push(d);
        }
    }
    Ok(out)
}

/// Every group Megatron would build for these sizes: (class, note, sorted ranks).
pub fn expected_groups(s: &ParallelSizes) -> Result<Vec<(Parallelism, String, Vec<u32>)>, SizeError> {
    let dims = [s.tp, s.cp, s.ep, s.dp, s.pp];
    if dims.contains(&0) {
        return Err(SizeError("parallel sizes must be at least 1".into()));
    }
    let world = s.world();
    if world / (s.tp * s.ep * s.pp) * (s.tp * s.ep * s.pp) != world {
        return Err(SizeError(format!("world {world} is not a multiple of tp·ep·pp = {}", s.tp * s.ep * s.pp)));
    }
    let order = parse_order(&s.order, dims)?;
    let dense = [s.tp, s.cp, 1, s.dp, s.pp];
    let expert = [s.tp, 1, s.ep, world / (s.tp * s.ep * s.pp), s.pp];
    let mut out = Vec::new();
    let mut add = |class, note: &str, sizes: [u32; 5], along: &[&str]| {
        for (i, mut g) in rank_groups(sizes, &order, along).into_iter().enumerate() {
            if g.len() > 1 {
                g.sort_unstable();
                out.push((class, format!("{note} group {i}"), g));
            }
        }
    };
    add(Parallelism::World, "world", dense, &DIMS);
    add(Parallelism::Tensor, "tp", dense, &["tp"]);
    add(Parallelism::Context, "cp", dense, &["cp"]);
    add(Parallelism::Data, "dp", dense, &["dp"]);
    if s.cp > 1 {
        add(Parallelism::Data, "dp-cp", dense, &["dp", "cp"]);
    }
    add(Parallelism::Pipeline, "pp", dense, &["pp"]);
    add(Parallelism::ModelParallel, "tp-pp", dense, &["tp", "pp"]);
    if s.ep > 1 {
        add(Parallelism::Expert, "ep", expert, &["ep"]);
        add(Parallelism::Data, "expert dp", expert, &["dp"]);
    }
    if s.pp > 1 {
        for (i, g) in rank_groups(dense, &order, &["pp"]).into_iter().enumerate() {
            let mut e = vec![g[0], g[g.len() - 1]];
            e.sort_unstable();
            out.push((Parallelism::Embedding, format!("first+last stage of pp group {i}"), e));
        }
    }
    Ok(out)
}

/// What the table says about one logical communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommEvidence {
    pub nranks: u32,
    /// Global ranks of the members seen, sorted.
    pub ranks: Vec<u32>,
    /// Constant difference between consecutive member ranks, if any.
    pub stride: Option<u32>,
    pub hosts: u32,
    pub ops: u64,
    pub ops_per_member: f64,
    pub bytes: u64,
    pub median_bytes: u64,
    pub max_bytes: u64,
    /// Operations per kind, most frequent first.
    pub mix: Vec<(OpKind, u64)>,
}

impl CommEvidence {
    fn share(&self, f: impl Fn(OpKind) -> bool) -> f64 {
        let n: u64 = self.mix.iter().filter(|m| f(m.0)).map(|m| m.1).sum();
        if self.ops == 0 {
            0.0
        } else {
            n as f64 / self.ops as f64
        }
    }

    pub fn p2p_share(&self) -> f64 {
        self.share(OpKind::is_p2p)
    }

    pub fn alltoall_share(&self) -> f64 {
        self.share(|k| k == OpKind::AllToAll)
    }

    /// AllReduce, ReduceScatter and AllGather (gradient and parameter traffic).
    pub fn reduction_share(&self) -> f64 {
        self.share(|k| matches!(k, OpKind::AllReduce | OpKind::ReduceScatter | OpKind::AllGather))
    }

    fn collective(&self) -> bool {
        self.ops == 0 || self.p2p_share() < 0.5
    }

    /// One line: op mix, sizes, members, stride.
    pub fn summary(&self) -> String {
        let mix: Vec<String> =
            self.mix.iter().map(|(k, n)| format!("{k} {:.0}%", 100.0 * *n as f64 / self.ops.max(1) as f64)).collect();
        let stride = self.stride.map_or_else(|| "irregular".into(), |s| s.to_string());
        format!(
            "{} ops ({}), {:.1}/member, median {} B, max {} B; members {:?} of {}, stride {stride}, {} host(s)",
            self.ops,
            mix.join(", "),
            self.ops_per_member,
            self.median_bytes,
            self.max_bytes,
            self.ranks,
            self.nranks,
            self.hosts
        )
    }
}

/// Evidence of every logical communicator.
pub fn evidence(t: &OpTable) -> Vec<CommEvidence> {
    let mut kinds: Vec<BTreeMap<OpKind, u64>> = vec![BTreeMap::new(); t.logical.len()];
    // Sizes as (bytes → operations): a communicator repeats a few sizes, so
    // this costs its distinct sizes, not 8 B per operation.
    let mut sizes: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); t.logical.len()];
    for op in t.ops() {
        if let Some(l) = t.comms.get(op.comm.ix()).and_then(|c| c.logical) {
            *kinds[l.ix()].entry(op.kind).or_default() += 1;
            *sizes[l.ix()].entry(op.bytes).or_default() += 1;
        }
    }
    t.logical
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut ranks: Vec<u32> = l.members.iter().filter_map(|&m| t.global_rank_of(m)).collect();
            ranks.sort_unstable();
            ranks.dedup();
            let diffs: BTreeSet<u32> = ranks.windows(2).map(|w| w[1] - w[0]).collect();
            let hosts: BTreeSet<&str> =
                l.members.iter().map(|m| t.processes[t.comms[m.ix()].proc.ix()].host.as_str()).collect();
            let s = std::mem::take(&mut sizes[i]);
            let ops: u64 = s.values().sum();
            // The sorted sizes' element at ops / 2, read off cumulative counts.
            let mut below = 0;
            let median_bytes = s
                .iter()
                .find(|(_, n)| {
                    below += **n;
                    below > ops / 2
                })
                .map_or(0, |(b, _)| *b);
            let mut mix: Vec<(OpKind, u64)> = kinds[i].iter().map(|(k, n)| (*k, *n)).collect();
            mix.sort_by_key(|m| std::cmp::Reverse(m.1));
            CommEvidence {
                nranks: l.nranks,
                stride: if diffs.len() == 1 { diffs.first().copied() } else { None },
                ranks,
                hosts: hosts.len() as u32,
                ops,
                ops_per_member: ops as f64 / l.members.len().max(1) as f64,
                // Saturating sums of unsigned values do not depend on order.
                bytes: s.iter().fold(0u64, |a, (b, n)| a.saturating_add(b.saturating_mul(*n))),
                median_bytes,
                max_bytes: s.keys().next_back().copied().unwrap_or(0),
                mix,
            }
        })
        .collect()
}

/// The decision for one communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommClass {
    pub comm: LogicalCommIdx,
    pub name: String,
    pub class: Parallelism,
    /// Why, in words.
    pub reason: String,
    /// Other classes whose expected groups have the same members (sizes mode).
    pub alternatives: Vec<Parallelism>,
    pub evidence: CommEvidence,
}

/// Sizes read off the classified communicators (inference mode).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InferredSizes {
    pub world: u32,
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub dp: Option<u32>,
    /// Stride of the DP groups: the TP size under a `tp-…-dp` order.
    pub dp_stride: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// The sizes used, or `None` when inferred.
    pub given: Option<ParallelSizes>,
    pub inferred: InferredSizes,
    pub comms: Vec<CommClass>,
}

impl Classification {
    pub fn class_of(&self, l: LogicalCommIdx) -> Option<Parallelism> {
        // `comms[i]` is communicator `i` as both classifiers build it; the scan is a fallback.
        match self.comms.get(l.ix()) {
            Some(c) if c.comm == l => Some(c.class),
            _ => self.comms.iter().find(|c| c.comm == l).map(|c| c.class),
        }
    }
}

/// Number of global ranks the table speaks of.
fn world_size(t: &OpTable) -> u32 {
    let by_rank = t.devices.iter().filter_map(|d| d.global_rank).map(|r| r + 1).max().unwrap_or(0);
    let by_comm = t.logical.iter().map(|l| l.nranks).max().unwrap_or(0);
    by_rank.max(by_comm)
}

const PRIORITY: [Parallelism; 8] = [
    Parallelism::Tensor,
    Parallelism::Context,
    Parallelism::Expert,
    Parallelism::Data,
    Parallelism::Pipeline,
    Parallelism::World,
    Parallelism::Embedding,
    Parallelism::ModelParallel,
];

fn fits(class: Parallelism, e: &CommEvidence) -> bool {
    match class {
        Parallelism::Pipeline => e.ops == 0 || e.p2p_share() >= 0.5,
        Parallelism::Expert => e.collective(),
        _ => e.collective() && e.alltoall_share() < 0.5,
    }
}

/// Classifies against the groups Megatron builds for `sizes`.
pub fn classify_with_sizes(t: &OpTable, sizes: &ParallelSizes) -> Result<Classification, SizeError> {
    let world = world_size(t);
    if sizes.world() != world {
        return Err(SizeError(format!(
            "sizes give {} ranks (tp {} × cp {} × dp {} × pp {}) but the table has {world}",
            sizes.world(),
            sizes.tp,
            sizes.cp,
            sizes.dp,
            sizes.pp
        )));
    }
    let groups = expected_groups(sizes)?;
    let ev = evidence(t);
    // Candidate (class, note) per communicator: same members, or (partly
    // logged) a group of its size holding the members seen.
    let holds = |g: &[u32], e: &CommEvidence| match e.ranks.len() as u32 == e.nranks {
        true => g == e.ranks,
        // Groups are sorted (`expected_groups`).
        false => g.len() as u32 == e.nranks && e.ranks.iter().all(|r| g.binary_search(r).is_ok()),
    };
    // A group holding a communicator holds its first rank: only those groups are tried,
    // so classifying is linear in communicators, not communicators × groups.
    let mut by_member: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        for &r in &g.2 {
            by_member.entry(r).or_default().push(i);
        }
    }
    let all: Vec<usize> = (0..groups.len()).collect();
    let cands: Vec<Vec<(Parallelism, String)>> = ev
        .iter()
        .map(|e| {
            let tried = match e.ranks.first() {
                Some(r) => by_member.get(r).map_or(&[][..], Vec::as_slice),
                None => &all[..],
            };
            tried.iter().map(|&i| &groups[i]).filter(|g| holds(&g.2, e)).map(|g| (g.0, g.1.clone())).collect()
        })
        .collect();
    let mut by_set: BTreeMap<&[u32], Vec<usize>> = BTreeMap::new();
    for (i, e) in ev.iter().enumerate() {
        by_set.entry(e.ranks.as_slice()).or_default().push(i);
    }
    let mut out: Vec<Option<CommClass>> = vec![None; ev.len()];
    for (_, mut sibs) in by_set {
        sibs.sort_by_key(|&i| (std::cmp::Reverse(ev[i].bytes), std::cmp::Reverse(ev[i].ops), i));
        let mut taken: Vec<Parallelism> = Vec::new();
        for i in sibs {
            let e = &ev[i];
            let classes: Vec<Parallelism> =
                PRIORITY.iter().copied().filter(|p| cands[i].iter().any(|c| c.0 == *p)).collect();
            let fitting: Vec<Parallelism> = classes.iter().copied().filter(|&p| fits(p, e)).collect();
            let before: Vec<&str> = taken.iter().filter(|p| classes.contains(p)).map(|p| p.label()).collect();
            let (class, mut how) = if let Some(&p) = fitting.iter().find(|p| !taken.contains(p)) {
                (p, "operations fit".to_string())
            } else if let Some(&p) = fitting.first() {
                (p, "operations fit; a communicator with the same members has this class too".into())
            } else if let Some(&p) = classes.first() {
                (p, "operations do not fit this class".into())
            } else {
                (Parallelism::Other, String::new())
            };
            if !before.is_empty() && !before.contains(&class.label()) {
                how += &format!(" ({} went to a communicator with the same members and more bytes)", before.join(", "));
            }
            taken.push(class);
            let reason = if class == Parallelism::Other {
                format!("members {:?} match no group of {}", e.ranks, describe(sizes))
            } else {
                let note = &cands[i].iter().find(|c| c.0 == class).expect("candidate").1;
                format!("members = {note} of {}; {how}", describe(sizes))
            };
            out[i] = Some(CommClass {
                comm: LogicalCommIdx(i as u32),
                name: t.logical[i].name.clone(),
                class,
                reason,
                alternatives: classes.into_iter().filter(|&p| p != class).collect(),
                evidence: e.clone(),
            });
        }
    }
    let comms: Vec<CommClass> = out.into_iter().map(|c| c.expect("every comm decided")).collect();
    let inferred = sizes_of(world, &comms);
    Ok(Classification { given: Some(sizes.clone()), inferred, comms })
}

fn describe(s: &ParallelSizes) -> String {
    format!("tp {} cp {} ep {} dp {} pp {} ({})", s.tp, s.cp, s.ep, s.dp, s.pp, s.order)
}

fn sizes_of(world: u32, comms: &[CommClass]) -> InferredSizes {
    let size = |p: Parallelism| comms.iter().find(|c| c.class == p).map(|c| c.evidence.nranks);
    InferredSizes {
        world,
        tp: size(Parallelism::Tensor),
        pp: size(Parallelism::Pipeline),
        dp: size(Parallelism::Data),
        dp_stride: comms.iter().find(|c| c.class == Parallelism::Data).and_then(|c| c.evidence.stride),
    }
}

/// Classifies from the operations and member ranks alone (rules in the module docs).
pub fn infer(t: &OpTable) -> Classification {
    let world = world_size(t);
    let ev = evidence(t);
    let mut class: Vec<Option<(Parallelism, String)>> = vec![None; ev.len()];
    let open = |class: &[Option<(Parallelism, String)>], i: usize| class[i].is_none();
    for (i, e) in ev.iter().enumerate() {
        if e.nranks <= 1 || e.ranks.len() <= 1 {
            class[i] = Some((Parallelism::Other, "one rank".into()));
        }
    }
    // World (and DP spanning the world when TP = PP = 1).
    let full: Vec<usize> = (0..ev.len()).filter(|&i| open(&class, i) && world > 1 && ev[i].nranks == world).collect();
    let big_reducer = |e: &CommEvidence| e.reduction_share() >= 0.5 && e.max_bytes >= 1 << 20;
    let dp_world = if full.len() > 1 {
        full.iter().copied().filter(|&i| big_reducer(&ev[i])).max_by_key(|&i| (ev[i].bytes, std::cmp::Reverse(i)))
    } else {
        None
    };
    for &i in &full {
        class[i] = Some(if Some(i) == dp_world {
            (Parallelism::Data, "all ranks; most bytes of large reductions of the world-sized ones".into())
        } else {
            (Parallelism::World, format!("all {world} ranks"))
        });
    }
    for (i, e) in ev.iter().enumerate() {
        if !open(&class, i) || e.ops == 0 {
            continue;
        }
        if e.p2p_share() >= 0.9 {
            class[i] = Some((Parallelism::Pipeline, format!("{:.0}% Send/Recv", 100.0 * e.p2p_share())));
        } else if e.alltoall_share() >= 0.5 {
            class[i] = Some((Parallelism::Expert, format!("{:.0}% AllToAll", 100.0 * e.alltoall_share())));
        }
    }
    // Tensor: busy groups of contiguous, aligned ranks.
    let contiguous = |e: &CommEvidence| {
        e.stride == Some(1) && e.ranks.len() as u32 == e.nranks && e.ranks[0] % e.nranks < 1 && e.collective()
    };
    let cand: Vec<usize> = (0..ev.len()).filter(|&i| open(&class, i) && ev[i].ops > 0 && contiguous(&ev[i])).collect();
    let busiest = cand.iter().map(|&i| ev[i].ops_per_member).fold(0.0, f64::max);
    let busy: Vec<usize> = cand.into_iter().filter(|&i| ev[i].ops_per_member * 4.0 >= busiest).collect();
    let mut by_size: BTreeMap<u32, usize> = BTreeMap::new();
    for &i in &busy {
        *by_size.entry(ev[i].nranks).or_default() += 1;
    }
    let tp_size = by_size.iter().max_by_key(|(s, n)| (**n, **s)).map(|(s, _)| *s);
    let mut tp_groups: Vec<&[u32]> = Vec::new();
    for &i in &busy {
        if Some(ev[i].nranks) == tp_size {
            class[i] = Some((
                Parallelism::Tensor,
                format!("contiguous aligned ranks, {:.1} ops/member (busiest {busiest:.1})", ev[i].ops_per_member),
            ));
            tp_groups.push(&ev[i].ranks);
        }
    }
    let pp_groups: Vec<&[u32]> = (0..ev.len())
        .filter(|&i| matches!(class[i], Some((Parallelism::Pipeline, _))))
        .map(|i| ev[i].ranks.as_slice())
        .collect();
    // Indexed, so that each communicator is compared with the groups it touches only.
    let tp_index = groups::GroupIndex::new(tp_groups.iter().copied());
    let tp_pp_index = groups::GroupIndex::new(tp_groups.iter().chain(&pp_groups).copied());
    let mut pp_by_ends: HashMap<(u32, u32), &[u32]> = HashMap::new();
    for g in pp_groups.iter().filter(|g| g.len() >= 2) {
        pp_by_ends.entry((g[0], g[g.len() - 1])).or_insert(g);
    }
    let pp_sets: std::collections::HashSet<&[u32]> = pp_groups.iter().copied().collect();
    for (i, e) in ev.iter().enumerate() {
        if !open(&class, i) || !e.collective() {
            continue;
        }
        let pp = if e.ranks.len() == 2 { pp_by_ends.get(&(e.ranks[0], e.ranks[1])) } else { None };
        if let Some(pp) = pp {
            class[i] = Some((Parallelism::Embedding, format!("first and last rank of pipeline group {pp:?}")));
        } else if !tp_groups.is_empty() && tp_index.whole_groups_only(&e.ranks) {
            class[i] = Some((Parallelism::ModelParallel, "a union of whole TP groups".into()));
        } else if tp_groups.is_empty() && pp_sets.contains(e.ranks.as_slice()) {
            class[i] =
                Some((Parallelism::ModelParallel, "same members as a pipeline group, collectives (TP = 1)".into()));
        }
    }
    let orthogonal = |e: &CommEvidence| tp_pp_index.at_most_one_in_common(&e.ranks);
    let dp_cand: Vec<usize> = (0..ev.len())
        .filter(|&i| open(&class, i) && ev[i].collective() && big_reducer(&ev[i]) && orthogonal(&ev[i]))
        .collect();
    let dp_size = dp_cand.iter().map(|&i| ev[i].nranks).max();
    for i in dp_cand {
        if Some(ev[i].nranks) == dp_size {
            class[i] = Some((
                Parallelism::Data,
                format!(
                    "at most one rank in common with every TP/PP group, {:.0}% reductions up to {} B",
                    100.0 * ev[i].reduction_share(),
                    ev[i].max_bytes
                ),
            ));
        }
    }
    let comms: Vec<CommClass> = ev
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let (c, why) = class[i].take().unwrap_or((Parallelism::Other, "no rule matched".into()));
            CommClass {
                comm: LogicalCommIdx(i as u32),
                name: t.logical[i].name.clone(),
                class: c,
                reason: why,
                alternatives: Vec::new(),
                evidence: e,
            }
        })
        .collect();
    let inferred = sizes_of(world, &comms);
    Classification { given: None, inferred, comms }
}

#[path = "classify_groups.rs"]
mod groups;

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
