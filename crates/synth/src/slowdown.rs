//! Injected slowdowns: the `slowdown` key of a run configuration, for testing anomaly
//! detection on runs whose slow operations are known.
//!
//! `slowdown = comm:tp rank:3 iter:5.. factor:2` makes every collective of rank 3's
//! tensor-parallel communicator take twice its transfer time from iteration 5 on (a lasting
//! bandwidth drop); `iter:5 op:2 factor:4` slows only the third collective of that
//! communicator in iteration 5 (a one-off slow instance); `iter:5..8` covers iterations 5, 6
//! and 7. The factor scales the simulated transfer time of the whole instance, on every member
//! alike (a collective ends together on all ranks), so the slow instance is slow on every rank.
//! Point-to-point groups on the communicator are scaled too when no `op` is given.
//!
//! Iterations are counted per rank as the program's optimizer steps passed (the start-up
//! barriers belong to iteration 0); operations are counted per communicator within an
//! iteration. The slowed collective instances are listed in `Truth::injected`.

use crate::config::ConfigError;
use crate::layout::Layout;
use crate::truth::InjectedOp;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Group roles a slowdown can name (the synth's communicator labels, lower case).
const ROLES: [&str; 8] = ["world", "dp", "mp", "tp", "pp", "emb", "ep", "edp"];

/// One injected slowdown (see the module docs for the key's syntax).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    /// Group role of the slowed communicator (`tp`, `dp`, `pp`, `ep`, `edp`, `mp`, `emb`, `world`).
    pub comm: String,
    /// A global rank; the slowed communicator is its group of role `comm`.
    pub rank: usize,
    pub first_iter: usize,
    /// First iteration no longer slowed; `None`: to the end of the run.
    pub end_iter: Option<usize>,
    /// Multiplies the transfer time.
    pub factor: f64,
    /// Only the `op`-th collective (0-based) of the communicator in each slowed iteration.
    pub op: Option<u64>,
}

impl Slowdown {
    /// Whether the instance `op_in_iter` of iteration `iter` is slowed (the communicator
    /// already matched).
    fn covers(&self, iter: usize, op_in_iter: u64, p2p: bool) -> bool {
        let in_iters = iter >= self.first_iter && self.end_iter.is_none_or(|e| iter < e);
        in_iters
            && if p2p {
                self.op.is_none()
            } else {
                self.op.is_none_or(|k| k == op_in_iter)
            }
    }

    pub(crate) fn check(&self, world: usize) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(format!("slowdown: {m}")));
        if self.rank >= world {
            return bad(format!(
                "rank {} is outside the world of {world} ranks",
                self.rank
            ));
        }
        if !(self.factor.is_finite() && self.factor > 0.0) {
            return bad(format!(
                "factor must be a positive number, got {}",
                self.factor
            ));
        }
        if self.end_iter.is_some_and(|e| e <= self.first_iter) {
            return bad(format!(
                "iter:{}..{} covers no iteration",
                self.first_iter,
                self.end_iter.unwrap_or(0)
            ));
        }
        if !ROLES.contains(&self.comm.as_str()) {
            return bad(format!(
                "comm:{} is not one of {}",
                self.comm,
                ROLES.join("|")
            ));
        }
        Ok(())
    }
}

impl FromStr for Slowdown {
    type Err = ConfigError;

    /// Parses `comm:ROLE rank:R iter:I[..[J]] factor:F [op:K]` (fields in any order).
    fn from_str(s: &str) -> Result<Slowdown, ConfigError> {
        let err = |m: &str| {
            ConfigError(format!(
                "slowdown {s:?}: {m} (expected `comm:tp rank:R iter:I[..[J]] factor:F [op:K]`)"
            ))
        };
        let (mut comm, mut rank, mut iters, mut factor, mut op) = (None, None, None, None, None);
        for field in s.split_whitespace() {
            let (k, v) = field
                .split_once(':')
                .ok_or_else(|| err(&format!("field {field:?} has no `:`")))?;
            let num = |v: &str| {
                v.parse::<usize>()
                    .map_err(|_| err(&format!("{k}:{v} is not a whole number")))
            };
            match k {
                "comm" => comm = Some(v.to_ascii_lowercase()),
                "rank" => rank = Some(num(v)?),
                "op" => op = Some(num(v)? as u64),
                "factor" => {
                    factor = Some(
                        v.parse::<f64>()
                            .map_err(|_| err(&format!("factor:{v} is not a number")))?,
                    )
                }
                "iter" => {
                    iters = Some(match v.split_once("..") {
                        None => (num(v)?, Some(num(v)? + 1)),
                        Some((a, "")) => (num(a)?, None),
                        Some((a, b)) => (num(a)?, Some(num(b)?)),
                    })
                }
                _ => return Err(err(&format!("unknown field {k:?}"))),
            }
        }
        let (first_iter, end_iter) = iters.ok_or_else(|| err("iter is missing"))?;
        let sd = Slowdown {
            comm: comm.ok_or_else(|| err("comm is missing"))?,
            rank: rank.ok_or_else(|| err("rank is missing"))?,
            first_iter,
            end_iter,
            factor: factor.ok_or_else(|| err("factor is missing"))?,
            op,
        };
        Ok(sd)
    }
}

/// Checks that each slowdown names a communicator; an error when the rank has no group of
/// that role (e.g. `comm:pp` in a run without pipeline parallelism).
pub(crate) fn resolve(slowdowns: &[Slowdown], layout: &Layout) -> Result<(), ConfigError> {
    for s in slowdowns {
        if !(0..layout.comms.len()).any(|c| names(s, layout, c)) {
            return Err(ConfigError(format!(
                "slowdown: rank {} has no {} communicator in this layout",
                s.rank, s.comm
            )));
        }
    }
    Ok(())
}

/// Whether slowdown `s` names communicator `comm` (its role, with `s.rank` a member).
fn names(s: &Slowdown, layout: &Layout, comm: usize) -> bool {
    let c = &layout.comms[comm];
    c.kind.label().eq_ignore_ascii_case(&s.comm) && c.members.contains(&s.rank)
}

/// Product of the factors of the slowdowns that cover the `op_in_iter`-th collective (or a
/// p2p group) of communicator `comm` in iteration `iter`; 1 when none does.
pub(crate) fn factor(
    slowdowns: &[Slowdown],
    layout: &Layout,
    comm: usize,
    iter: usize,
    op_in_iter: u64,
    p2p: bool,
) -> f64 {
    slowdowns
        .iter()
        .filter(|s| s.covers(iter, op_in_iter, p2p) && names(s, layout, comm))
        .map(|s| s.factor)
        .product()
}

/// The slowed collective instances, from the recorded simulation events (one entry per
/// instance, taken from its first member's events).
pub(crate) fn injected(layout: &Layout, events: &[Vec<crate::sim::SimEvent>]) -> Vec<InjectedOp> {
    use crate::sim::SimEvent;
    let mut out = Vec::new();
    for (r, evs) in events.iter().enumerate() {
        let mut iter = 0;
        for e in evs {
            match e {
                SimEvent::IterEnd { .. } => iter += 1,
                SimEvent::Op { rec, .. }
                    if rec.slowed != 1.0
                        && !rec.p2p
                        && layout.comms[rec.comm].members.first() == Some(&r) =>
                {
                    let c = &layout.comms[rec.comm];
                    out.push(InjectedOp {
                        comm: c.name.clone(),
                        members: c.members.clone(),
                        opcount: rec.opcount,
                        kind: rec.name.to_string(),
                        iteration: iter,
                    })
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_key_forms() {
        let s: Slowdown = "comm:TP rank:3 iter:5.. factor:2".parse().unwrap();
        assert_eq!(
            (
                s.comm.as_str(),
                s.rank,
                s.first_iter,
                s.end_iter,
                s.factor,
                s.op
            ),
            ("tp", 3, 5, None, 2.0, None)
        );
        let s: Slowdown = "factor:4 op:2 iter:5 rank:0 comm:dp".parse().unwrap();
        assert_eq!((s.first_iter, s.end_iter, s.op), (5, Some(6), Some(2)));
        assert!(
            s.covers(5, 2, false)
                && !s.covers(5, 1, false)
                && !s.covers(6, 2, false)
                && !s.covers(5, 2, true)
        );
        let s: Slowdown = "comm:pp rank:1 iter:2..4 factor:1.5".parse().unwrap();
        assert_eq!((s.first_iter, s.end_iter), (2, Some(4)));
        assert!(s.covers(3, 9, true) && !s.covers(4, 0, false));
        for bad in [
            "comm:tp rank:x iter:1 factor:2",
            "comm:tp iter:1 factor:2",
            "comm:tp rank:1 iter:1 factor:2 speed:3",
            "tp rank:1",
        ] {
            let e = bad.parse::<Slowdown>().unwrap_err().to_string();
            assert!(e.contains("expected `comm:tp"), "{e}");
        }
        let s: Slowdown = "comm:xx rank:1 iter:1 factor:2".parse().unwrap();
        assert!(s
            .check(4)
            .unwrap_err()
            .to_string()
            .contains("comm:xx is not one of"));
        let s: Slowdown = "comm:tp rank:9 iter:1 factor:2".parse().unwrap();
        assert!(s.check(4).is_err());
        let s: Slowdown = "comm:tp rank:1 iter:3..3 factor:2".parse().unwrap();
        assert!(s.check(4).is_err());
    }
}
