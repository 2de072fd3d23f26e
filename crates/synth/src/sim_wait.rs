//! Completion of the blocking steps of the simulation (see [`crate::sim`]): communicator
//! init (all members issued it; then the rest of the init lines, the topology dump on a
//! process's first communicator, and the `Init COMPLETE` tail), collectives whose result the
//! CPU reads (all members issued them), the others (all members launched them: the rank's
//! GPU, which paces its CPU, is free when the last member's kernel is done), and batched p2p
//! groups (every matching Send/Recv issued). Each advances the rank's clock past the other
//! side.

use crate::init::{self, InitTiming};
use crate::rng::mix64;
use crate::sim::{Pending, Sim};
use crate::topo;

impl Sim<'_> {
    pub(crate) fn try_complete(&mut self, r: usize, p: &Pending) -> bool {
        match p {
            Pending::Init(c) => {
                let layout = self.layout;
                let comm = &layout.comms[*c];
                let issued = self.init_issue.get(c).copied().unwrap_or_default();
                if issued.count < comm.nranks() {
                    return false;
                }
                let t_all = issued.latest;
                let h = mix64(comm.comm_id);
                let bootstrap_us = 800.0 + (h % 4000) as f64;
                let first = self.layout.proc_comms[r].first() == Some(c);
                let total_us = if first {
                    450_000.0 + (h % 250_000) as f64
                } else {
                    60_000.0 + (h % 120_000) as f64
                };
                let s = &mut self.st[r];
                s.clock = s.clock.max(t_all + bootstrap_us);
                let start = s.clock;
                let dump = first.then(|| {
                    topo::topology_dump(
                        self.cfg,
                        &self.ver,
                        self.layout,
                        comm,
                        self.layout.procs[r].node,
                    )
                });
                let local = comm.cranks_on(self.layout.procs[r].node).len();
                let timing = InitTiming {
                    total_s: total_us / 1e6,
                    bootstrap_s: bootstrap_us / 1e6,
                    ring_bw: self.timing.ring_bw(local),
                };
                let mut texts =
                    init::init_rest_lines(&self.ver, self.layout, comm, r, dump, &timing);
                let tail_at = texts
                    .iter()
                    .position(|l| l.ends_with("- Init COMPLETE"))
                    .unwrap_or(texts.len());
                let tail = texts.split_off(tail_at);
                let tid = self.tid(r, *c, 0);
                self.emit_spread(r, tid, texts, 10, 300);
                let s = &mut self.st[r];
                s.clock = s.clock.max(start + total_us - bootstrap_us);
                self.emit_spread(r, tid, tail, 5, 30);
                true
            }
            Pending::Sync { comm, seq, dur } => {
                let n = self.layout.comms[*comm].nranks();
                let Some(v) = self.sync_issue.get(&(*comm, *seq)) else {
                    return false;
                };
                if v.count < n {
                    return false;
                }
                let t_all = v.latest;
                let s = &mut self.st[r];
                s.clock = s.clock.max(t_all + dur) + s.rng.range(5, 40) as f64;
                true
            }
            Pending::Coll { comm, seq, t_op, gpu_us, cpu_us } => {
                let key = (*comm, *seq);
                let n = self.layout.comms[*comm].nranks();
                let Some(v) = self.coll_issue.get_mut(&key) else {
                    return false;
                };
                if v.count < n {
                    return false;
                }
                let t_all = v.latest;
                v.completed += 1;
                if v.completed == n {
                    self.coll_issue.remove(&key);
                }
                let s = &mut self.st[r];
                s.clock = (t_op + gpu_us.max(*cpu_us)).max(t_all + gpu_us);
                true
            }
            Pending::P2p(waits) => {
                let mut end = f64::MIN;
                for &(key, k, send, xfer) in waits {
                    let other = if send { &self.recvs } else { &self.sends };
                    let Some(&t_other) = other.get(&key).and_then(|v| v.get(k)) else {
                        return false;
                    };
                    let mine = if send { &self.sends } else { &self.recvs };
                    let t_mine = mine[&key][k];
                    end = end.max(t_mine.max(t_other) + xfer);
                }
                let s = &mut self.st[r];
                s.clock = s.clock.max(end) + s.rng.range(10, 40) as f64;
                true
            }
        }
    }
}
