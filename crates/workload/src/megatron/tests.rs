//! Tests of the Megatron front end: program shape, sharing of programs, volumes.

use super::*;
use crate::{Peer, Work};
use commlens_core::{DataType, OpKind};

fn colls(p: &Program) -> Vec<&crate::CollCall> {
    p.tasks.iter().filter_map(|t| if let Work::Coll(c) = &t.work { Some(c) } else { None }).collect()
}

#[test]
fn tp_allreduces_and_p2p_balance() {
    let cfg = Config::default();
    let p0 = program_for_rank(&cfg, 0);
    let bf16_tp = colls(&p0).iter().filter(|c| c.group.kind == GroupKind::Tp && c.dtype == DataType::Bfloat16).count();
    // first stage: 4 per layer per microbatch + embedding
    assert_eq!(bf16_tp, cfg.num_microbatches * (4 * cfg.layers_per_stage() + 1) * cfg.iterations);
    let p2p = |p: &Program, send: bool| -> usize {
        p.tasks
            .iter()
            .map(|t| match &t.work {
                Work::P2p { calls, .. } => calls.iter().filter(|c| c.send == send).count(),
                _ => 0,
            })
            .sum()
    };
    let p2 = program_for_rank(&cfg, 2);
    assert_eq!(p2p(&p0, true), p2p(&p2, false));
    assert_eq!(p2p(&p2, true), p2p(&p0, false));
    assert_eq!(p2p(&p0, true), cfg.num_microbatches * cfg.iterations);
    let iters = p0.tasks.iter().filter(|t| matches!(t.work, Work::IterationEnd { .. })).count();
    assert_eq!(iters, cfg.iterations);
    // The first stage only talks to the next one.
    assert!(p0.tasks.iter().all(|t| match &t.work {
        Work::P2p { calls, .. } => calls.iter().all(|c| c.peer == Peer::Next),
        _ => true,
    }));
}

#[test]
fn replicas_share_programs_unless_routing_differs() {
    let cfg = Config { tp: 2, pp: 2, dp: 4, layers: 4, iterations: 1, ..Config::default() };
    let w = workload(&cfg).unwrap();
    w.validate().unwrap();
    // One program per stage: TP ranks and data replicas all run the same.
    assert_eq!(w.programs.len(), 2);
    assert_eq!(w.representative[7], 1, "rank 7 = t1 d3 p0 is a replica of rank 1");
    assert_eq!(w.representative[8], 8);
    let moe = |d| Config { ep: 2, num_experts: 4, moe_dispatcher: d, ..cfg.clone() };
    let w = workload(&moe(MoeDispatcher::AllGather)).unwrap();
    assert_eq!(w.programs.len(), 2, "the all-gather dispatcher is symmetric");
    let w = workload(&moe(MoeDispatcher::AllToAll)).unwrap();
    assert_eq!(w.programs.len(), 16, "uneven all-to-all splits differ per rank");
    assert!(w.representative.iter().enumerate().all(|(r, &rep)| rep as usize == r));
}

#[test]
fn volumes_sum_the_programs() {
    let cfg = Config { tp: 2, pp: 4, dp: 2, layers: 8, ..Config::default() };
    let v = volumes(&cfg).unwrap();
    let stage = |s: usize| v.iter().find(|x| x.stage == s).unwrap();
    // PP: s·b·h/tp bf16 per microbatch, direction and boundary.
    let msg = (cfg.seq_len * cfg.micro_batch * cfg.hidden / cfg.tp * 2) as u64;
    let per = (cfg.num_microbatches * cfg.iterations) as u64 * msg;
    assert_eq!(stage(0).by_group[&GroupKind::Pp].logged_bytes, 2 * per);
    assert_eq!(stage(1).by_group[&GroupKind::Pp].logged_bytes, 4 * per);
    assert_eq!((stage(0).role, stage(1).role), (StageRole::Edge, StageRole::Middle));
    // DP: fp32 gradients of the stage's parameters, all-reduced.
    let params: u64 = params::stage_params(&cfg, 1).iter().sum();
    let dp = &stage(1).by_group[&GroupKind::Dp];
    assert_eq!(dp.logged_bytes, params * 4 * cfg.iterations as u64);
    assert_eq!(dp.by_kind.keys().copied().collect::<Vec<_>>(), vec![OpKind::AllReduce]);
    assert_eq!(moved_bytes(OpKind::AllGather, 10, 4), 30.0);
}

#[test]
fn model_conf_gives_a_config() {
    let c = Config::from_model_conf("tp = 2\npp = 2\ndp = 2\nlayers = 4\nhidden = 64\nseq_len = 32\nvocab = 128\nnum_microbatches = 4\nsequence_parallel = true\n").unwrap();
    assert_eq!((c.tp, c.pp, c.dp, c.num_microbatches, c.sequence_parallel), (2, 2, 2, 4, true));
    let c = Config::from_model_conf("tp = 1\ndp = 4\nep = 2\nlayers = 4\nmoe_layers = 2\ntop_k = 2\nhidden = 64\nvocab = 128\n").unwrap();
    assert_eq!((c.num_experts, c.moe_layer_freq, c.moe_topk), (2, 2, 2));
    assert!(Config::from_model_conf("layers = 4\nhidden = 64\nffn_hidden = 100\nvocab = 8").is_err());
    assert!(Config::from_model_conf("layers = 4\nhidden = 64").is_err(), "no vocabulary");
}
