//! Megatron-LM's process groups: which ranks form which communicator, in creation order.
//!
//! Owns the group list of a [`Config`] and every rank's membership. Rank order is Megatron's
//! default `tp-dp-pp`: `rank = t + tp · (d + dp · p)`. Groups are created in the order WORLD,
//! DP, MP, TP, PP, EMB (`initialize_model_parallel`; MP = tensor × pipeline), then the expert
//! groups EP and expert-DP (`GroupKind::DpEp`) when `ep > 1`, following Megatron's expert rank
//! generator `tp-ep-dp-pp` with expert TP = TP: `d = e + ep · d'`, EP varies `e` (stride `tp`),
//! expert-DP varies `d'` (stride `tp · ep`). A group of one rank issues no NCCL work and is not
//! created; MP exists only when `dp > 1` and `tp · pp > 1` (otherwise WORLD serves the
//! grad-norm reduction), EMB (first and last stage of each pipeline) only when `pp > 1`.
//! WORLD always exists. `commlens-synth` makes one NCCL communicator per group, in this order,
//! so a group's index is its communicator's index there.

use super::Config;
use crate::{Group, GroupId, GroupKind};

/// Label of a group kind in group names (`TP0`, `EDP3`, `WORLD`).
pub fn name_label(kind: GroupKind) -> &'static str {
    match kind {
        GroupKind::DpEp => "EDP",
        k => k.label(),
    }
}

/// Every group of `cfg`, in creation order. The index in each kind (`TP3`) counts as
/// Megatron's loops do.
pub fn groups(cfg: &Config) -> Vec<Group> {
    let world = cfg.world();
    let mut out: Vec<(GroupKind, usize, Vec<usize>)> = Vec::new();
    let rank_of = |t: usize, d: usize, p: usize| t + cfg.tp * (d + cfg.dp * p);
    out.push((GroupKind::World, 0, (0..world).collect()));
    if cfg.dp > 1 {
        for p in 0..cfg.pp {
            for t in 0..cfg.tp {
                out.push((GroupKind::Dp, p * cfg.tp + t, (0..cfg.dp).map(|d| rank_of(t, d, p)).collect()));
            }
        }
        if cfg.tp * cfg.pp > 1 {
            for d in 0..cfg.dp {
                let m = (0..cfg.pp).flat_map(|p| (0..cfg.tp).map(move |t| (t, p))).map(|(t, p)| rank_of(t, d, p)).collect();
                out.push((GroupKind::Mp, d, m));
            }
        }
    }
    if cfg.tp > 1 {
        for i in 0..world / cfg.tp {
            out.push((GroupKind::Tp, i, (i * cfg.tp..(i + 1) * cfg.tp).collect()));
        }
    }
    if cfg.pp > 1 {
        let n = world / cfg.pp;
        for i in 0..n {
            out.push((GroupKind::Pp, i, (0..cfg.pp).map(|k| i + k * n).collect()));
        }
        for i in 0..n {
            out.push((GroupKind::Embedding, i, vec![i, i + (cfg.pp - 1) * n]));
        }
    }
    if cfg.ep > 1 {
        let edp = cfg.dp / cfg.ep;
        for p in 0..cfg.pp {
            for d2 in 0..edp {
                for t in 0..cfg.tp {
                    let m = (0..cfg.ep).map(|e| rank_of(t, e + cfg.ep * d2, p)).collect();
                    out.push((GroupKind::Ep, (p * edp + d2) * cfg.tp + t, m));
                }
            }
        }
        if edp > 1 {
            for p in 0..cfg.pp {
                for e in 0..cfg.ep {
                    for t in 0..cfg.tp {
                        let m = (0..edp).map(|d2| rank_of(t, e + cfg.ep * d2, p)).collect();
                        out.push((GroupKind::DpEp, (p * cfg.ep + e) * cfg.tp + t, m));
                    }
                }
            }
        }
    }
    out.into_iter()
        .map(|(kind, index, ranks)| Group {
            kind,
            tag: 0,
            name: match kind {
                GroupKind::World => "WORLD".to_string(),
                k => format!("{}{}", name_label(k), index),
            },
            ranks: ranks.into_iter().map(|r| r as u32).collect(),
        })
        .collect()
}

/// `membership[r]`: the groups rank `r` belongs to, in creation order.
pub fn membership(world: usize, groups: &[Group]) -> Vec<Vec<GroupId>> {
    let mut m = vec![Vec::new(); world];
    for (i, g) in groups.iter().enumerate() {
        for &r in &g.ranks {
            m[r as usize].push(GroupId(i as u32));
        }
    }
    m
}

/// The group of `kind` that `rank` belongs to, with its index, from a membership table.
pub fn group_of<'g>(groups: &'g [Group], membership: &[GroupId], kind: GroupKind) -> Option<(usize, &'g Group)> {
    membership.iter().map(|g| g.0 as usize).find(|&g| groups[g].kind == kind).map(|g| (g, &groups[g]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_d_groups_and_expert_groups() {
        let cfg = Config { tp: 2, pp: 2, dp: 2, layers: 4, ..Config::default() };
        let g = groups(&cfg);
        let m = membership(cfg.world(), &g);
        let of = |r: usize, k| group_of(&g, &m[r], k).map(|(_, g)| g.ranks.clone());
        assert_eq!(of(5, GroupKind::Dp), Some(vec![5, 7]));
        assert_eq!(of(2, GroupKind::Mp), Some(vec![2, 3, 6, 7]));
        assert_eq!(of(3, GroupKind::Pp), Some(vec![3, 7]));
        let cfg = Config { tp: 2, pp: 1, dp: 4, ep: 2, num_experts: 4, ..Config::default() };
        let g = groups(&cfg);
        let m = membership(cfg.world(), &g);
        assert_eq!(group_of(&g, &m[5], GroupKind::Ep).map(|(_, g)| g.ranks.clone()), Some(vec![5, 7]));
        let (_, edp) = group_of(&g, &m[5], GroupKind::DpEp).unwrap();
        assert_eq!((edp.ranks.clone(), edp.name.as_str()), (vec![1, 5], "EDP1"));
    }
}
