//! Joins tables read from separate files into one, remapping indices.
//!
//! Processes are the same when host and pid agree; devices when their process
//! and CUDA ordinal agree; communicator handles when their process and pointer
//! agree. The returned [`Remap`]s let callers that aggregated per file (the
//! streaming `stats` path) re-key their results.

use commlens_core::model::{CommIdx, DevIdx, ProcIdx};
use commlens_core::OpTable;
use std::collections::HashMap;

/// Old index → new index, per kind, for one input table.
#[derive(Debug, Clone, Default)]
pub struct Remap {
    pub proc: Vec<ProcIdx>,
    pub dev: Vec<DevIdx>,
    pub comm: Vec<CommIdx>,
    /// Per old handle, the device its operations go to when that is not the
    /// remap of the device they carry (empty, or `None`, elsewhere): a chunk
    /// of a large log gave a handle the device of its operations' `[dev]`
    /// before learning the handle's true one ([`crate::nccl_log::ChunkMaps`]).
    pub comm_dev: Vec<Option<DevIdx>>,
}

impl Remap {
    /// The new device and handle of an operation on `dev` and `comm`.
    #[inline]
    pub fn dev_comm(&self, dev: DevIdx, comm: CommIdx) -> (DevIdx, CommIdx) {
        let d = match self.comm_dev.get(comm.ix()) {
            Some(&Some(d)) => d,
            _ => self.dev[dev.ix()],
        };
        (d, self.comm[comm.ix()])
    }
}

/// Merges tables (their `per_rank` operations included) into one.
pub fn merge_tables(parts: Vec<OpTable>) -> (OpTable, Vec<Remap>) {
    let mut m = Merger::default();
    let remaps = parts.into_iter().map(|part| m.add(part)).collect();
    (m.finish(), remaps)
}

/// [`merge_tables`] one table at a time, so that a caller reading many files
/// folds each into the result as soon as it is read (what a part repeats —
/// its host's topology after the first, its known processes — is dropped
/// then, not held until every file is read). Adding parts one by one gives
/// the very table `merge_tables` gives for the same parts in the same order.
#[derive(Default)]
pub struct Merger {
    out: OpTable,
    procs: HashMap<(String, u32), ProcIdx>,
    devs: HashMap<(ProcIdx, Option<u32>), DevIdx>,
    comms: HashMap<(ProcIdx, u64), CommIdx>,
    topo_hosts: std::collections::HashSet<String>,
}

impl Merger {
    /// The merged table.
    pub fn finish(self) -> OpTable {
        self.out
    }

    /// Folds one table in; returns how its indices map into the merged one.
    pub fn add(&mut self, part: OpTable) -> Remap {
        let Merger { out, procs, devs, comms, topo_hosts } = self;
        let mut r = Remap::default();
        out.sources.extend(part.sources);
        for p in part.processes {
            let key = (p.host.clone(), p.pid);
            let idx = *procs.entry(key).or_insert_with(|| {
                out.processes.push(p.clone());
                ProcIdx(out.processes.len() as u32 - 1)
            });
            let merged = &mut out.processes[idx.ix()];
            merged.nccl_version = merged.nccl_version.or(p.nccl_version);
            r.proc.push(idx);
        }
        for mut d in part.devices {
            d.proc = r.proc[d.proc.ix()];
            let key = (d.proc, d.cuda_dev);
            let idx = match devs.get(&key) {
                Some(&i) => {
                    let m = &mut out.devices[i.ix()];
                    m.nvml_dev = m.nvml_dev.or(d.nvml_dev);
                    m.bus_id = m.bus_id.or(d.bus_id);
                    i
                }
                None => {
                    out.devices.push(d);
                    out.per_rank.push(commlens_core::RankOps::new());
                    let i = DevIdx(out.devices.len() as u32 - 1);
                    devs.insert(key, i);
                    i
                }
            };
            r.dev.push(idx);
        }
        for mut c in part.comms {
            c.proc = r.proc[c.proc.ix()];
            c.device = c.device.map(|d| r.dev[d.ix()]);
            c.logical = None;
            let key = (c.proc, c.ptr);
            let idx = match comms.get(&key) {
                Some(&i) => {
                    let m = &mut out.comms[i.ix()];
                    if c.n_ops > m.n_ops {
                        m.n_ops = c.n_ops;
                        m.op_seq_hash = c.op_seq_hash;
                    }
                    m.comm_id = m.comm_id.or(c.comm_id);
                    m.nranks = m.nranks.or(c.nranks);
                    m.rank = m.rank.or(c.rank);
                    m.device = m.device.or(c.device);
                    if m.tuning.is_none() {
                        m.tuning = c.tuning.take();
                    }
                    i
                }
                None => {
                    out.comms.push(c);
                    let i = CommIdx(out.comms.len() as u32 - 1);
                    comms.insert(key, i);
                    i
                }
            };
            r.comm.push(idx);
        }
        // The first topology of each host is kept (a set, not a search of
        // the kept ones: a 100,000-rank job has a topology per file).
        for t in part.topologies {
            if topo_hosts.insert(t.host.clone()) {
                out.topologies.push(t);
            }
        }
        for (i, mut ops) in part.per_rank.into_iter().enumerate() {
            // A rank's list whose operations all belong to it (the usual
            // case) is renumbered in place, rows untouched, and, when its
            // merged rank has none yet, moved whole: no copy.
            let own = i < r.dev.len() && ops.iter().all(|op| op.dev.ix() == i);
            if !own {
                for mut op in ops {
                    op.proc = r.proc[op.proc.ix()];
                    op.dev = r.dev[op.dev.ix()];
                    op.comm = r.comm[op.comm.ix()];
                    out.per_rank[op.dev.ix()].push(op);
                }
                continue;
            }
            ops.remap(|p| r.proc[p.ix()], |_| r.dev[i], |c| r.comm[c.ix()]);
            let into = &mut out.per_rank[r.dev[i].ix()];
            if into.is_empty() {
                *into = ops;
            } else {
                into.extend(ops);
            }
        }
        r
    }
}

/// What [`screen_parts`] decided for one per-file table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// Merged as usual.
    Keep,
    /// Holds only processes an earlier part (`of`) already holds, with the
    /// very same communicator handles and operation sequences: the same log
    /// again (a copy, or a per-process file next to a combined stdout). Not
    /// merged.
    Repeats { of: usize },
    /// Claims what an earlier part (`with`) already claimed for another
    /// process: a rank of the same `commId`, or another size for it. Not
    /// merged. `what` says which communicator and claim, for the warning.
    Conflict { with: usize, what: String },
}

/// Decides, part after part, which per-file tables [`merge_tables`] should
/// join. A part is passed over when it repeats earlier parts (every process
/// already seen, every communicator handle with the same operation count and
/// sequence fingerprint) or when one of its handles claims a rank of a
/// logged `commId` that a different process of an earlier kept part holds,
/// or declares a different `nranks` for it (single-rank communicators
/// excepted: nothing joins them; the later claim is never merged
/// into the earlier rank). Several processes within one part are normal
/// (a combined stdout) and never conflict here. Returns one verdict per part
/// and, for parts kept although they share a process with an earlier one
/// (a log split in two, say), the pairs (earlier, later, "host:pid").
pub fn screen_parts(parts: &[OpTable]) -> (Vec<Screen>, Vec<(usize, usize, String)>) {
    let mut s = Screener::default();
    let verdicts = parts.iter().map(|part| s.screen(part)).collect();
    (verdicts, s.shared)
}

/// [`screen_parts`] one part at a time, in order (what earlier parts claimed
/// is kept in indices): the verdicts and shared-process pairs are those
/// `screen_parts` gives for the same parts.
#[derive(Default)]
pub struct Screener {
    procs: HashMap<(String, u32), usize>,
    handles: HashMap<((String, u32), u64), (u64, u64)>,
    claims: HashMap<(u64, u32), ((String, u32), usize)>,
    sizes: HashMap<u64, (u32, usize)>,
    /// Parts screened so far.
    seen: usize,
    /// (earlier part, later part, `host:pid`) of a process both hold with
    /// different operations (both are kept).
    pub shared: Vec<(usize, usize, String)>,
}

impl Screener {
    /// The verdict on the next part (its index is the number screened before).
    pub fn screen(&mut self, part: &OpTable) -> Screen {
        let Screener { procs, handles, claims, sizes, seen, shared } = self;
        let i = *seen;
        *seen += 1;
        let key_of = |p: usize| {
            let p = &part.processes[p];
            (p.host.clone(), p.pid)
        };
        // A part without communicators (version or topology lines only)
        // counts nothing twice: always kept, never named.
        let counts = !part.comms.is_empty();
        let repeats = counts
            && part.processes.iter().all(|p| procs.contains_key(&(p.host.clone(), p.pid)))
            && part.comms.iter().all(|c| {
                handles.get(&(key_of(c.proc.ix()), c.ptr)).is_some_and(|&(n, h)| n == c.n_ops && h == c.op_seq_hash)
            });
        if repeats {
            let p = &part.processes[0];
            return Screen::Repeats { of: procs[&(p.host.clone(), p.pid)] };
        }
        let mut conflict = None;
        for c in &part.comms {
            let Some(id) = c.comm_id else { continue };
            let me = key_of(c.proc.ix());
            if let (Some(n), Some(&(m, j))) = (c.nranks, sizes.get(&id)) {
                if n != m {
                    conflict = Some(Screen::Conflict {
                        with: j,
                        what: format!("communicator commId {id:#x} declared with {m} ranks there and {n} here"),
                    });
                    break;
                }
            }
            // A single-rank communicator has nothing to join (nor a global
            // rank to take): two processes with one are left alone.
            if let Some(r) = c.rank.filter(|_| c.nranks != Some(1)) {
                if let Some((other, j)) = claims.get(&(id, r)).filter(|(other, _)| *other != me) {
                    conflict = Some(Screen::Conflict {
                        with: *j,
                        what: format!(
                            "rank {r} of communicator commId {id:#x} claimed by process {}:{} there and by {}:{} here",
                            other.0, other.1, me.0, me.1
                        ),
                    });
                    break;
                }
            }
        }
        if let Some(c) = conflict {
            return c;
        }
        for p in &part.processes {
            let k = (p.host.clone(), p.pid);
            match procs.get(&k) {
                Some(&j) if counts && j != i => shared.push((j, i, format!("{}:{}", k.0, k.1))),
                Some(_) => {}
                None => {
                    procs.insert(k, i);
                }
            }
        }
        for c in &part.comms {
            let me = key_of(c.proc.ix());
            if let Some(id) = c.comm_id {
                if let Some(n) = c.nranks {
                    sizes.entry(id).or_insert((n, i));
                }
                if let Some(r) = c.rank {
                    claims.entry((id, r)).or_insert((me.clone(), i));
                }
            }
            handles.entry((me, c.ptr)).or_insert((c.n_ops, c.op_seq_hash));
        }
        Screen::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_core::enums::OpKind;
    use commlens_core::model::{CommMember, Device, Process};

    /// One process with one device and one handle of `comm_id` holding `rank` of `nranks`.
    fn part(host: &str, pid: u32, comm_id: u64, rank: u32, nranks: u32, ops: usize) -> OpTable {
        let mut t = OpTable::default();
        t.processes.push(Process { host: host.into(), pid, nccl_version: None });
        t.devices.push(Device {
            proc: ProcIdx(0),
            cuda_dev: Some(rank),
            nvml_dev: None,
            bus_id: None,
            global_rank: None,
            local_rank: None,
        });
        let mut c = CommMember::new(ProcIdx(0), 0x7000 + u64::from(pid));
        c.comm_id = Some(comm_id);
        c.rank = Some(rank);
        c.nranks = Some(nranks);
        c.device = Some(DevIdx(0));
        for _ in 0..ops {
            c.note_op(OpKind::AllReduce);
        }
        t.comms.push(c);
        t
    }

    #[test]
    fn the_same_process_twice_is_a_repeat() {
        let a = part("n0", 1, 0xabc, 0, 2, 5);
        let b = part("n0", 2, 0xabc, 1, 2, 5);
        let (v, shared) = screen_parts(&[a.clone(), b, a]);
        assert_eq!(v, [Screen::Keep, Screen::Keep, Screen::Repeats { of: 0 }]);
        assert!(shared.is_empty());
    }

    #[test]
    fn the_same_process_with_other_operations_is_kept_and_named() {
        let a = part("n0", 1, 0xabc, 0, 2, 5);
        let a2 = part("n0", 1, 0xabc, 0, 2, 7);
        let (v, shared) = screen_parts(&[a, a2]);
        assert_eq!(v, [Screen::Keep, Screen::Keep]);
        assert_eq!(shared, [(0, 1, "n0:1".to_string())]);
    }

    #[test]
    fn a_rank_claimed_twice_is_a_conflict() {
        let a = part("n0", 1, 0xabc, 0, 2, 5);
        let b = part("n1", 9, 0xabc, 0, 2, 5);
        let (v, _) = screen_parts(&[a, b]);
        assert_eq!(v[0], Screen::Keep);
        let Screen::Conflict { with: 0, what } = &v[1] else { panic!("{v:?}") };
        assert!(what.contains("rank 0") && what.contains("0xabc") && what.contains("n1:9"), "{what}");
    }

    #[test]
    fn single_rank_communicators_never_conflict() {
        let a = part("n0", 1, 0xabc, 0, 1, 5);
        let b = part("n1", 9, 0xabc, 0, 1, 5);
        assert_eq!(screen_parts(&[a, b]).0, [Screen::Keep, Screen::Keep]);
    }

    #[test]
    fn another_world_size_is_a_conflict() {
        let a = part("n0", 1, 0xabc, 0, 2, 5);
        let b = part("n1", 9, 0xabc, 1, 4, 5);
        let (v, _) = screen_parts(&[a, b]);
        let Screen::Conflict { with: 0, what } = &v[1] else { panic!("{v:?}") };
        assert!(what.contains("2 ranks") && what.contains("4 here"), "{what}");
    }

    /// A job of 20,000 single-rank files, eight per host, each with its own
    /// copy of its host's topology: every rank keeps its operations (moved,
    /// remapped), hosts keep one topology each. Checks the shape that used to
    /// search the kept topologies once per file (files × hosts).
    #[test]
    fn many_single_rank_files_merge_whole() {
        use commlens_core::enums::DataType;
        use commlens_core::model::CollOp;
        const FILES: u32 = 20_000;
        let parts: Vec<OpTable> = (0..FILES)
            .map(|f| {
                let host = format!("node{:05}", f / 8);
                let mut t = part(&host, f, 0xabc, f, FILES, 3);
                t.topologies.push(commlens_core::Topology::new(&host));
                t.per_rank = vec![(0..3u64)
                    .map(|k| {
                        let mut op = CollOp::new(ProcIdx(0), DevIdx(0), CommIdx(0), OpKind::AllReduce, 1 + k, DataType::Float32);
                        op.line = u64::from(f) * 10 + k;
                        op
                    })
                    .collect()];
                t
            })
            .collect();
        let (merged, remaps) = merge_tables(parts);
        assert_eq!(merged.devices.len(), FILES as usize);
        assert_eq!(merged.comms.len(), FILES as usize);
        assert_eq!(merged.topologies.len(), FILES as usize / 8);
        assert_eq!(merged.topologies[7].host, "node00007");
        for (f, r) in remaps.iter().enumerate() {
            let d = r.dev[0];
            let ops = &merged.per_rank[d.ix()];
            assert_eq!(ops.len(), 3, "file {f}");
            for (k, op) in ops.iter().enumerate() {
                assert_eq!((op.dev, op.comm, op.proc), (d, r.comm[0], r.proc[0]));
                assert_eq!((op.count, op.line), (1 + k as u64, f as u64 * 10 + k as u64));
            }
        }
    }

    #[test]
    fn processes_within_one_part_never_conflict_here() {
        let mut a = part("n0", 1, 0xabc, 0, 2, 5);
        let b = part("n1", 9, 0xabc, 0, 2, 5);
        let (merged, _) = merge_tables(vec![a.clone(), b]);
        a = merged;
        let (v, _) = screen_parts(&[a]);
        assert_eq!(v, [Screen::Keep]);
    }
}
