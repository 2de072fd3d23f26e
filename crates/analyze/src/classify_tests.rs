//! Classification of generated Megatron runs (their `Truth` names every
//! communicator WORLD/TP*/PP*/DP*/EMB*/MP*) with and without sizes, and the
//! rank groups against Megatron's `RankGenerator` layout.

use super::*;
use commlens_synth::{generate, write_to_dir, RunConfig, Truth};

fn expected(truth_kind: &str) -> Parallelism {
    match truth_kind {
        "WORLD" => Parallelism::World,
        "TP" => Parallelism::Tensor,
        "PP" => Parallelism::Pipeline,
        "DP" => Parallelism::Data,
        "MP" => Parallelism::ModelParallel,
        "EMB" => Parallelism::Embedding,
        other => panic!("unknown truth kind {other}"),
    }
}

fn load(cfg: &RunConfig, tag: &str) -> (OpTable, Truth) {
    let run = generate(cfg);
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("commlens-classify-{tag}-{}-{n}", std::process::id()));
    let files = write_to_dir(&run, &dir).unwrap();
    let loaded = commlens_ingest::inputs::load_inputs(&files, &Default::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (loaded.table, run.truth)
}

/// Checks every truth communicator's class; prints the decisions.
fn check(label: &str, t: &OpTable, truth: &Truth, c: &Classification) {
    assert_eq!(c.comms.len(), truth.communicators.len(), "{label}");
    for tc in &truth.communicators {
        let l = t.logical.iter().position(|l| l.comm_id == Some(tc.comm_id)).expect("logical comm of truth");
        let got = &c.comms[l];
        println!("{label}: {:<6} -> {:<9} ({}) [{}]", tc.name, got.class.label(), got.reason, got.evidence.summary());
        assert_eq!(got.class, expected(&tc.kind), "{label}: {} classified as {:?}: {}", tc.name, got.class, got.reason);
        let mut members: Vec<u32> = tc.members.iter().map(|&m| m as u32).collect();
        members.sort_unstable();
        assert_eq!(got.evidence.ranks, members);
    }
}

fn runs() -> Vec<(&'static str, RunConfig, ParallelSizes)> {
    vec![
        ("tp2pp2dp1", RunConfig::megatron(2, 2, 1), ParallelSizes::megatron(2, 2, 1)),
        ("tp2pp2dp2", RunConfig { gpus_per_node: 4, ..RunConfig::megatron(2, 2, 2) }, ParallelSizes::megatron(2, 2, 2)),
        ("tp4pp1dp2", RunConfig::megatron(4, 1, 2), ParallelSizes::megatron(4, 1, 2)),
    ]
}

#[test]
fn generated_runs_with_sizes() {
    for (tag, cfg, sizes) in runs() {
        let (t, truth) = load(&cfg, tag);
        let c = classify_with_sizes(&t, &sizes).unwrap();
        check(&format!("{tag} sizes"), &t, &truth, &c);
        // The synth layout is Megatron's tp-dp-pp: the same groups with cp = ep = 1.
        let short = ParallelSizes { order: "tp-dp-pp".into(), ..sizes.clone() };
        let classes = |c: &Classification| c.comms.iter().map(|x| x.class).collect::<Vec<_>>();
        assert_eq!(classes(&classify_with_sizes(&t, &short).unwrap()), classes(&c));
    }
}

#[test]
fn generated_runs_inferred() {
    for (tag, cfg, sizes) in runs() {
        let (t, truth) = load(&cfg, tag);
        let c = infer(&t);
        check(&format!("{tag} inferred"), &t, &truth, &c);
        let tp = (sizes.tp > 1).then_some(sizes.tp);
        let pp = (sizes.pp > 1).then_some(sizes.pp);
        let dp = (sizes.dp > 1).then_some(sizes.dp);
        assert_eq!(
            (c.inferred.world, c.inferred.tp, c.inferred.pp, c.inferred.dp),
            (sizes.world(), tp, pp, dp),
            "{tag}"
        );
        if sizes.dp > 1 {
            assert_eq!(c.inferred.dp_stride, Some(sizes.tp), "{tag}: DP stride gives the TP size");
        }
    }
}

#[test]
fn wrong_sizes_are_refused() {
    let (t, _) = load(&RunConfig::megatron(2, 2, 1), "wrong");
    let err = classify_with_sizes(&t, &ParallelSizes::megatron(2, 2, 2)).unwrap_err();
    assert!(err.0.contains("8 ranks") && err.0.contains("has 4"), "{err}");
    let bad_order = ParallelSizes { order: "tp-pp".into(), ..ParallelSizes::megatron(2, 1, 2) };
    assert!(expected_groups(&bad_order).unwrap_err().0.contains("lacks dp"));
    let unknown = ParallelSizes { order: "tp-xx-pp".into(), ..Default::default() };
    assert!(expected_groups(&unknown).is_err());
    assert!(expected_groups(&ParallelSizes { tp: 0, ..Default::default() }).is_err());
}

fn groups_of(s: &ParallelSizes, class: Parallelism, note: &str) -> Vec<Vec<u32>> {
    expected_groups(s).unwrap().into_iter().filter(|g| g.0 == class && g.1.starts_with(note)).map(|g| g.2).collect()
}

#[test]
fn megatron_rank_generator_layout() {
    // 16 ranks, tp 2, cp 2, dp 2, pp 2, default order tp-cp-ep-dp-pp:
    // rank = tp + 2·cp + 4·dp + 8·pp.
    let s = ParallelSizes { tp: 2, cp: 2, dp: 2, pp: 2, ..Default::default() };
    assert_eq!(groups_of(&s, Parallelism::Tensor, "tp")[..2], [vec![0, 1], vec![2, 3]]);
    assert_eq!(groups_of(&s, Parallelism::Context, "cp")[..2], [vec![0, 2], vec![1, 3]]);
    assert_eq!(groups_of(&s, Parallelism::Data, "dp group")[..2], [vec![0, 4], vec![1, 5]]);
    assert_eq!(groups_of(&s, Parallelism::Data, "dp-cp")[0], vec![0, 2, 4, 6]);
    assert_eq!(groups_of(&s, Parallelism::Pipeline, "pp")[0], vec![0, 8]);
    assert_eq!(groups_of(&s, Parallelism::ModelParallel, "tp-pp")[0], vec![0, 1, 8, 9]);
    assert_eq!(groups_of(&s, Parallelism::Embedding, "first")[0], vec![0, 8]);
    // Order tp-pp-dp: pp varies before dp.
    let o = ParallelSizes { tp: 2, pp: 2, dp: 2, order: "tp-pp-dp".into(), ..Default::default() };
    assert_eq!(groups_of(&o, Parallelism::Pipeline, "pp")[0], vec![0, 2]);
    assert_eq!(groups_of(&o, Parallelism::Data, "dp")[0], vec![0, 4]);
    // Experts: 8 ranks, tp 2, dp 4 (ep 2 splits it): expert dp = 8 / (2·2) = 2.
    let e = ParallelSizes { tp: 2, dp: 4, ep: 2, ..Default::default() };
    assert_eq!(groups_of(&e, Parallelism::Expert, "ep"), [vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    assert_eq!(groups_of(&e, Parallelism::Data, "expert dp")[0], vec![0, 4]);
    assert_eq!(groups_of(&e, Parallelism::Data, "dp group")[0], vec![0, 2, 4, 6]);
}

#[test]
fn evidence_and_edge_cases() {
    let (t, _) = load(&RunConfig::megatron(2, 2, 1), "evidence");
    let ev = evidence(&t);
    let pp = ev.iter().find(|e| e.p2p_share() > 0.9).unwrap();
    assert_eq!((pp.stride, pp.hosts, pp.nranks), (Some(2), 1, 2));
    assert!(pp.summary().contains("Send") && pp.summary().contains("stride 2"));
    let empty = infer(&OpTable::default());
    assert!(empty.comms.is_empty() && empty.inferred.tp.is_none());
}
