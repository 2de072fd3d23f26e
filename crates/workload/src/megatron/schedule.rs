//! Pipeline schedules: the order of forward passes, backward passes and batched p2p calls of
//! one pipeline stage in one iteration.
//!
//! Owns Megatron's non-interleaved 1F1B (`forward_backward_pipelining_without_interleaving`:
//! warm-up, steady state, cool-down), all-forward-all-backward (GPipe-like) and the
//! interleaved 1F1B of virtual stages (`forward_backward_pipelining_with_interleaving`,
//! without p2p/compute overlap). Under interleaving model chunk `k` of stage `s` is the model's
//! chunk `k · pp + s`, so activations leave the last stage towards the first one: the p2p
//! peers wrap around the pipeline group, which the plain schedules never do. Every p2p call
//! here names only neighbours that exist (the first stage has no previous one in the plain
//! schedules).

use super::config::Schedule;

/// One Send or Recv of a batched p2p call: `(send, towards_next)`.
pub type P2pOp = (bool, bool);

/// One action of a stage's iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Forward { chunk: usize, mb: usize },
    Backward { chunk: usize, mb: usize },
    /// One `batch_isend_irecv` with its Send/Recv in posting order; never empty.
    P2p { ops: Vec<P2pOp>, mb: usize },
}

/// The actions of `stage` (of `pp`) with `v` model chunks per stage and `m` microbatches.
pub fn stage_schedule(schedule: Schedule, pp: usize, stage: usize, v: usize, m: usize) -> Vec<Action> {
    if v > 1 {
        interleaved(pp, stage, v, m)
    } else {
        plain(schedule, pp, stage, m)
    }
}

/// The plain schedules (one chunk per stage).
fn plain(schedule: Schedule, pp: usize, stage: usize, m: usize) -> Vec<Action> {
    let mut out = Vec::new();
    let p2p = |out: &mut Vec<Action>, ops: &[P2pOp], mb: usize| {
        let ops: Vec<P2pOp> =
            ops.iter().copied().filter(|&(_, next)| if next { stage + 1 < pp } else { stage > 0 }).collect();
        if !ops.is_empty() {
            out.push(Action::P2p { ops, mb });
        }
    };
    const RECV_FWD: &[P2pOp] = &[(false, false)];
    const SEND_FWD: &[P2pOp] = &[(true, true)];
    const RECV_BWD: &[P2pOp] = &[(false, true)];
    const SEND_BWD: &[P2pOp] = &[(true, false)];
    const SEND_FWD_RECV_BWD: &[P2pOp] = &[(true, true), (false, true)];
    const SEND_BWD_RECV_FWD: &[P2pOp] = &[(true, false), (false, false)];
    let fwd = |mb| Action::Forward { chunk: 0, mb };
    let bwd = |mb| Action::Backward { chunk: 0, mb };
    match schedule {
        Schedule::AllForwardAllBackward => {
            for i in 0..m {
                p2p(&mut out, RECV_FWD, i);
                out.push(fwd(i));
                p2p(&mut out, SEND_FWD, i);
            }
            for i in 0..m {
                p2p(&mut out, RECV_BWD, i);
                out.push(bwd(i));
                p2p(&mut out, SEND_BWD, i);
            }
        }
        Schedule::OneFOneB => {
            let warmup = (pp - stage - 1).min(m);
            let remaining = m - warmup;
            for i in 0..warmup {
                p2p(&mut out, RECV_FWD, i);
                out.push(fwd(i));
                p2p(&mut out, SEND_FWD, i);
            }
            if remaining > 0 {
                p2p(&mut out, RECV_FWD, warmup);
            }
            for i in 0..remaining {
                out.push(fwd(warmup + i));
                p2p(&mut out, SEND_FWD_RECV_BWD, warmup + i);
                out.push(bwd(i));
                if i + 1 == remaining {
                    p2p(&mut out, SEND_BWD, i);
                } else {
                    p2p(&mut out, SEND_BWD_RECV_FWD, i + 1 + warmup);
                }
            }
            for i in 0..warmup {
                p2p(&mut out, RECV_BWD, remaining + i);
                out.push(bwd(remaining + i));
                p2p(&mut out, SEND_BWD, remaining + i);
            }
        }
    }
    out
}

/// A p2p action from Megatron's four flags, posted in the order send-prev, recv-prev,
/// send-next, recv-next; `None` when no flag is set.
fn flags(send_prev: bool, recv_prev: bool, send_next: bool, recv_next: bool, mb: usize) -> Option<Action> {
    let ops: Vec<P2pOp> = [(send_prev, (true, false)), (recv_prev, (false, false)), (send_next, (true, true)), (recv_next, (false, true))]
        .into_iter()
        .filter(|o| o.0)
        .map(|o| o.1)
        .collect();
    (!ops.is_empty()).then_some(Action::P2p { ops, mb })
}

/// The interleaved 1F1B of `v > 1` chunks; `m` is a multiple of `pp`.
fn interleaved(pp: usize, stage: usize, v: usize, m: usize) -> Vec<Action> {
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
    push(flags(false, !first, false, false, 0));
    for k in 0..warmup {
        let chunk = chunk_of(k as isize, true);
        push(Some(Action::Forward { chunk, mb: mb_of(k) }));
        let recv_prev = !(first && chunk_of(k as isize + 1, true) == 0) && k + 1 != total;
        let send_next = !(last && chunk == v - 1);
        if k + 1 == warmup && remaining > 0 {
            push(flags(false, recv_prev, send_next, !last, mb_of(k)));
        } else {
            push(flags(false, recv_prev, send_next, false, mb_of(k)));
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
        push(flags(send_prev, recv_prev, send_next, recv_next, mb_of(fk)));
    }
    if remaining == 0 {
        push(flags(false, false, false, !last, 0));
    }
    for k in remaining..total {
        let chunk = chunk_of(k as isize, false);
        push(Some(Action::Backward { chunk, mb: mb_of(k) }));
        let recv_next = !(last && chunk_of(k as isize + 1, false) == v - 1) && k + 1 != total;
        push(flags(!(first && chunk == 0), false, false, recv_next, mb_of(k)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (forward passes, backward passes, sends to prev, recvs from prev, sends to next, recvs from next).
    fn tally(a: &[Action]) -> [usize; 6] {
        let mut t = [0; 6];
        for x in a {
            match x {
                Action::Forward { .. } => t[0] += 1,
                Action::Backward { .. } => t[1] += 1,
                Action::P2p { ops, .. } => {
                    for &(send, next) in ops {
                        t[2 + 2 * next as usize + !send as usize] += 1;
                    }
                }
            }
        }
        t
    }

    #[test]
    fn every_send_has_a_receive_on_the_neighbour() {
        for (pp, v, m) in [(4, 2, 4), (4, 2, 8), (2, 2, 4), (3, 3, 6), (4, 4, 8), (4, 1, 6), (3, 1, 2), (2, 1, 1)] {
            for sched in [Schedule::OneFOneB, Schedule::AllForwardAllBackward] {
                let t: Vec<[usize; 6]> = (0..pp).map(|s| tally(&stage_schedule(sched, pp, s, v, m))).collect();
                for s in 0..pp {
                    let next = (s + 1) % pp;
                    assert_eq!((t[s][0], t[s][1]), (m * v, m * v), "every chunk runs every microbatch");
                    assert_eq!(t[s][4], t[next][3], "pp {pp} v {v} m {m} stage {s}");
                    assert_eq!(t[next][2], t[s][5], "pp {pp} v {v} m {m} stage {s}");
                }
                // Chunks hand over across the wrap: (v - 1) · m activations per direction.
                assert_eq!(t[pp - 1][4], (v - 1) * m);
                if v > 1 {
                    break; // the interleaved schedule has one form
                }
            }
        }
    }
}
