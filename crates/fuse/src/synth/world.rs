//! All ranks of a generated run stepped together ([`run_world`]), so that a
//! collective's kernels end together on its members as they do in NCCL (no
//! member finishes before the last one has arrived), and which communicators
//! are synchronised that way ([`group_of`]).

use super::gpu_sim::{Pending, Sim, Step, DP, MP, TP};
use super::megatron::{MegatronConfig, RankTrace};

/// Logical id of rank `rank`'s communicator `c` (the same on every member)
/// and its members, when its collectives are synchronised across ranks: TP,
/// DP, and the model-parallel group when every stage calls it alike (PP ≤ 2).
/// Point-to-point groups are not (each SendRecv kernel is simulated alone).
pub(super) fn group_of(cfg: &MegatronConfig, rank: usize, c: usize) -> (u64, Option<Vec<usize>>) {
    let mp = cfg.tp * cfg.pp;
    let (leader, members): (usize, Option<Vec<usize>>) = match c {
        TP => {
            let base = rank - rank % cfg.tp;
            (base, Some((base..base + cfg.tp).collect()))
        }
        DP => {
            let base = rank % mp;
            (base, Some((0..cfg.dp).map(|d| base + d * mp).collect()))
        }
        MP => {
            let base = rank - rank % mp;
            (base, (cfg.pp <= 2).then(|| (base..base + mp).collect()))
        }
        _ => {
            // A pipeline neighbour pair: named by its lower stage.
            (rank, None)
        }
    };
    (((c as u64) << 32) | leader as u64, members)
}

/// Runs every rank's program together. A rank runs until a synchronised
/// collective's kernel has started; the kernel ends when every member that
/// runs it has started it (members that logged it without a kernel, or that
/// are done, do not hold it), plus the rank's own transfer time. Ranks are
/// visited in turn until all are done; deterministic in the seed.
pub(super) fn run_world<'p>(
    cfg: &MegatronConfig,
    world: usize,
    program: &dyn Fn(usize) -> &'p [Step],
) -> Vec<RankTrace> {
    use std::collections::HashMap;
    let mut sims: Vec<Sim> = (0..world).map(|r| Sim::new(cfg, r)).collect();
    let mut pc = vec![0usize; world];
    // Per rank: the kernel waiting for its end, and its board key.
    let mut waiting: Vec<Option<(Pending, (u64, u64))>> = (0..world).map(|_| None).collect();
    let groups: Vec<Vec<(u64, Option<Vec<usize>>)>> = (0..world)
        .map(|r| (0..4).map(|c| group_of(cfg, r, c)).collect())
        .collect();
    let mut calls = vec![[0u64; 4]; world];
    // (group, call) → (members that arrived, latest start, members finished).
    let mut board: HashMap<(u64, u64), (usize, i64, usize)> = HashMap::new();
    loop {
        let mut progress = false;
        for r in 0..world {
            loop {
                if let Some((p, key)) = waiting[r].take() {
                    let members = groups[r][p.c].1.as_deref().unwrap_or(&[]);
                    // Members done before reaching this call never will.
                    let gone = members
                        .iter()
                        .filter(|&&m| sims[m].done() && calls[m][p.c] <= key.1)
                        .count();
                    let &(arrived, latest, _) = &board[&key];
                    if arrived + gone < members.len() {
                        waiting[r] = Some((p, key));
                        break;
                    }
                    let end = latest.max(p.start) + p.dur;
                    sims[r].complete(p, end);
                    let e = board.get_mut(&key).expect("posted");
                    e.2 += 1;
                    if arrived + gone == members.len() && e.2 == arrived {
                        board.remove(&key);
                    }
                    progress = true;
                    continue;
                }
                if sims[r].done() {
                    break;
                }
                let steps = program(r);
                let step = &steps[pc[r]];
                pc[r] = (pc[r] + 1) % steps.len();
                progress = true;
                match *step {
                    Step::Coll {
                        c,
                        kind,
                        dtype,
                        redop,
                        count,
                        blocking,
                    } => {
                        let p = sims[r].coll(c, kind, dtype, redop, count, blocking);
                        let (gid, ref members) = groups[r][c];
                        if members.is_none() {
                            if let Some(p) = p {
                                let end = p.start + p.dur;
                                sims[r].complete(p, end);
                            }
                            continue;
                        }
                        let key = (gid, calls[r][c]);
                        calls[r][c] += 1;
                        let e = board.entry(key).or_insert((0, i64::MIN, 0));
                        e.0 += 1;
                        match p {
                            Some(p) => {
                                e.1 = e.1.max(p.start);
                                waiting[r] = Some((p, key));
                            }
                            None => e.2 += 1,
                        }
                    }
                    Step::P2p(ref parts) => sims[r].p2p(parts),
                    Step::Compute => sims[r].compute(),
                    Step::Sync => sims[r].sync(),
                }
            }
        }
        if !progress {
            break;
        }
    }
    sims.into_iter().map(Sim::finish).collect()
}
