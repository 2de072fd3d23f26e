//! Megatron-LM's interleaved 1F1B pipeline schedule (virtual pipeline stages).
//!
//! Owns the order of forward passes, backward passes and batched p2p calls of one stage when
//! it holds `v > 1` model chunks (`forward_backward_pipelining_with_interleaving` in
//! `megatron/core/pipeline_parallel/schedules.py`, without p2p/compute overlap), and its
//! translation into [`Step`]s. Model chunk `k` of stage `s` is the model's chunk `k * pp + s`,
//! so activations leave the last stage towards the first one: the p2p peers wrap around the
//! pipeline group (`(s ± 1) mod pp`), which the plain schedule never does.

use crate::traffic::{Chunk, Ctx, P2pCall, Step, BFLOAT16};

/// One action of a stage's iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Forward { chunk: usize, mb: usize },
    Backward { chunk: usize, mb: usize },
    /// One `batch_isend_irecv` (Megatron posts the ops in this field order).
    P2p { send_prev: bool, recv_prev: bool, send_next: bool, recv_next: bool, mb: usize },
}

fn p2p(send_prev: bool, recv_prev: bool, send_next: bool, recv_next: bool, mb: usize) -> Option<Action> {
    (send_prev || recv_prev || send_next || recv_next).then_some(Action::P2p { send_prev, recv_prev, send_next, recv_next, mb })
}

/// The actions of `stage` (of `pp`) with `v` chunks and `m` microbatches (a multiple of `pp`).
pub(crate) fn schedule(pp: usize, stage: usize, v: usize, m: usize) -> Vec<Action> {
    let total = m * v;
    let group = (pp * v) as isize;
    // Python's `%` on negative ids (the first/last stage look pp-1 microbatches back).
    let chunk_of = |k: isize, forward: bool| {
        let c = (k.rem_euclid(group) / pp as isize) as usize;
        if forward {
            c
        } else {
            v - 1 - c
        }
    };
    let mb_of = |k: usize| (k / (pp * v)) * pp + k % pp;
    let (first, last) = (stage == 0, stage + 1 == pp);
    let warmup = ((pp - stage - 1) * 2 + (v - 1) * pp).min(total);
    let remaining = total - warmup;
    let mut out = Vec::new();
    let mut push = |a: Option<Action>| out.extend(a);
    push(p2p(false, !first, false, false, 0));
    for k in 0..warmup {
        let chunk = chunk_of(k as isize, true);
        push(Some(Action::Forward { chunk, mb: mb_of(k) }));
        let recv_prev = !(first && chunk_of(k as isize + 1, true) == 0) && k + 1 != total;
        let send_next = !(last && chunk == v - 1);
        if k + 1 == warmup && remaining > 0 {
            push(p2p(false, recv_prev, send_next, !last, mb_of(k)));
        } else {
            push(p2p(false, recv_prev, send_next, false, mb_of(k)));
        }
    }
    for k in 0..remaining {
        let fk = k + warmup;
        let (fchunk, bchunk) = (chunk_of(fk as isize, true), chunk_of(k as isize, false));
        push(Some(Action::Forward { chunk: fchunk, mb: mb_of(fk) }));
        push(Some(Action::Backward { chunk: bchunk, mb: mb_of(k) }));
        let send_next = !(last && fchunk == v - 1);
        let send_prev = !(first && bchunk == 0);
        let mut recv_prev = !(first && chunk_of(fk as isize - (pp as isize - 1), true) == v - 1);
        let recv_next = !(last && chunk_of(k as isize - (pp as isize - 1), false) == 0);
        if k + 1 == remaining {
            recv_prev = false;
        }
        push(p2p(send_prev, recv_prev, send_next, recv_next, mb_of(fk)));
    }
    if remaining == 0 {
        push(p2p(false, false, false, !last, 0));
    }
    for k in remaining..total {
        let chunk = chunk_of(k as isize, false);
        push(Some(Action::Backward { chunk, mb: mb_of(k) }));
        let recv_next = !(last && chunk_of(k as isize + 1, false) == v - 1) && k + 1 != total;
        push(p2p(!(first && chunk == 0), false, false, recv_next, mb_of(k)));
    }
    out
}

impl Ctx<'_> {
    /// The chunk `k` of this rank's stage.
    fn model_chunk(&self, k: usize) -> Chunk {
        let (pp, v, lpc) = (self.cfg.pp, self.cfg.virtual_stages, self.cfg.layers_per_chunk());
        let stage = self.rank_stage();
        Chunk {
            first: stage == 0 && k == 0,
            last: stage + 1 == pp && k + 1 == v,
            local0: k * lpc,
            global0: (k * pp + stage) * lpc,
            layers: lpc,
        }
    }

    /// One iteration under the interleaved schedule.
    pub(crate) fn interleaved_iteration(&mut self) {
        let (pp, v) = (self.cfg.pp, self.cfg.virtual_stages);
        let stage = self.rank_stage();
        for a in schedule(pp, stage, v, self.cfg.num_microbatches) {
            match a {
                Action::Forward { chunk, mb } => self.forward(mb, self.model_chunk(chunk)),
                Action::Backward { chunk, mb } => self.backward(mb, self.model_chunk(chunk)),
                Action::P2p { send_prev, recv_prev, send_next, recv_next, mb } => {
                    let Some(comm) = self.pp else { continue };
                    let (prev, next) = ((stage + pp - 1) % pp, (stage + 1) % pp);
                    let count = self.act() / self.cfg.tp as u64;
                    let ops = [(send_prev, true, prev, false), (recv_prev, false, prev, false), (send_next, true, next, true), (recv_next, false, next, true)];
                    let calls = ops
                        .iter()
                        .filter(|o| o.0)
                        .map(|&(_, send, peer, towards_next)| P2pCall {
                            send,
                            peer,
                            count,
                            dtype: BFLOAT16,
                            tag: 0x500 + (send as u64) * 4 + (towards_next as u64) * 2 + (mb as u64 & 1),
                        })
                        .collect();
                    self.steps.push(Step::P2p(comm, calls));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (forward passes, backward passes, sends to prev, recvs from prev, sends to next, recvs from next).
    fn tally(a: &[Action]) -> [usize; 6] {
        let mut t = [0; 6];
        for x in a {
            match *x {
                Action::Forward { .. } => t[0] += 1,
                Action::Backward { .. } => t[1] += 1,
                Action::P2p { send_prev, recv_prev, send_next, recv_next, .. } => {
                    t[2] += send_prev as usize;
                    t[3] += recv_prev as usize;
                    t[4] += send_next as usize;
                    t[5] += recv_next as usize;
                }
            }
        }
        t
    }

    #[test]
    fn every_send_has_a_receive_on_the_wrapped_neighbour() {
        for (pp, v, m) in [(4, 2, 4), (4, 2, 8), (2, 2, 4), (3, 3, 6), (4, 4, 8)] {
            let t: Vec<[usize; 6]> = (0..pp).map(|s| tally(&schedule(pp, s, v, m))).collect();
            for s in 0..pp {
                let next = (s + 1) % pp;
                assert_eq!(t[s][0], m * v, "every chunk runs every microbatch forward");
                assert_eq!(t[s][1], m * v);
                // activations s -> s+1 and gradients s+1 -> s, wrapping from the last stage
                assert_eq!(t[s][4], t[next][3], "pp {pp} v {v} m {m} stage {s}");
                assert_eq!(t[next][2], t[s][5], "pp {pp} v {v} m {m} stage {s}");
            }
            // Chunks hand over across the wrap: (v - 1) * m activations per direction.
            assert_eq!(t[pp - 1][4], (v - 1) * m);
            assert_eq!(t[0][4], v * m);
        }
    }
}
