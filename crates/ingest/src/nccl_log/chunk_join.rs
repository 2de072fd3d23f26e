//! The join of the parallel reader ([`super::chunked`]): a chunk of a log is
//! parsed from an empty state while it records what that start assumed, and
//! is then folded into the state the lines before it left, or refused.
//!
//! A chunk parser knows nothing of earlier lines: every process, device and
//! communicator handle it meets is new to it, every thread queue starts empty.
//! It records the places where that could matter ([`Speculation`],
//! [`ThreadSpec`], the hosts' `HostSpec`): per handle the `[dev]` bracket that
//! gave it a device, the sizes its operations saw, the kinds in order (for
//! `op_seq_hash`), whether init lines touched it and set its device or size;
//! per process the datatype and reduction codes it decoded without a version
//! and, per thread, the first segment (which settles an operation line cut
//! just before the chunk); per thread the tuning lines before its first match,
//! the queue length until then, its first communicator line and whether table
//! lines read columns set before; the host spellings it assumed and learned.
//!
//! [`LogParser::absorb`] checks these against the true state first
//! ([`super::chunk_check`]; nothing changes when refused), then folds the
//! chunk in: indices remapped, line numbers shifted, counters added, the cut
//! lines waiting from before settled, init lines held back before the chunk
//! given to the handle the chunk's thread named, the previous queues met by
//! the chunk's first tuning lines ([`super::chunk_threads`]); the queue
//! buffers it empties are handed on ([`Speculation::spare_queues`]).

use super::state::{LogParser, ProcState};
use commlens_core::model::{CommMember, DevIdx, Device, ProcIdx, Process};
use commlens_core::{CollOp, CommIdx};
use std::collections::VecDeque;

// The records themselves live in `chunk_spec.rs`, declared here (not in
// `mod.rs`) so that other paths (`chunk_join::ThreadSpec`, ...) stay as they were.
#[path = "chunk_spec.rs"]
mod chunk_spec;
pub(crate) use chunk_spec::{FirstComm, Speculation, ThreadSpec};
pub(super) use chunk_spec::{keep_spare, MAX_SPARE_QUEUES};

/// The FNV-1a prime of [`CommMember::note_op`] (a test checks the two agree).
const SEQ_HASH_PRIME: u64 = 0x0000_0100_0000_01b3;

/// How a chunk's indices map into the file's table.
#[derive(Clone, Default, Debug)]
pub struct ChunkMaps {
    pub proc: Vec<ProcIdx>,
    pub dev: Vec<DevIdx>,
    pub comm: Vec<CommIdx>,
    /// Per local handle, the true device its operations go to when the
    /// chunk gave it another one: the `[dev]` of its first operation here,
    /// where the true handle already had its device (one thread driving
    /// several GPUs prints its current device, not the handle's).
    pub(super) comm_dev: Vec<Option<DevIdx>>,
    /// Added to the chunk's `comm_seq` per local handle (operations the
    /// handle had before the chunk).
    pub(super) seq_base: Vec<u64>,
    pub(super) line_offset: u64,
}

impl ChunkMaps {
    /// The map of the chunk's indices into a merged table, through the map
    /// of its file's (`file`; empty when the file was left out).
    pub fn through(&self, file: &crate::merge::Remap) -> crate::merge::Remap {
        if file.proc.is_empty() {
            return crate::merge::Remap::default();
        }
        crate::merge::Remap {
            proc: self.proc.iter().map(|p| file.proc[p.ix()]).collect(),
            dev: self.dev.iter().map(|d| file.dev[d.ix()]).collect(),
            comm: self.comm.iter().map(|c| file.comm[c.ix()]).collect(),
            comm_dev: self.comm_dev.iter().map(|d| d.map(|d| file.dev[d.ix()])).collect(),
        }
    }

    /// An operation of the chunk in the file's indices and line numbers.
    pub(super) fn op(&self, mut op: CollOp) -> CollOp {
        self.remap(&mut op);
        op
    }

    /// [`ChunkMaps::op`] in place (no copy of the operation).
    pub(super) fn remap(&self, op: &mut CollOp) {
        op.comm_seq += self.seq_base[op.comm.ix()];
        op.proc = self.proc[op.proc.ix()];
        op.dev = match self.comm_dev[op.comm.ix()] {
            Some(d) => d,
            None => self.dev[op.dev.ix()],
        };
        op.comm = self.comm[op.comm.ix()];
        op.line += self.line_offset;
    }
}

impl LogParser {
    /// A parser for a chunk of a log (not the first: that one is the
    /// sequential reader's): records what its start assumed. `seeds`: host
    /// spellings (pid, host) assumed known before the chunk.
    pub(crate) fn speculative(fast: bool, seeds: &[(u32, Box<[u8]>)]) -> LogParser {
        let mut p = LogParser::with_fast_paths(fast);
        p.spec = Some(Box::default());
        p.hosts.speculate(seeds);
        p
    }

    /// Gives a chunk parser emptied queues for its new threads.
    pub(super) fn spec_spares(&mut self, queues: impl Iterator<Item = VecDeque<CollOp>>) {
        if let Some(s) = self.spec.as_mut() {
            s.spare_queues.extend(queues);
        }
    }

    /// A version line was read: of process `proc`, or without a prefix.
    pub(super) fn note_version_set(&mut self, proc: Option<ProcIdx>) {
        if let Some(s) = self.spec.as_mut() {
            match proc {
                Some(p) => s.procs[p.ix()].version_set = true,
                None => s.bare_version_set = true,
            }
        }
    }

    pub(super) fn note_comm_line(&mut self, c: CommIdx, cuda_dev: Option<u32>, nranks: bool) {
        if let Some(s) = self.spec.as_mut() {
            let cs = &mut s.comms[c.ix()];
            if let Some(d) = cuda_dev {
                cs.init_devs_differ |= cs.device_from_init && cs.init_dev != d;
                cs.init_dev = d;
                cs.device_from_init = true;
            }
            cs.nranks_from_init |= nranks;
        }
    }

    /// An operation of handle `c` gave it its device, from its `[dev]` bracket.
    pub(super) fn note_bracket(&mut self, c: CommIdx, bracket: u32) {
        if let Some(s) = self.spec.as_mut() {
            s.comms[c.ix()].bracket = Some(bracket);
        }
    }

    pub(super) fn note_init(&mut self, c: Option<CommIdx>) {
        if let (Some(s), Some(c)) = (self.spec.as_mut(), c) {
            s.comms[c.ix()].init_touched = true;
        }
    }

    /// The true processes of the chunk's processes (`None`: new).
    pub(super) fn proc_keys(chunk: &LogParser) -> Vec<(Box<[u8]>, u32)> {
        let mut keys = vec![(Box::<[u8]>::default(), 0); chunk.table.processes.len()];
        for (k, p) in &chunk.proc_index {
            keys[p.ix()] = k.clone();
        }
        keys
    }

    /// Folds a chunk parsed from an empty state into this parser, as if its
    /// lines (numbered from `line_offset + 1`) had been fed here. Operations
    /// the fold releases from this parser's queues go to `sink`. `Err` says
    /// why the chunk cannot be folded exactly (nothing changed here); the
    /// caller then feeds its lines here instead. Operation queues the fold
    /// empties, and the chunk's unused spares, go to `spares` (for later
    /// chunks' threads, [`Speculation::spare_queues`]).
    pub(crate) fn absorb(
        &mut self,
        mut chunk: LogParser,
        line_offset: u64,
        sink: &mut dyn FnMut(CollOp),
        spares: &mut Vec<VecDeque<CollOp>>,
    ) -> Result<ChunkMaps, &'static str> {
        let keys = Self::proc_keys(&chunk);
        if let Some(why) = self.refusal(&chunk, &keys) {
            return Err(why);
        }
        let mut spec = chunk.spec.take().expect("checked");
        for q in spec.spare_queues.drain(..) {
            keep_spare(spares, q);
        }
        let mut maps = ChunkMaps {
            line_offset,
            ..ChunkMaps::default()
        };
        // Processes, hosts, versions.
        for (lp, key) in keys.into_iter().enumerate() {
            let local = &chunk.table.processes[lp];
            let tp = match self.proc_index.get(&key) {
                Some(&tp) => {
                    if let Some(v) = local.nccl_version {
                        self.table.processes[tp.ix()].nccl_version.get_or_insert(v);
                    }
                    tp
                }
                None => {
                    let tp = ProcIdx(self.table.processes.len() as u32);
                    self.table.processes.push(Process {
                        host: local.host.clone(),
                        pid: local.pid,
                        nccl_version: local.nccl_version,
                    });
                    self.procs.push(ProcState::default());
                    self.proc_index.insert(key, tp);
                    tp
                }
            };
            self.procs[tp.ix()].clean_segments += chunk.procs[lp].clean_segments;
            maps.proc.push(tp);
        }
        if let Some(v) = chunk.bare_version {
            self.bare_version.get_or_insert(v);
        }
        for (pid, hosts) in chunk.hosts.learned() {
            for h in hosts {
                self.hosts.learn(pid, h);
            }
        }
        // Lines cut before the chunk, settled by the chunk's first segment of
        // their thread: before the chunk's operations on any handle.
        for (lp, ps) in chunk.procs.iter_mut().enumerate() {
            self.settle_waiting(maps.proc[lp], std::mem::take(&mut ps.settles), sink);
        }
        // Line numbers of the chunk's init graphs; then what true threads
        // held back goes ahead of the chunk's handles that take it.
        for m in &mut chunk.table.comms {
            if let Some(t) = m.tuning.as_mut() {
                t.graphs.iter_mut().for_each(|g| g.line += line_offset);
            }
        }
        self.give_held(&mut chunk, &maps);
        // Devices, by (process, CUDA device).
        for d in &chunk.table.devices {
            let tp = maps.proc[d.proc.ix()];
            let key = d.cuda_dev.unwrap_or(u32::MAX);
            let td = match self.procs[tp.ix()].devices.get(&key) {
                Some(&td) => {
                    let t = &mut self.table.devices[td.ix()];
                    t.nvml_dev = t.nvml_dev.or(d.nvml_dev);
                    t.bus_id = t.bus_id.or(d.bus_id);
                    td
                }
                None => {
                    let td = DevIdx(self.table.devices.len() as u32);
                    self.table.devices.push(Device {
                        proc: tp,
                        ..d.clone()
                    });
                    self.procs[tp.ix()].devices.insert(key, td);
                    td
                }
            };
            maps.dev.push(td);
        }
        // Handles.
        for (m, cs) in std::mem::take(&mut chunk.table.comms)
            .into_iter()
            .zip(&spec.comms)
        {
            let tp = maps.proc[m.proc.ix()];
            let device = m.device.map(|d| maps.dev[d.ix()]);
            match self.procs[tp.ix()].comms.get(&m.ptr) {
                Some(&tc) => {
                    let t = &mut self.table.comms[tc.ix()];
                    maps.seq_base.push(t.n_ops);
                    // Checked by the refusal: the bracket's device exists in
                    // the true process, and no init line here moved the handle.
                    maps.comm_dev.push(match (cs.bracket, t.device) {
                        (Some(b), Some(td)) if self.table.devices[td.ix()].cuda_dev.unwrap_or(u32::MAX) != b => Some(td),
                        _ => None,
                    });
                    t.device = if cs.device_from_init {
                        device
                    } else {
                        t.device.or(device)
                    };
                    t.nranks = if cs.nranks_from_init {
                        m.nranks
                    } else {
                        t.nranks.or(m.nranks)
                    };
                    if cs.init_touched {
                        // The chunk's init lines come after what the handle holds.
                        let mut m = m;
                        t.rank = m.rank.or(t.rank);
                        t.comm_id = m.comm_id.or(t.comm_id);
                        t.split = m.split.or(t.split);
                        t.n_nodes = m.n_nodes.or(t.n_nodes);
                        t.local_ranks = m.local_ranks.or(t.local_ranks);
                        t.local_rank = m.local_rank.or(t.local_rank);
                        t.init_complete |= m.init_complete;
                        super::state_comms::append_channels(t, &mut m);
                        if let Some(later) = m.tuning.take() {
                            super::chunk_threads::append_tuning(&mut t.tuning, later);
                        }
                    }
                    // `CommMember::note_op` per operation, with the count
                    // added once a run and the hash kept in a register.
                    let mut h = t.op_seq_hash;
                    for &(k, n) in &cs.kinds {
                        let x = k as u64 + 1;
                        for _ in 0..n {
                            h = (h ^ x).wrapping_mul(SEQ_HASH_PRIME);
                        }
                        t.n_ops += n as u64;
                    }
                    t.op_seq_hash = h;
                    maps.comm.push(tc);
                }
                None => {
                    let tc = CommIdx(self.table.comms.len() as u32);
                    let m = CommMember {
                        proc: tp,
                        device,
                        ..m
                    };
                    self.table.comms.push(m);
                    self.procs[tp.ix()]
                        .comms
                        .insert(self.table.comms[tc.ix()].ptr, tc);
                    maps.seq_base.push(0);
                    maps.comm_dev.push(None);
                    maps.comm.push(tc);
                }
            }
        }
        self.recent_comms = [(None, CommIdx(0)); 2];
        // Topology: the first block per host.
        for t in std::mem::take(&mut chunk.table.topologies) {
            if !self.hosts_with_topology.contains(&t.host) {
                self.hosts_with_topology.push(t.host.clone());
                self.table.topologies.push(t);
            }
        }
        // Counters first: the threads' fold corrects the tuning counts.
        self.report
            .absorb(std::mem::take(&mut chunk.report), line_offset);
        self.fragment = std::mem::take(&mut chunk.fragment);
        for (lp, ps) in std::mem::take(&mut chunk.procs).into_iter().enumerate() {
            let tp = maps.proc[lp];
            for (tid, lt) in ps.threads {
                self.absorb_thread(tp, tid, lt, &maps, sink, spares);
            }
        }
        Ok(maps)
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_spec::decoded_by_version;
    use commlens_core::{DataType, NcclVersion, RedOp};

    /// The join's fold of a handle's kinds gives what `CommMember::note_op`
    /// gives an operation at a time.
    #[test]
    fn kinds_fold_as_note_op() {
        use commlens_core::model::{CommMember, ProcIdx};
        use commlens_core::OpKind;
        let kinds = [OpKind::AllReduce, OpKind::Send, OpKind::Recv, OpKind::Broadcast];
        let mut a = CommMember::new(ProcIdx(0), 1);
        let mut h = a.op_seq_hash;
        for (i, &k) in kinds.iter().cycle().take(37).enumerate() {
            for _ in 0..i % 5 {
                a.note_op(k);
                h = (h ^ (k as u64 + 1)).wrapping_mul(super::SEQ_HASH_PRIME);
            }
        }
        assert_eq!(a.op_seq_hash, h);
    }

    /// The codes left out of the join's check decode alike with and without
    /// any version (every code near the known ones, versions from 0.0.0 to
    /// past the newest thresholds).
    #[test]
    fn codes_left_out_decode_alike_in_every_version() {
        let mut versions = vec![NcclVersion::new(0, 0, 0), NcclVersion::new(99, 0, 0)];
        for major in 1..=3 {
            for minor in 0..=40 {
                versions.push(NcclVersion::new(major, minor, 0));
                versions.push(NcclVersion::new(major, minor, 9));
            }
        }
        let codes: Vec<i64> = (-300..300).chain([i64::MIN, i64::MAX, i32::MAX as i64 + 1]).collect();
        for &c in &codes {
            for &v in &versions {
                if !decoded_by_version(c, None) {
                    assert_eq!(DataType::from_nccl(c, None), DataType::from_nccl(c, Some(v)), "datatype {c}, {v}");
                }
                if !decoded_by_version(0, Some(c)) {
                    assert_eq!(RedOp::from_nccl(c, None), RedOp::from_nccl(c, Some(v)), "reduction {c}, {v}");
                }
            }
            // Either code alone makes the pair recorded.
            for &r in &codes {
                let pair = decoded_by_version(c, Some(r));
                assert_eq!(pair, decoded_by_version(c, None) || decoded_by_version(0, Some(r)), "{c} {r}");
            }
        }
        assert!(decoded_by_version(9, None) && decoded_by_version(7, Some(4)) && !decoded_by_version(7, Some(0)));
    }
}
