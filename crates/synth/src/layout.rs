//! Process layout and communicators: who runs where and which groups exist.
//!
//! Owns the mapping global rank -> (host, pid, CUDA device, bus id, tp/pp/dp coordinates) and
//! the Megatron-LM process groups turned into NCCL communicators, with their commIds, member
//! order and per-process `comm`/`stream` pointers.
//!
//! Rank order is Megatron's default `tp-dp-pp`: `rank = t + tp * (d + dp * p)`. The groups,
//! their members, names and creation order are the shared Megatron model's
//! (`commlens_workload::megatron::groups`: WORLD, DP, MP, TP, PP, EMB, then EP and EDP); every
//! process creates one communicator per group in that order, so communicator `i` is the
//! workload's group `i`.

use crate::config::RunConfig;
use crate::rng::SplitMix64;

/// PCI bus ids of the GPUs of one node (DGX/HGX A100-like), as NCCL prints them (`%lx`).
const GPU_BUS_IDS: [u64; 8] = [
    0x7000, 0xf000, 0x47000, 0x4e000, 0x87000, 0x90000, 0xb7000, 0xbd000,
];
/// PCI bus id of the node's InfiniBand NIC.
pub(crate) const NIC_BUS_ID: u64 = 0xe1000;

/// One process (= one GPU = one global rank).
#[derive(Clone, Debug)]
pub(crate) struct Proc {
    pub rank: usize,
    pub host: String,
    pub node: usize,
    pub local_rank: usize,
    pub pid: u32,
    pub tp_rank: usize,
    pub pp_rank: usize,
    pub dp_rank: usize,
    /// CUDA device = NVML device = local rank (torchrun + `torch.cuda.set_device(local_rank)`).
    pub dev: usize,
    pub bus_id: u64,
    pub ip: String,
    /// Base of device allocations (PyTorch caching allocator, `0x7f..`).
    pub dev_base: u64,
}

/// Kind of Megatron process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum GroupKind {
    World,
    Dp,
    Mp,
    Tp,
    Pp,
    Emb,
    /// Expert-parallel group (MoE token dispatch).
    Ep,
    /// Expert data-parallel group (gradients of the expert weights).
    ExpDp,
}

impl GroupKind {
    /// The synth kind of a shared-model group kind (the Megatron front end makes no others).
    pub fn of(kind: commlens_workload::GroupKind) -> GroupKind {
        use commlens_workload::GroupKind as W;
        match kind {
            W::World => GroupKind::World,
            W::Dp => GroupKind::Dp,
            W::Mp => GroupKind::Mp,
            W::Tp => GroupKind::Tp,
            W::Pp => GroupKind::Pp,
            W::Embedding => GroupKind::Emb,
            W::Ep => GroupKind::Ep,
            W::DpEp => GroupKind::ExpDp,
            other => panic!("the Megatron front end makes no {other:?} group"),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            GroupKind::World => "WORLD",
            GroupKind::Dp => "DP",
            GroupKind::Mp => "MP",
            GroupKind::Tp => "TP",
            GroupKind::Pp => "PP",
            GroupKind::Emb => "EMB",
            GroupKind::Ep => "EP",
            GroupKind::ExpDp => "EDP",
        }
    }

    /// The strategy whose traffic this group carries under `cfg`, as the truth names it.
    pub fn strategy(self, cfg: &RunConfig) -> &'static str {
        use crate::config::MoeDispatcher;
        match self {
            GroupKind::World => "world",
            GroupKind::Dp | GroupKind::ExpDp if cfg.distributed_optimizer => "dp-zero1",
            GroupKind::Dp | GroupKind::ExpDp => "dp",
            GroupKind::Mp => "mp",
            GroupKind::Tp if cfg.sequence_parallel => "tp-sp",
            GroupKind::Tp => "tp",
            GroupKind::Pp if cfg.virtual_stages > 1 => "pp-vpp",
            GroupKind::Pp => "pp",
            GroupKind::Emb => "emb",
            GroupKind::Ep => match cfg.moe_dispatcher {
                MoeDispatcher::AllToAll => "ep-a2a",
                MoeDispatcher::AllGather => "ep-allgather",
            },
        }
    }
}

/// One NCCL communicator (one Megatron group instance).
#[derive(Clone, Debug)]
pub(crate) struct Comm {
    pub name: String,
    pub kind: GroupKind,
    pub comm_id: u64,
    /// Global ranks in comm-rank order.
    pub members: Vec<usize>,
    /// `comm 0x...` pointer of each member (same order as `members`).
    pub ptrs: Vec<u64>,
    /// NCCL stream of each member (PyTorch uses one stream per group and device).
    pub streams: Vec<u64>,
    pub n_nodes: usize,
    /// Collective channels.
    pub channels: usize,
    /// Comm ranks of the members on each node, ascending, keyed by node (sorted): a member's
    /// node-local peers without a scan of all members.
    pub by_node: Vec<(usize, Vec<usize>)>,
    /// `(global rank, comm rank)` sorted by global rank, for [`Comm::crank`].
    pub by_global: Vec<(usize, usize)>,
}

impl Comm {
    pub fn nranks(&self) -> usize {
        self.members.len()
    }

    /// Comm rank of a global rank (panics if not a member).
    pub fn crank(&self, global: usize) -> usize {
        let i = self
            .by_global
            .binary_search_by_key(&global, |&(g, _)| g)
            .expect("rank is a member of the comm");
        self.by_global[i].1
    }

    /// Comm ranks of the members on `node`, ascending (empty when none).
    pub fn cranks_on(&self, node: usize) -> &[usize] {
        match self.by_node.binary_search_by_key(&node, |(n, _)| *n) {
            Ok(i) => &self.by_node[i].1,
            Err(_) => &[],
        }
    }

    /// Whether the communicator spans more than one node.
    pub fn inter_node(&self) -> bool {
        self.n_nodes > 1
    }

    /// P2P channels and p2p channels per peer of the channel summary line.
    pub fn p2p_channels(&self) -> (usize, usize) {
        let p2p = self.channels.next_power_of_two();
        let per_peer = if self.nranks() <= 2 {
            p2p
        } else {
            (p2p / self.nranks()).max(2)
        };
        (p2p, per_peer)
    }
}

/// Everything about who runs where.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub procs: Vec<Proc>,
    pub comms: Vec<Comm>,
    /// For each global rank, its communicators in creation order (indices into `comms`).
    pub proc_comms: Vec<Vec<usize>>,
}

impl Layout {
    pub fn build(cfg: &RunConfig, rng: &mut SplitMix64) -> Layout {
        let world = cfg.world();
        let gpn = cfg.gpus_per_node;
        let mut procs = Vec::with_capacity(world);
        let mut node_pid = 0u32;
        for rank in 0..world {
            let node = rank / gpn;
            let local_rank = rank % gpn;
            if local_rank == 0 {
                node_pid = 100_000 + rng.below(3_000_000) as u32;
            } else {
                // torchrun forks workers one after another; keep room for their threads' tids.
                node_pid += 150 + rng.below(60) as u32;
            }
            let tp_rank = rank % cfg.tp;
            let dp_rank = (rank / cfg.tp) % cfg.dp;
            let pp_rank = rank / (cfg.tp * cfg.dp);
            let bus_id = if local_rank < GPU_BUS_IDS.len() {
                GPU_BUS_IDS[local_rank]
            } else {
                0x1000 * (0x100 + 0x10 * local_rank as u64) + 0x7000
            };
            let dev_base = 0x7f00_0000_0000 + (rng.below(0xf0) << 32) + (rng.below(0x40) << 26);
            procs.push(Proc {
                rank,
                host: format!("{}{:02}", cfg.host_prefix, node),
                node,
                local_rank,
                pid: node_pid,
                tp_rank,
                pp_rank,
                dp_rank,
                dev: local_rank,
                bus_id,
                ip: format!("10.0.{}.{}", node / 200, node % 200 + 11),
                dev_base,
            });
        }

        // The shared Megatron model's groups, in its creation order: comm `i` is group `i`.
        let groups = commlens_workload::megatron::groups::groups(&cfg.program_config());

        // Per-process heap base for `comm`/`stream` pointers (glibc heap, `0x55..`/`0x56..`).
        let heap: Vec<u64> = (0..world)
            .map(|_| 0x5500_0000_0000 + (rng.below(0x1_8000_0000) << 4))
            .collect();
        let mut next_obj = vec![0u64; world];
        let mut comms = Vec::with_capacity(groups.len());
        let mut proc_comms = vec![Vec::new(); world];
        for group in groups {
            let kind = GroupKind::of(group.kind);
            let members: Vec<usize> = group.ranks.iter().map(|&r| r as usize).collect();
            // Bit 60 set: always 16 hex digits, like `commId 0x54fe282d32a87d85`.
            let comm_id = rng.next_u64() | (1 << 60);
            let mut ptrs = Vec::with_capacity(members.len());
            let mut streams = Vec::with_capacity(members.len());
            for &m in &members {
                next_obj[m] += 1;
                let slot = next_obj[m];
                ptrs.push(heap[m] + slot * 0x10_3a40 + (rng.below(0x400) << 4));
                streams
                    .push(heap[m] + 0x8000 + slot * 0x10_3a40 - 0x9_1c00 + (rng.below(0x100) << 4));
                proc_comms[m].push(comms.len());
            }
            let mut by_node: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
            for (cr, &m) in members.iter().enumerate() {
                by_node.entry(procs[m].node).or_default().push(cr);
            }
            let by_node: Vec<(usize, Vec<usize>)> = by_node.into_iter().collect();
            let n_nodes = by_node.len();
            let mut by_global: Vec<(usize, usize)> =
                members.iter().enumerate().map(|(cr, &m)| (m, cr)).collect();
            by_global.sort_unstable();
            let channels = if n_nodes > 1 {
                cfg.nccl_channels.min(4)
            } else {
                cfg.nccl_channels
            };
            comms.push(Comm {
                name: group.name,
                kind,
                comm_id,
                members,
                ptrs,
                streams,
                n_nodes,
                channels,
                by_node,
                by_global,
            });
        }
        Layout {
            procs,
            comms,
            proc_comms,
        }
    }

    /// The communicator of `kind` that `rank` belongs to, if any.
    pub fn comm_of(&self, rank: usize, kind: GroupKind) -> Option<usize> {
        self.proc_comms[rank]
            .iter()
            .copied()
            .find(|&c| self.comms[c].kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(cfg: &RunConfig) -> Layout {
        Layout::build(cfg, &mut SplitMix64::new(cfg.seed))
    }

    #[test]
    fn default_groups() {
        let l = layout(&RunConfig::default());
        let names: Vec<&str> = l.comms.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["WORLD", "TP0", "TP1", "PP0", "PP1", "EMB0", "EMB1"]);
        assert_eq!(l.comms[1].members, vec![0, 1]);
        assert_eq!(l.comms[3].members, vec![0, 2]);
        assert_eq!(l.comms[6].members, vec![1, 3]);
        assert_eq!(l.proc_comms[3].len(), 4);
        assert_eq!(l.procs[3].pp_rank, 1);
        assert_eq!(l.procs[3].tp_rank, 1);
    }

    #[test]
    fn expert_groups_are_carved_from_dp() {
        let cfg = RunConfig { ep: 2, num_experts: 4, ..RunConfig::megatron(2, 1, 4) };
        let l = layout(&cfg);
        // rank = t + 2*d; DP of t=1 is [1, 3, 5, 7]; EP splits it in [1, 3] and [5, 7].
        let ep = l.comm_of(5, GroupKind::Ep).unwrap();
        assert_eq!(l.comms[ep].members, vec![5, 7]);
        let edp = l.comm_of(5, GroupKind::ExpDp).unwrap();
        assert_eq!(l.comms[edp].members, vec![1, 5]);
        assert_eq!(l.comms.iter().filter(|c| c.kind == GroupKind::Ep).count(), 4);
        assert_eq!(GroupKind::Ep.strategy(&cfg), "ep-a2a");
        // ep = dp: one EP group per DP group, no expert-DP group (it would have one rank).
        let l = layout(&RunConfig { ep: 4, num_experts: 4, ..RunConfig::megatron(1, 1, 4) });
        assert_eq!(l.comm_of(0, GroupKind::Ep).map(|c| l.comms[c].members.clone()), Some(vec![0, 1, 2, 3]));
        assert!(l.comm_of(0, GroupKind::ExpDp).is_none());
    }

    #[test]
    fn three_d_groups() {
        let cfg = RunConfig::megatron(2, 2, 2);
        let l = layout(&cfg);
        // rank = t + 2*(d + 2*p)
        let dp = l.comm_of(5, GroupKind::Dp).unwrap();
        assert_eq!(l.comms[dp].members, vec![5, 7]);
        let mp = l.comm_of(2, GroupKind::Mp).unwrap();
        assert_eq!(l.comms[mp].members, vec![2, 3, 6, 7]);
        let pp = l.comm_of(3, GroupKind::Pp).unwrap();
        assert_eq!(l.comms[pp].members, vec![3, 7]);
        // ids distinct, pointers distinct per process
        let mut ids: Vec<u64> = l.comms.iter().map(|c| c.comm_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), l.comms.len());
        for r in 0..cfg.world() {
            let mut p: Vec<u64> = l.proc_comms[r]
                .iter()
                .map(|&c| l.comms[c].ptrs[l.comms[c].crank(r)])
                .collect();
            let n = p.len();
            p.sort_unstable();
            p.dedup();
            assert_eq!(p.len(), n);
        }
    }
}
