//! Strategy signatures (thesis §5.3): which parallelism variant each logical communicator
//! carries, named from its traffic alone, with the facts that decided it and a confidence.
//!
//! Where [`crate::classify`] says *which group* a communicator is (TP, PP, DP, ...), this
//! module says *how that group talks*: plain DP (gradient AllReduce) or DP with the
//! distributed optimizer / ZeRO-1 (ReduceScatter of fp32 gradients + AllGather of 16-bit
//! parameters with the same element counts), TP (16-bit activation AllReduces, batch
//! Broadcasts) or TP with sequence parallelism (AllGather and ReduceScatter of one activation
//! shard, ≈ 3 AllGathers per 2 ReduceScatters), PP (Send/Recv between adjacent stages only) or
//! PP with virtual stages (the pipeline wraps around — the last stage feeds the first — and
//! batched p2p groups carry two Sends), expert parallelism with the all-to-all dispatcher
//! (Send/Recv groups towards every member, the rank itself included, uneven sizes) or the
//! AllGather dispatcher (AllGather/ReduceScatter ≈ 4:3, a 1-byte routing map among the
//! gathered types, no Broadcast, no AllReduce).
//!
//! Each candidate strategy scores weighted facts; the best normalised score wins and is the
//! confidence. Control traffic (only messages of ≤ 64 B) is the world group or Megatron's
//! model-parallel group (grad norm); a run whose ranks hold a single communicator each is a
//! benchmark (nccl-tests), never a training strategy. Embedding groups are taken from the
//! classification (first + last rank of a pipeline), which this module cannot tell from a
//! small DP group by traffic alone.

use crate::classify::{self, Classification, Parallelism};
use commlens_core::model::LogicalCommIdx;
use commlens_core::{DataType, OpKind, OpTable};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A communication strategy as its traffic shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Strategy {
    Dp,
    DpZero1,
    Tp,
    TpSp,
    Pp,
    PpVirtual,
    EpAllToAll,
    EpAllGather,
    Embedding,
    ModelParallel,
    World,
    /// A communication benchmark (nccl-tests): one communicator per rank.
    Benchmark,
    Unknown,
}

impl Strategy {
    /// The name the generator's truth uses (`dp-zero1`, `tp-sp`, `pp-vpp`, `ep-a2a`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Dp => "dp",
            Strategy::DpZero1 => "dp-zero1",
            Strategy::Tp => "tp",
            Strategy::TpSp => "tp-sp",
            Strategy::Pp => "pp",
            Strategy::PpVirtual => "pp-vpp",
            Strategy::EpAllToAll => "ep-a2a",
            Strategy::EpAllGather => "ep-allgather",
            Strategy::Embedding => "emb",
            Strategy::ModelParallel => "mp",
            Strategy::World => "world",
            Strategy::Benchmark => "benchmark",
            Strategy::Unknown => "unknown",
        }
    }

    /// Whether this is the traffic of a training parallelism (not control, benchmark or unknown).
    pub fn is_training(self) -> bool {
        !matches!(self, Strategy::World | Strategy::Benchmark | Strategy::Unknown)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The decision for one logical communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signature {
    pub logical: LogicalCommIdx,
    pub name: String,
    pub strategy: Strategy,
    /// Share of the winning candidate's weighted facts that hold, in [0, 1].
    pub confidence: f64,
    /// Human-readable facts with numbers, the deciding ones first.
    pub evidence: Vec<String>,
}

/// What one communicator's operations show.
#[derive(Debug, Default)]
struct Traffic {
    ops: u64,
    members: usize,
    /// Operations per kind.
    count: BTreeMap<OpKind, u64>,
    /// Datatypes seen per kind.
    dtypes: BTreeMap<OpKind, BTreeSet<DataType>>,
    /// Occurrences of each (element count, datatype) per collective kind.
    shapes: BTreeMap<OpKind, BTreeMap<(u64, DataType), u64>>,
    max_bytes: u64,
    /// Distinct Send sizes.
    send_sizes: BTreeSet<u64>,
    /// (comm rank, peer comm rank) of every Send.
    send_pairs: BTreeSet<(u32, u32)>,
    /// Distinct peers per member (comm rank).
    peers: BTreeMap<u32, BTreeSet<u32>>,
    self_peer_ops: u64,
    p2p_groups: u64,
    groups_two_sends: u64,
    groups_many_peers: u64,
}

impl Traffic {
    fn n(&self, k: OpKind) -> u64 {
        self.count.get(&k).copied().unwrap_or(0)
    }

    fn share(&self, kinds: &[OpKind]) -> f64 {
        kinds.iter().map(|&k| self.n(k)).sum::<u64>() as f64 / self.ops.max(1) as f64
    }

    /// The most frequent (count, dtype) of a kind.
    fn dominant(&self, k: OpKind) -> Option<(u64, DataType)> {
        self.shapes.get(&k)?.iter().max_by_key(|(s, n)| (**n, s.0)).map(|(s, _)| *s)
    }

    fn mix(&self) -> String {
        let mut v: Vec<(&OpKind, &u64)> = self.count.iter().collect();
        v.sort_by_key(|x| std::cmp::Reverse(*x.1));
        let parts: Vec<String> = v.iter().map(|(k, n)| format!("{k} {:.0}%", 100.0 * **n as f64 / self.ops.max(1) as f64)).collect();
        format!(
            "{} ops ({}), {:.1} per member, largest {} B",
            self.ops,
            parts.join(", "),
            self.ops as f64 / self.members.max(1) as f64,
            self.max_bytes
        )
    }
}

fn traffic_of(t: &OpTable) -> Vec<Traffic> {
    let mut out: Vec<Traffic> = t.logical.iter().map(|l| Traffic { members: l.members.len(), ..Default::default() }).collect();
    for ops in &t.per_rank {
        // A batched p2p group: consecutive Send/Recv of one handle with one opCount.
        let mut group: Option<(u32, u64, u64, BTreeSet<u32>)> = None; // handle, seq, sends, peers
        let close = |g: Option<(u32, u64, u64, BTreeSet<u32>)>, out: &mut Vec<Traffic>| {
            let Some((h, _, sends, peers)) = g else { return };
            let Some(l) = t.comms[h as usize].logical else { return };
            let tr = &mut out[l.ix()];
            tr.p2p_groups += 1;
            tr.groups_two_sends += (sends >= 2) as u64;
            tr.groups_many_peers += (peers.len() >= 3) as u64;
        };
        for op in ops {
            let Some(l) = t.comms[op.comm.ix()].logical else { continue };
            let me = t.comms[op.comm.ix()].rank;
            let tr = &mut out[l.ix()];
            tr.ops += 1;
            *tr.count.entry(op.kind).or_default() += 1;
            tr.dtypes.entry(op.kind).or_default().insert(op.dtype);
            tr.max_bytes = tr.max_bytes.max(op.bytes);
            if !op.kind.is_p2p() {
                *tr.shapes.entry(op.kind).or_default().entry((op.count, op.dtype)).or_default() += 1;
                close(group.take(), &mut out);
                continue;
            }
            let (Some(me), Some(peer)) = (me, op.peer) else { continue };
            tr.peers.entry(me).or_default().insert(peer);
            tr.self_peer_ops += (peer == me) as u64;
            if op.kind == OpKind::Send {
                tr.send_sizes.insert(op.bytes);
                tr.send_pairs.insert((me, peer));
            }
            let same = matches!(&group, Some((h, s, _, _)) if *h == op.comm.0 && *s == op.seq);
            if !same {
                close(group.take(), &mut out);
                group = Some((op.comm.0, op.seq, 0, BTreeSet::new()));
            }
            if let Some(g) = group.as_mut() {
                g.2 += (op.kind == OpKind::Send) as u64;
                g.3.insert(peer);
            }
        }
        close(group.take(), &mut out);
    }
    out
}

/// Weighted facts for one candidate strategy.
struct Candidate {
    strategy: Strategy,
    facts: Vec<(f64, bool, String)>,
}

impl Candidate {
    fn new(strategy: Strategy) -> Self {
        Candidate { strategy, facts: Vec::new() }
    }

    fn fact(mut self, weight: f64, holds: bool, text: String) -> Self {
        self.facts.push((weight, holds, text));
        self
    }

    fn score(&self) -> f64 {
        let total: f64 = self.facts.iter().map(|f| f.0).sum();
        // `+ 0.0`: an empty float sum is -0.0, which would print as "-0.00".
        self.facts.iter().filter(|f| f.1).map(|f| f.0).sum::<f64>() / total.max(f64::MIN_POSITIVE) + 0.0
    }
}

fn is16(d: DataType) -> bool {
    matches!(d, DataType::Float16 | DataType::Bfloat16)
}

fn one_byte(d: DataType) -> bool {
    matches!(d, DataType::Int8 | DataType::Uint8)
}

/// Candidates of a p2p-dominated communicator.
fn p2p_candidates(tr: &Traffic, n: u32) -> Vec<Candidate> {
    let max_peers = tr.peers.values().map(BTreeSet::len).max().unwrap_or(0);
    let wrap = n > 2 && tr.send_pairs.iter().any(|&(a, b)| (a == 0 && b == n - 1) || (a == n - 1 && b == 0));
    let adjacent_only = tr.send_pairs.iter().all(|&(a, b)| a.abs_diff(b) == 1 || a.abs_diff(b) == n - 1);
    let uneven = tr.send_sizes.len() > 4;
    let a2a = Candidate::new(Strategy::EpAllToAll)
        .fact(2.0, tr.self_peer_ops > 0, format!("{} Send/Recv with the rank itself (all_to_all includes self)", tr.self_peer_ops))
        .fact(1.0, max_peers as u32 >= n.min(3), format!("members talk to up to {max_peers} of {n} ranks"))
        .fact(1.0, tr.groups_many_peers > 0, format!("{} of {} p2p groups reach ≥ 3 peers", tr.groups_many_peers, tr.p2p_groups))
        .fact(1.0, uneven, format!("{} distinct Send sizes (token routing is uneven)", tr.send_sizes.len()));
    let two_sends = tr.groups_two_sends > 0;
    let vpp = wrap || two_sends;
    let pp = Candidate::new(if vpp { Strategy::PpVirtual } else { Strategy::Pp })
        .fact(2.0, tr.self_peer_ops == 0, "no Send/Recv to the rank itself".into())
        .fact(1.0, max_peers <= 2, format!("each member talks to at most {max_peers} neighbour(s)"))
        .fact(1.0, adjacent_only, "peers are adjacent stages (ring order)".into())
        .fact(1.0, !uneven, format!("{} distinct Send size(s)", tr.send_sizes.len()));
    let pp = if vpp {
        let wrap_text = if n > 2 {
            format!("pipeline wraps around: ranks 0 and {} exchange (chunk handover)", n - 1)
        } else {
            "two stages: wrap-around not observable".into()
        };
        pp.fact(1.5, wrap || n <= 2, wrap_text).fact(
            1.5,
            two_sends,
            format!("{} of {} p2p groups carry two Sends (interleaved steady state)", tr.groups_two_sends, tr.p2p_groups),
        )
    } else {
        pp.fact(1.0, n <= 2 || !wrap, "no wrap-around between the first and last stage".into()).fact(
            1.0,
            !two_sends,
            format!("no p2p group carries two Sends ({} groups)", tr.p2p_groups),
        )
    };
    vec![a2a, pp]
}

/// Candidates of a communicator dominated by AllGather + ReduceScatter.
fn gather_scatter_candidates(tr: &Traffic, stride1: bool) -> Vec<Candidate> {
    let (ag, rs) = (tr.n(OpKind::AllGather), tr.n(OpKind::ReduceScatter));
    let ratio = ag as f64 / rs.max(1) as f64;
    let ag_types = tr.dtypes.get(&OpKind::AllGather).cloned().unwrap_or_default();
    let rs_types = tr.dtypes.get(&OpKind::ReduceScatter).cloned().unwrap_or_default();
    let counts = |k: OpKind| -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for ((c, _), n) in tr.shapes.get(&k).into_iter().flatten() {
            *m.entry(*c).or_default() += n;
        }
        m
    };
    let same_counts = counts(OpKind::AllGather) == counts(OpKind::ReduceScatter);
    let (dag, drs) = (tr.dominant(OpKind::AllGather), tr.dominant(OpKind::ReduceScatter));
    let bc = tr.n(OpKind::Broadcast);
    let ar = tr.n(OpKind::AllReduce);
    let zero1 = Candidate::new(Strategy::DpZero1)
        .fact(
            2.0,
            rs_types.iter().all(|&d| d == DataType::Float32) && ag_types.iter().all(|&d| is16(d)),
            format!("ReduceScatter of {rs_types:?} gradients, AllGather of {ag_types:?} parameters"),
        )
        .fact(2.0, same_counts && ag == rs, format!("{ag} AllGather and {rs} ReduceScatter with the same element counts"))
        .fact(1.0, tr.max_bytes >= 1 << 20, format!("largest message {} B (gradient buckets)", tr.max_bytes))
        .fact(1.0, bc == 0 && ar == 0, format!("{bc} Broadcast, {ar} AllReduce"));
    let sp = Candidate::new(Strategy::TpSp)
        .fact(2.0, dag.is_some() && dag == drs && dag.is_some_and(|d| is16(d.1)), format!("AllGather and ReduceScatter share one 16-bit shape {dag:?}"))
        .fact(1.0, (1.2..=2.0).contains(&ratio), format!("AllGather:ReduceScatter = {ratio:.2} (SP: 6:4 per layer)"))
        .fact(1.0, bc > 0, format!("{bc} Broadcast (batch to the TP group)"))
        .fact(1.0, ar > 0, format!("{ar} AllReduce (vocab-parallel loss, layer-norm grads)"))
        .fact(1.0, stride1, "members are consecutive ranks".into());
    let ep = Candidate::new(Strategy::EpAllGather)
        .fact(2.0, ag_types.iter().any(|&d| one_byte(d)), format!("AllGather of a 1-byte type (routing map) among {ag_types:?}"))
        .fact(2.0, ag_types.len() >= 3, format!("{} AllGather datatypes (map, probabilities, tokens)", ag_types.len()))
        .fact(1.0, (1.2..1.5).contains(&ratio), format!("AllGather:ReduceScatter = {ratio:.2} (dispatcher: 4:3)"))
        .fact(1.0, bc == 0 && ar == 0, format!("{bc} Broadcast, {ar} AllReduce"));
    vec![zero1, sp, ep]
}

/// Candidates of an AllReduce-dominated communicator.
fn all_reduce_candidates(tr: &Traffic, stride1: bool, busiest_per_member: f64) -> Vec<Candidate> {
    let ar_types = tr.dtypes.get(&OpKind::AllReduce).cloned().unwrap_or_default();
    let dom = tr.dominant(OpKind::AllReduce);
    let dom_n = dom.and_then(|d| tr.shapes.get(&OpKind::AllReduce).and_then(|m| m.get(&d))).copied().unwrap_or(0);
    let per_member = tr.ops as f64 / tr.members.max(1) as f64;
    let bc = tr.n(OpKind::Broadcast);
    let rare = per_member * 4.0 <= busiest_per_member || busiest_per_member <= per_member && per_member <= 64.0;
    let tp = Candidate::new(Strategy::Tp)
        .fact(2.0, dom.is_some_and(|d| is16(d.1)), format!("most frequent AllReduce {dom:?} is 16-bit (activations)"))
        .fact(1.0, bc > 0, format!("{bc} Broadcast (batch to the TP group)"))
        .fact(1.0, dom_n * 2 >= tr.n(OpKind::AllReduce) && dom_n >= 8, format!("{dom_n} AllReduces of that one shape"))
        .fact(1.0, stride1, "members are consecutive ranks".into());
    let dp = Candidate::new(Strategy::Dp)
        .fact(2.0, dom.is_some_and(|d| d.1 == DataType::Float32), format!("AllReduce of {ar_types:?} (fp32 main grads)"))
        .fact(1.0, tr.max_bytes >= 1 << 20, format!("largest message {} B (gradient buckets)", tr.max_bytes))
        .fact(1.0, bc == 0, format!("{bc} Broadcast"))
        .fact(1.0, rare, format!("{per_member:.1} ops per member vs {busiest_per_member:.1} on the busiest communicator (once per iteration)"));
    vec![tp, dp]
}

/// Whether every rank holds a single communicator, as nccl-tests creates them (a training job
/// builds a world group plus several parallel groups on every rank). A handle counts when its
/// init line was logged (it has a `commId`) or it carries more than 1 % of its rank's
/// operations, so a stray handle rebuilt from a broken line does not hide the shape.
fn one_communicator_per_rank(t: &OpTable) -> bool {
    let ops_of_dev: Vec<u64> = t.per_rank.iter().map(|v| v.len() as u64).collect();
    let mut per_dev: BTreeMap<u32, usize> = BTreeMap::new();
    for c in &t.comms {
        let Some(d) = c.device else { continue };
        let dev_ops = ops_of_dev.get(d.ix()).copied().unwrap_or(0);
        if c.comm_id.is_some() || c.n_ops * 100 > dev_ops {
            *per_dev.entry(d.0).or_default() += 1;
        }
    }
    t.logical.len() == 1 || (!per_dev.is_empty() && per_dev.values().all(|&n| n == 1))
}

/// Names the strategy of every logical communicator, using [`classify::infer`] for the
/// embedding and model-parallel roles.
pub fn recognize(t: &OpTable) -> Vec<Signature> {
    recognize_with(t, &classify::infer(t))
}

/// [`recognize`] with a given classification (e.g. [`classify::classify_with_sizes`]).
pub fn recognize_with(t: &OpTable, classes: &Classification) -> Vec<Signature> {
    let traffic = traffic_of(t);
    let ev = classify::evidence(t);
    let world = t.devices.iter().filter_map(|d| d.global_rank).map(|r| r + 1).max().unwrap_or(0).max(t.logical.iter().map(|l| l.nranks).max().unwrap_or(0));
    let single_comm_run = one_communicator_per_rank(t);
    let busiest = traffic.iter().map(|tr| tr.ops as f64 / tr.members.max(1) as f64).fold(0.0, f64::max);
    // First and last global rank of every pipeline-looking communicator (p2p without
    // self-sends): the tied-embedding group holds exactly these two. Found here as well as by
    // the classification, which misses pipelines that span all ranks (it calls them world).
    let pipeline_ends: Vec<[u32; 2]> = t
        .logical
        .iter()
        .zip(&traffic)
        .filter(|(_, tr)| tr.share(&[OpKind::Send, OpKind::Recv]) >= 0.5 && tr.self_peer_ops == 0)
        .filter_map(|(l, _)| {
            let first = t.global_rank_of(*l.members.first()?)?;
            let last = t.global_rank_of(*l.members.last()?)?;
            (l.members.len() > 1).then_some([first.min(last), first.max(last)])
        })
        .collect();
    t.logical
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let tr = &traffic[i];
            let e = &ev[i];
            let stride1 = e.stride == Some(1) && e.ranks.len() as u32 == e.nranks;
            let mut class = classes.class_of(LogicalCommIdx(i as u32));
            if e.ranks.len() == 2 && pipeline_ends.iter().any(|p| p[..] == e.ranks[..]) {
                class = Some(Parallelism::Embedding);
            }
            let (strategy, confidence, mut evidence) = decide(tr, e.nranks, world, stride1, busiest, class, single_comm_run);
            evidence.push(format!("{}; members {:?}, stride {}", tr.mix(), e.ranks, e.stride.map_or("irregular".into(), |s| s.to_string())));
            Signature { logical: LogicalCommIdx(i as u32), name: l.name.clone(), strategy, confidence, evidence }
        })
        .collect()
}

fn decide(
    tr: &Traffic,
    n: u32,
    world: u32,
    stride1: bool,
    busiest: f64,
    class: Option<Parallelism>,
    single_comm_run: bool,
) -> (Strategy, f64, Vec<String>) {
    if tr.ops == 0 {
        return (Strategy::Unknown, 0.0, vec!["no operations".into()]);
    }
    if single_comm_run {
        let top = tr.count.values().max().copied().unwrap_or(0) as f64 / tr.ops as f64;
        let mut sizes: BTreeSet<u64> = tr.shapes.values().flat_map(|m| m.keys().map(|k| k.0)).collect();
        sizes.extend(&tr.send_sizes);
        let facts = vec![
            "every rank holds this one communicator (a training job builds several groups per rank)".to_string(),
            format!("{} distinct message sizes, one kind is {:.0}% of the ops", sizes.len(), 100.0 * top),
        ];
        return (Strategy::Benchmark, if top >= 0.9 { 0.9 } else { 0.7 }, facts);
    }
    if tr.max_bytes <= 64 {
        let (s, why) = if n >= world {
            (Strategy::World, format!("all {world} ranks"))
        } else {
            (Strategy::ModelParallel, format!("{n} of {world} ranks (grad-norm reduction of one model replica)"))
        };
        return (s, 0.8, vec![format!("control traffic only: every message ≤ 64 B; {why}")]);
    }
    let p2p = tr.share(&[OpKind::Send, OpKind::Recv, OpKind::SendRecv]);
    // Two stages share the embedding group's members with their pipeline group: only the
    // collective one of the two is the embedding group.
    if class == Some(Parallelism::Embedding) && p2p < 0.5 {
        let ar = tr.share(&[OpKind::AllReduce]);
        return (Strategy::Embedding, 0.6 + 0.3 * ar, vec![format!("first and last rank of a pipeline; {:.0}% AllReduce (tied embedding grads)", 100.0 * ar)]);
    }
    let gs = tr.share(&[OpKind::AllGather, OpKind::ReduceScatter]);
    let mut cands = if p2p >= 0.5 {
        p2p_candidates(tr, n)
    } else if gs >= 0.5 {
        gather_scatter_candidates(tr, stride1)
    } else {
        all_reduce_candidates(tr, stride1, busiest)
    };
    cands.sort_by(|a, b| b.score().total_cmp(&a.score()));
    let best = &cands[0];
    let mut evidence: Vec<String> = best.facts.iter().filter(|f| f.1).map(|f| f.2.clone()).collect();
    evidence.extend(best.facts.iter().filter(|f| !f.1).map(|f| format!("not seen: {}", f.2)));
    if let Some(second) = cands.get(1) {
        evidence.push(format!("runner-up {} scores {:.2}", second.strategy, second.score()));
    }
    let strategy = if best.score() < 0.5 { Strategy::Unknown } else { best.strategy };
    (strategy, best.score(), evidence)
}
