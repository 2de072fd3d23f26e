//! Why a run stopped: the first stuck rank's earliest unfinished task and what it waits for
//! (members that never arrived and where they stopped, unmatched Send/Recv peers).

use commlens_workload::Work;

use super::Sim;
use crate::engine::SimError;

impl Sim<'_> {
    /// Earliest unfinished task of a rank: the smallest stream head (it is always started,
    /// since its predecessors, deps and barrier are earlier and done).
    pub(super) fn first_unfinished(&self, ri: u32) -> Option<u32> {
        let progs = self.progs;
        let info = &progs[self.prog_of[ri as usize] as usize];
        (0..info.n_slots).filter_map(|s| info.streams[s].get(self.cursor[self.slot_base[ri as usize] + s] as usize).copied()).min()
    }

    fn describe_task(&self, ri: u32, t: u32) -> String {
        match &self.task(ri, t).work {
            Work::Compute(c) => format!("compute '{}'", c.name),
            Work::Coll(c) => format!("{:?} on {}", c.kind, c.group.kind.label()),
            Work::P2p { group, .. } => format!("Send/Recv on {}", group.kind.label()),
            Work::IterationEnd { iter } => format!("end of iteration {iter}"),
        }
    }

    /// Where another rank stopped, for the message.
    fn whereabouts(&self, ri: u32) -> String {
        let rank = self.ranks[ri as usize];
        match self.first_unfinished(ri) {
            Some(t) => format!("rank {rank} stopped at task {t} ({})", self.describe_task(ri, t)),
            None => format!("rank {rank} finished its program"),
        }
    }

    pub(super) fn diagnose(&self) -> SimError {
        let stuck: Vec<u32> = (0..self.ranks.len() as u32).filter(|&ri| self.first_unfinished(ri).is_some()).collect();
        let ri = stuck[0];
        let t = self.first_unfinished(ri).expect("stuck");
        let rank = self.ranks[ri as usize];
        let mut waits = Vec::new();
        let what = self.describe_task(ri, t);
        if let Some(p) = self.pending.values().find(|p| p.arrivals.iter().any(|a| a.0 == ri && a.1 == t)) {
            let g = self.ops[ri as usize].iter().rev().find(|o| o.task == t).map(|o| o.group).expect("recorded");
            let arrived: Vec<u32> = p.arrivals.iter().map(|a| a.0).collect();
            let info = self.groups[g.0 as usize].as_ref().expect("resolved");
            let missing: Vec<u32> = info.expect.iter().copied().filter(|m| !arrived.contains(m)).collect();
            let names: Vec<String> = missing.iter().take(8).map(|&m| self.ranks[m as usize].to_string()).collect();
            let more = if missing.len() > 8 { format!(" and {} more", missing.len() - 8) } else { String::new() };
            let first = missing.first().map_or_else(String::new, |&m| format!(" ({})", self.whereabouts(m)));
            waits.push(format!("{what} of group {}: rank(s) {}{more} never arrived{first}", self.w.group(g).name, names.join(", ")));
        }
        let mut unmatched: Vec<(u32, String)> = Vec::new();
        for q in self.p2p.values() {
            for (wait, send) in q.sends.iter().map(|x| (x, true)).chain(q.recvs.iter().map(|x| (x, false))) {
                if wait.part.0 == ri && wait.part.1 == t {
                    let peer = if send { wait.dst } else { wait.src };
                    let rep = self.ri_of[self.w.representative_of(peer) as usize];
                    let dir = if send { "Send to" } else { "Recv from" };
                    unmatched.push((wait.part.2, format!("unmatched {dir} rank {peer} ({})", self.whereabouts(rep))));
                }
            }
        }
        unmatched.sort();
        waits.extend(unmatched.into_iter().map(|u| u.1));
        if waits.is_empty() {
            waits.push(format!("{what}, whose peers completed without it"));
        }
        SimError::Stall { rank, task: t, waits_for: waits.join("; "), stuck_ranks: stuck.len() }
    }
}
