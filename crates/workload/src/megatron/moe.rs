//! Mixture-of-experts token dispatch on the expert-parallel (EP) group.
//!
//! Owns the routing of tokens to EP ranks (deterministic per EP group, layer, microbatch and
//! iteration, so every member computes the same matrix) and the calls of Megatron's two token
//! dispatchers around an MoE layer's expert computation:
//! - `alltoall` (`MoEAlltoAllTokenDispatcher`): forward an AllGather of the per-expert token
//!   counts (int64, `num_experts` per rank), the dispatch all-to-all and the combine
//!   all-to-all; backward the two all-to-alls in reverse. Each all-to-all is PyTorch's
//!   `all_to_all_single` with uneven splits, which NCCL runs as one group of `Send`/`Recv`
//!   per peer ([`Peer::Rank`]), the rank itself included, zero-sized splits skipped
//!   (`all2all_single_unequal_split`). The splits differ per rank, so these programs differ
//!   per rank too.
//! - `allgather` (`MoEAllGatherTokenDispatcher`): forward AllGather of the routing map (bool,
//!   passed as uint8), the routing probabilities (fp32) and the hidden states (bf16), then a
//!   ReduceScatter of the expert output; backward AllGather of the output gradient and
//!   ReduceScatter of the hidden-state and probability gradients (4 AllGather + 3
//!   ReduceScatter per layer and microbatch).

use super::config::MoeDispatcher;
use super::traffic::Builder;
use crate::{GroupKind, P2pCall, Peer};
use commlens_core::{DataType, OpKind, RedOp};

/// SplitMix64's finaliser: the routing's hash (bit-identical to `commlens-synth`'s).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Tokens that EP rank `i` sends to EP rank `j` (`m[i][j]`): each rank routes `tokens · topk`
/// token copies with uneven, sometimes zero, shares per destination (as a router does).
pub fn routing(seed: u64, n: usize, tokens: u64, topk: usize) -> Vec<Vec<u64>> {
    let total = tokens * topk as u64;
    (0..n)
        .map(|i| {
            let mut w: Vec<u64> =
                (0..n).map(|j| mix64(seed ^ ((i * n + j + 1) as u64).wrapping_mul(0x9e37_79b9)) % 8).collect();
            if w.iter().all(|&x| x == 0) {
                w.iter_mut().for_each(|x| *x = 1);
            }
            let sum: u64 = w.iter().sum();
            let mut row: Vec<u64> = w.iter().map(|&x| total * x / sum).collect();
            let heaviest = (0..n).max_by_key(|&j| (w[j], std::cmp::Reverse(j))).unwrap_or(0);
            row[heaviest] += total - row.iter().sum::<u64>();
            row
        })
        .collect()
}

impl Builder<'_> {
    /// Tokens of this rank entering an MoE layer (sequence-sharded under sequence parallelism).
    fn moe_tokens(&self) -> u64 {
        let sp = if self.cfg.sequence_parallel { self.cfg.tp as u64 } else { 1 };
        self.tokens() / sp
    }

    /// One uneven all-to-all on the EP group: `forward` sends row `me` of the routing matrix,
    /// otherwise the transposed exchange (results or gradients travelling back).
    fn all_to_all(&mut self, layer: usize, mb: usize, forward: bool, tag: u64) {
        let Some(ep) = self.ep else { return };
        let seed = mix64(mix64(mix64(self.cfg.seed ^ ep.group as u64) ^ layer as u64) ^ (mb * 1_000_003 + self.iter) as u64);
        let m = routing(seed, ep.n, self.moe_tokens(), self.cfg.moe_topk);
        let h = self.cfg.hidden as u64;
        let mut calls = Vec::new();
        // PyTorch posts, per peer in rank order, the Send and then the Recv.
        for (peer, from_peer) in m.iter().enumerate() {
            let (to_peer, from_peer) = (m[ep.me][peer], from_peer[ep.me]);
            let (send, recv) = if forward { (to_peer, from_peer) } else { (from_peer, to_peer) };
            for (is_send, tokens) in [(true, send), (false, recv)] {
                if tokens > 0 {
                    calls.push(P2pCall {
                        send: is_send,
                        peer: Peer::Rank(peer as u32),
                        count: tokens * h,
                        dtype: DataType::Bfloat16,
                        tag: tag + is_send as u64,
                    });
                }
            }
        }
        self.p2p(GroupKind::Ep, calls);
    }

    fn ep_coll(&mut self, op: OpKind, count: u64, dtype: DataType, tag: u64) {
        let redop = (op == OpKind::ReduceScatter).then_some(RedOp::Sum);
        self.coll(GroupKind::Ep, op, count, dtype, redop, tag);
    }

    /// Forward token dispatch before the experts of `layer`.
    pub(crate) fn moe_dispatch(&mut self, layer: usize, mb: usize) {
        let (t, h, e) = (self.moe_tokens(), self.cfg.hidden as u64, self.cfg.num_experts as u64);
        match self.cfg.moe_dispatcher {
            MoeDispatcher::AllToAll => {
                self.ep_coll(OpKind::AllGather, e, DataType::Int64, 0x900);
                self.all_to_all(layer, mb, true, 0x910);
            }
            MoeDispatcher::AllGather => {
                self.ep_coll(OpKind::AllGather, t * e, DataType::Uint8, 0x940);
                self.ep_coll(OpKind::AllGather, t * e, DataType::Float32, 0x941);
                self.ep_coll(OpKind::AllGather, t * h, DataType::Bfloat16, 0x942);
            }
        }
    }

    /// Forward combine of the expert outputs of `layer`.
    pub(crate) fn moe_combine(&mut self, layer: usize, mb: usize) {
        match self.cfg.moe_dispatcher {
            MoeDispatcher::AllToAll => self.all_to_all(layer, mb, false, 0x920),
            MoeDispatcher::AllGather => {
                let n = self.moe_tokens() * self.cfg.hidden as u64;
                self.ep_coll(OpKind::ReduceScatter, n, DataType::Bfloat16, 0x948);
            }
        }
    }

    /// Backward of the combine: output gradients go to the experts.
    pub(crate) fn moe_combine_backward(&mut self, layer: usize, mb: usize) {
        match self.cfg.moe_dispatcher {
            MoeDispatcher::AllToAll => self.all_to_all(layer, mb, true, 0x930),
            MoeDispatcher::AllGather => {
                let n = self.moe_tokens() * self.cfg.hidden as u64;
                self.ep_coll(OpKind::AllGather, n, DataType::Bfloat16, 0x950);
            }
        }
    }

    /// Backward of the dispatch: input gradients return to the tokens' ranks.
    pub(crate) fn moe_dispatch_backward(&mut self, layer: usize, mb: usize) {
        let (t, h, e) = (self.moe_tokens(), self.cfg.hidden as u64, self.cfg.num_experts as u64);
        match self.cfg.moe_dispatcher {
            MoeDispatcher::AllToAll => self.all_to_all(layer, mb, false, 0x938),
            MoeDispatcher::AllGather => {
                self.ep_coll(OpKind::ReduceScatter, t * h, DataType::Bfloat16, 0x958);
                self.ep_coll(OpKind::ReduceScatter, t * e, DataType::Float32, 0x959);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_conserves_tokens_and_is_uneven() {
        let m = routing(7, 4, 1024, 2);
        for row in &m {
            assert_eq!(row.iter().sum::<u64>(), 2048);
        }
        let flat: Vec<u64> = m.iter().flatten().copied().collect();
        assert!(flat.iter().any(|&x| x != flat[0]), "shares differ: {flat:?}");
        assert_eq!(routing(7, 4, 1024, 2), m, "deterministic");
        assert_ne!(routing(8, 4, 1024, 2), m);
    }
}
