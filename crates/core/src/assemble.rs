//! Turns per-process facts into one consistent table: global ranks for every
//! device and logical communicators for every communicator handle.
//!
//! Global ranks come from the world communicator's init lines when present
//! (its `rank` field is authoritative); otherwise from the thesis's eq. 4.6,
//! `NodeIndex × GPUsPerNode + LocalRank`, with hosts sorted by name.
//!
//! Logical communicators group handles by `commId` when logged; a handle made
//! by `ncclCommSplit` (which logs no `commId`) gets one derived from its
//! parent's `commId`, the split counter and the color, which its fellow members
//! share ([`derive_split_ids`]). Otherwise handles are grouped by identical
//! operation sequences (thesis eq. 4.5), then split into groups of `nranks`
//! members because symmetric groups (two TP groups, say) run the very same
//! sequence: two DP groups of equal shape are told apart only by the split.

use crate::model::{CommIdx, DevIdx, Grouping, LogicalComm, LogicalCommIdx, OpTable};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Runs both steps: logical communicators first (world detection needs them),
/// then global ranks, then names communicators by their ranks.
pub fn assemble(table: &mut OpTable) {
    infer_logical_comms(table);
    assign_global_ranks(table);
    order_members_and_name(table);
}

#[derive(PartialEq, Eq, Hash, PartialOrd, Ord, Clone, Copy)]
enum Key {
    Id(u64),
    Seq(u32, u64, u64),
}

/// Handles whose init line was lost (interleaved writers) have no `commId`
/// but may still know their size and rank: each joins the `commId` group of
/// the same size that lacks its rank, when exactly one such group exists and
/// the group does not already hold its device.
fn adopt_into_id_groups(table: &OpTable, buckets: &mut BTreeMap<Key, Vec<CommIdx>>, adopted: &mut [bool]) {
    // The `commId` groups whose members all declare `n` ranks, by `n`, in key order: only
    // they can adopt a handle of size `n` (adopting keeps that true). Built only when some
    // handle lacks its `commId`, so complete logs pay nothing.
    if !table.comms.iter().any(|c| c.comm_id.is_none() && c.nranks.is_some()) {
        return;
    }
    let mut by_size: HashMap<u32, Vec<Key>> = HashMap::new();
    for (k, members) in buckets.iter() {
        let n = members.first().and_then(|m| table.comms[m.ix()].nranks);
        if let (Key::Id(_), Some(n)) = (k, n) {
            if members.iter().all(|m| table.comms[m.ix()].nranks == Some(n)) {
                by_size.entry(n).or_default().push(*k);
            }
        }
    }
    for (i, c) in table.comms.iter().enumerate() {
        let (None, Some(n)) = (c.comm_id, c.nranks) else { continue };
        let candidates: Vec<Key> = by_size
            .get(&n)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|k| {
                let members = &buckets[k];
                members.len() < n as usize
                    && members.iter().all(|m| {
                        let o = &table.comms[m.ix()];
                        o.proc != c.proc
                            && (c.rank.is_none() || o.rank != c.rank)
                            && (c.device.is_none() || o.device != c.device)
                    })
            })
            .copied()
            .collect();
        if let [k] = candidates[..] {
            buckets.get_mut(&k).expect("key from iteration").push(CommIdx(i as u32));
            adopted[i] = true;
        }
    }
}

/// Gives every handle made by `ncclCommSplit` that logged no `commId` an id
/// derived from (parent's id, split counter, color): equal on the members of
/// one split group and nowhere else. The parent is the handle of the same
/// process at the logged pointer; a parent that is itself a split child is
/// resolved first (parents are created earlier, so a few passes suffice).
pub fn derive_split_ids(table: &mut OpTable) {
    if !table.comms.iter().any(|c| c.split.is_some() && c.comm_id.is_none()) {
        return;
    }
    let by_ptr: HashMap<(u32, u64), usize> = table.comms.iter().enumerate().map(|(i, c)| ((c.proc.0, c.ptr), i)).collect();
    loop {
        let mut changed = false;
        for i in 0..table.comms.len() {
            let c = &table.comms[i];
            let (None, Some(s)) = (c.comm_id, c.split) else { continue };
            let Some(parent_id) = by_ptr.get(&(c.proc.0, s.parent)).and_then(|&p| table.comms[p].comm_id) else { continue };
            table.comms[i].comm_id = Some(split_id(parent_id, s.split_count, s.color));
            changed = true;
        }
        if !changed {
            return;
        }
    }
}

/// FNV-1a over the parent's id, the split counter and the color.
fn split_id(parent: u64, split_count: u32, color: i64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parent.to_le_bytes().into_iter().chain(split_count.to_le_bytes()).chain(color.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Groups communicator handles into [`LogicalComm`]s.
pub fn infer_logical_comms(table: &mut OpTable) {
    derive_split_ids(table);
    table.logical.clear();
    for c in &mut table.comms {
        c.logical = None;
    }
    // Key: commId where logged, else (nranks, op sequence) fingerprint.
    let mut buckets: BTreeMap<Key, Vec<CommIdx>> = BTreeMap::new();
    let mut first_seen: HashMap<Key, usize> = HashMap::new();
    for (i, c) in table.comms.iter().enumerate() {
        if let Some(id) = c.comm_id {
            first_seen.entry(Key::Id(id)).or_insert(i);
            buckets.entry(Key::Id(id)).or_default().push(CommIdx(i as u32));
        }
    }
    let mut adopted = vec![false; table.comms.len()];
    adopt_into_id_groups(table, &mut buckets, &mut adopted);
    for (i, c) in table.comms.iter().enumerate() {
        if c.comm_id.is_none() && !adopted[i] {
            let key = Key::Seq(c.nranks.unwrap_or(0), c.n_ops, c.op_seq_hash);
            first_seen.entry(key).or_insert(i);
            buckets.entry(key).or_default().push(CommIdx(i as u32));
        }
    }
    let mut groups: Vec<(usize, Key, Vec<CommIdx>)> =
        buckets.into_iter().map(|(k, v)| (first_seen[&k], k, v)).collect();
    groups.sort_by_key(|g| g.0);
    for (_, key, members) in groups {
        let nranks = members
            .iter()
            .filter_map(|m| table.comms[m.ix()].nranks)
            .max()
            .unwrap_or(members.len() as u32)
            .max(1) as usize;
        for part in split_into_groups(table, &members, nranks) {
            let grouping = match key {
                _ if part.len() == 1 && nranks > 1 => Grouping::Single,
                Key::Id(_) => Grouping::CommId,
                Key::Seq(..) => Grouping::OpSequence,
            };
            let idx = LogicalCommIdx(table.logical.len() as u32);
            for m in &part {
                table.comms[m.ix()].logical = Some(idx);
            }
            table.logical.push(LogicalComm {
                name: String::new(),
                comm_id: match key {
                    Key::Id(id) => Some(id),
                    Key::Seq(..) => None,
                },
                nranks: nranks as u32,
                members: part,
                grouping,
            });
        }
    }
}

/// Splits candidate members into groups of at most `nranks` handles in which
/// no rank-in-communicator repeats and no process appears twice with the same
/// device. Members come in source order; each joins the first group with room.
fn split_into_groups(table: &OpTable, members: &[CommIdx], nranks: usize) -> Vec<Vec<CommIdx>> {
    let mut groups: Vec<Vec<CommIdx>> = Vec::new();
    // Without rank information, keep handles of one host together: order by
    // (host, pid, device) so contiguous ranks form a group (Megatron's layout).
    let mut ordered = members.to_vec();
    let unknown_ranks = ordered.iter().all(|m| table.comms[m.ix()].rank.is_none());
    if unknown_ranks {
        ordered.sort_by_key(|m| {
            let c = &table.comms[m.ix()];
            let p = &table.processes[c.proc.ix()];
            let dev = c.device.and_then(|d| table.devices[d.ix()].cuda_dev);
            (p.host.clone(), p.pid, dev, c.ptr)
        });
    }
    // Per group, the ranks and devices taken; groups with room, in creation order. A
    // member is checked against sets, not every handle already placed: the world
    // communicator of 100,000 handles splits in linear time.
    let mut taken: Vec<(HashSet<u32>, HashSet<DevIdx>)> = Vec::new();
    let mut open: BTreeSet<usize> = BTreeSet::new();
    for m in ordered {
        let c = &table.comms[m.ix()];
        let fits = |g: usize| {
            let (ranks, devs) = &taken[g];
            !c.rank.is_some_and(|r| ranks.contains(&r)) && !c.device.is_some_and(|d| devs.contains(&d))
        };
        let g = match open.iter().copied().find(|&g| fits(g)) {
            Some(g) => g,
            None => {
                groups.push(Vec::new());
                taken.push(Default::default());
                open.insert(groups.len() - 1);
                groups.len() - 1
            }
        };
        groups[g].push(m);
        taken[g].0.extend(c.rank);
        taken[g].1.extend(c.device);
        if groups[g].len() >= nranks {
            open.remove(&g);
        }
    }
    groups
}

/// Assigns `Device::global_rank` and `Device::local_rank`.
pub fn assign_global_ranks(table: &mut OpTable) {
    for d in &mut table.devices {
        d.global_rank = None;
    }
    // Local rank: position of the device among its host's devices by CUDA
    // ordinal... which repeats across processes on one host (each sees dev 0
    // when CUDA_VISIBLE_DEVICES is set per process), so order by (bus id,
    // cuda dev, pid) instead: bus ids are per-node unique.
    let mut by_host: BTreeMap<String, Vec<DevIdx>> = BTreeMap::new();
    for (i, d) in table.devices.iter().enumerate() {
        by_host.entry(table.processes[d.proc.ix()].host.clone()).or_default().push(DevIdx(i as u32));
    }
    for devs in by_host.values_mut() {
        devs.sort_by_key(|d| {
            let dev = &table.devices[d.ix()];
            (dev.bus_id.unwrap_or(u64::MAX), dev.cuda_dev, table.processes[dev.proc.ix()].pid)
        });
        for (k, d) in devs.iter().enumerate() {
            table.devices[d.ix()].local_rank = Some(k as u32);
        }
    }

    if !ranks_from_world_comm(table, &by_host) {
        // Thesis eq. 4.6.
        let gpus_per_node = by_host.values().map(Vec::len).max().unwrap_or(0) as u32;
        for (node_index, devs) in by_host.values().enumerate() {
            for d in devs {
                let local = table.devices[d.ix()].local_rank.unwrap_or(0);
                table.devices[d.ix()].global_rank = Some(node_index as u32 * gpus_per_node + local);
            }
        }
    }
}

/// The world communicator: the logical communicator with the most ranks whose
/// members all logged distinct ranks. Logs of part of a job (6 of 8 ranks)
/// still qualify.
pub fn world_comm(table: &OpTable) -> Option<crate::model::LogicalCommIdx> {
    let mut best: Option<(u32, usize)> = None;
    for (i, l) in table.logical.iter().enumerate() {
        // Sized by the members seen, never by the declared `nranks`.
        let mut seen = std::collections::HashSet::with_capacity(l.members.len());
        let ok = l.members.iter().all(|m| {
            let c = &table.comms[m.ix()];
            matches!((c.rank, c.device), (Some(r), Some(_)) if r < l.nranks && seen.insert(r))
        });
        if ok && best.is_none_or(|(n, _)| l.nranks > n) {
            best = Some((l.nranks, i));
        }
    }
    best.map(|(_, i)| crate::model::LogicalCommIdx(i as u32))
}

/// Takes global ranks from the `rank` fields of the world-sized
/// communicators (the largest `nranks` seen): every handle of such a
/// communicator names its device's global rank, even when its peers' logs are
/// missing or their init lines were lost. Devices left over get the world's
/// unclaimed ranks when they are as many, else the ranks after the world
/// size, in host order.
/// Returns false when no communicator logged ranks.
fn ranks_from_world_comm(table: &mut OpTable, by_host: &BTreeMap<String, Vec<DevIdx>>) -> bool {
    let world_size = table
        .logical
        .iter()
        .filter(|l| l.members.iter().any(|m| table.comms[m.ix()].rank.is_some()))
        .map(|l| l.nranks)
        .max();
    let Some(world_size) = world_size else { return false };
    if world_size < 2 && table.devices.len() > 1 {
        return false;
    }
    // The ranks taken, sized by the members seen (a log may declare any size).
    let mut used = std::collections::HashSet::new();
    for l in table.logical.iter().filter(|l| l.nranks == world_size) {
        for m in &l.members {
            let c = &table.comms[m.ix()];
            if let (Some(r), Some(d)) = (c.rank, c.device) {
                let free = r < world_size && !used.contains(&r);
                if free && table.devices[d.ix()].global_rank.is_none() {
                    used.insert(r);
                    table.devices[d.ix()].global_rank = Some(r);
                }
            }
        }
    }
    if used.is_empty() {
        return false;
    }
    // Devices whose world rank was lost (an init line cut by a concurrent
    // writer): when they are exactly as many as the ranks nobody claimed, they
    // are those ranks (in host order; with one missing that is certain), so a
    // 4-rank world never reads as ranks 0, 1, 2, 4. Otherwise (part of a job
    // logged) which ranks they hold is unknown and they go past the world size.
    let leftover = by_host.values().flatten().filter(|d| table.devices[d.ix()].global_rank.is_none()).count();
    let unclaimed = (world_size as usize).saturating_sub(used.len());
    let mut free = (0..world_size).filter(|r| !used.contains(r)).take(if leftover == unclaimed { leftover } else { 0 });
    let mut next = world_size;
    for devs in by_host.values() {
        for d in devs {
            if table.devices[d.ix()].global_rank.is_none() {
                let r = free.next().unwrap_or_else(|| {
                    next = next.saturating_add(1);
                    next - 1
                });
                table.devices[d.ix()].global_rank = Some(r);
            }
        }
    }
    true
}

/// Two handles of one logged `commId` that cannot both be right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommConflict {
    /// Both claim rank `rank`, from different processes (first, later in table order).
    Rank { comm_id: u64, rank: u32, first: CommIdx, later: CommIdx },
    /// They declare different sizes.
    Size { comm_id: u64, first: CommIdx, later: CommIdx },
}

/// Handles of one logical communicator (same `commId`) that contradict each
/// other: the same rank claimed by two processes (of a communicator not
/// declared single-rank), or two declared sizes. One
/// entry per later handle, naming the first one it contradicts. A process
/// with two handles of one `commId` is not a conflict (NCCL never does that,
/// but a log read twice used to).
pub fn comm_conflicts(table: &OpTable) -> Vec<CommConflict> {
    let mut claims: HashMap<(u64, u32), CommIdx> = HashMap::new();
    let mut sizes: HashMap<u64, CommIdx> = HashMap::new();
    let mut out = Vec::new();
    for (i, c) in table.comms.iter().enumerate() {
        let Some(id) = c.comm_id else { continue };
        let me = CommIdx(i as u32);
        if let Some(n) = c.nranks {
            match sizes.get(&id) {
                Some(&f) if table.comms[f.ix()].nranks != Some(n) => {
                    out.push(CommConflict::Size { comm_id: id, first: f, later: me });
                    continue;
                }
                Some(_) => {}
                None => {
                    sizes.insert(id, me);
                }
            }
        }
        // Single-rank communicators join nothing: never in conflict.
        if let Some(r) = c.rank.filter(|_| c.nranks != Some(1)) {
            match claims.get(&(id, r)) {
                Some(&f) if table.comms[f.ix()].proc != c.proc => {
                    out.push(CommConflict::Rank { comm_id: id, rank: r, first: f, later: me });
                }
                Some(_) => {}
                None => {
                    claims.insert((id, r), me);
                }
            }
        }
    }
    out
}

/// Orders members by rank in the communicator (else by global rank) and gives
/// each logical communicator a readable name: `world`, `comm3[0,1]`.
fn order_members_and_name(table: &mut OpTable) {
    let n_devices = table.devices.len();
    let world = world_comm(table).filter(|w| table.logical[w.ix()].nranks > 1);
    for (i, l) in table.logical.iter_mut().enumerate() {
        let key = |m: &CommIdx| {
            let c = &table.comms[m.ix()];
            let g = c.device.and_then(|d| table.devices[d.ix()].global_rank);
            (c.rank.unwrap_or(u32::MAX), g.unwrap_or(u32::MAX))
        };
        l.members.sort_by_key(key);
        let ranks: Vec<String> = l
            .members
            .iter()
            .map(|m| {
                let c = &table.comms[m.ix()];
                c.device
                    .and_then(|d| table.devices[d.ix()].global_rank)
                    .map_or_else(|| "?".into(), |g| g.to_string())
            })
            .collect();
        let is_world = world.is_some_and(|w| w.ix() == i) || (n_devices > 1 && l.members.len() == n_devices);
        l.name = if is_world {
            format!("world{i}")
        } else {
            let shown = if ranks.len() > 8 {
                format!("{},…,{}", ranks[..4].join(","), ranks[ranks.len() - 1])
            } else {
                ranks.join(",")
            };
            format!("comm{i}[{shown}]")
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::OpKind;
    use crate::model::{CommMember, Device, ProcIdx, Process};

    /// 4 processes, one GPU each; a world comm, and two TP groups of 2 that
    /// run identical op sequences and logged no commId.
    fn table(with_world: bool) -> OpTable {
        let mut t = OpTable::default();
        for (i, host) in ["nodeB", "nodeB", "nodeA", "nodeA"].iter().enumerate() {
            t.processes.push(Process { host: host.to_string(), pid: 100 + i as u32, nccl_version: None });
            t.devices.push(Device {
                proc: ProcIdx(i as u32),
                cuda_dev: Some((i % 2) as u32),
                nvml_dev: None,
                bus_id: Some(0x1000 * (1 + (i as u64 % 2))),
                global_rank: None,
                local_rank: None,
            });
            if with_world {
                let mut w = CommMember::new(ProcIdx(i as u32), 0xa000 + i as u64);
                w.comm_id = Some(0xfeed);
                w.nranks = Some(4);
                // world ranks in reverse process order: the init line, not the host order, decides.
                w.rank = Some(3 - i as u32);
                w.device = Some(DevIdx(i as u32));
                t.comms.push(w);
            }
            let mut tp = CommMember::new(ProcIdx(i as u32), 0xb000 + i as u64);
            tp.nranks = Some(2);
            tp.device = Some(DevIdx(i as u32));
            for _ in 0..5 {
                tp.note_op(OpKind::AllReduce);
            }
            tp.note_op(OpKind::Broadcast);
            t.comms.push(tp);
        }
        t
    }

    #[test]
    fn world_comm_gives_global_ranks() {
        let mut t = table(true);
        assemble(&mut t);
        let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
        assert_eq!(ranks, vec![3, 2, 1, 0]);
        // one world + two TP groups
        assert_eq!(t.logical.len(), 3);
        assert_eq!(t.logical.iter().filter(|l| l.grouping == Grouping::CommId).count(), 1);
        let tp: Vec<_> = t.logical.iter().filter(|l| l.grouping == Grouping::OpSequence).collect();
        assert_eq!(tp.len(), 2);
        for l in tp {
            assert_eq!(l.members.len(), 2);
            // members of a TP group share a host (contiguous layout)
            let hosts: Vec<_> = l
                .members
                .iter()
                .map(|m| &t.processes[t.comms[m.ix()].proc.ix()].host)
                .collect();
            assert_eq!(hosts[0], hosts[1]);
        }
    }

    /// A declared world of 2^31 ranks (or u32::MAX) with 4 seen: nothing is
    /// sized by the declaration (this ran out of memory under `ulimit -v`).
    #[test]
    fn huge_declared_world_is_not_allocated() {
        for n in [1u32 << 31, u32::MAX] {
            let mut t = table(true);
            for c in t.comms.iter_mut().filter(|c| c.comm_id == Some(0xfeed)) {
                c.nranks = Some(n);
            }
            assemble(&mut t);
            let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
            assert_eq!(ranks, vec![3, 2, 1, 0]);
            assert!(world_comm(&t).is_some());
        }
    }

    #[test]
    fn partial_world_keeps_logged_ranks() {
        let mut t = table(true);
        // Only 3 of the world's members were logged; one logged nothing.
        t.comms.retain(|c| c.ptr != 0xa003);
        t.comms[0].nranks = Some(8);
        for c in &mut t.comms {
            if c.comm_id == Some(0xfeed) {
                c.nranks = Some(8);
            }
        }
        assemble(&mut t);
        let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
        // Logged ranks 3,2,1; the unlogged device gets the first rank after the world size.
        assert_eq!(ranks, vec![3, 2, 1, 8]);
    }

    #[test]
    fn a_device_whose_world_rank_was_lost_takes_the_unclaimed_rank() {
        let mut t = table(true);
        // Process 1's world handle lost its rank (a cut init line); the others say 3, 1, 0.
        for c in t.comms.iter_mut().filter(|c| c.comm_id == Some(0xfeed) && c.device == Some(DevIdx(1))) {
            c.rank = None;
        }
        assemble(&mut t);
        let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
        assert_eq!(ranks, vec![3, 2, 1, 0]);
    }

    #[test]
    fn handles_without_comm_id_join_the_group_missing_their_rank() {
        let mut t = table(true);
        // The init lines of two world members were lost: no commId, but size and rank survived.
        t.comms[0].comm_id = None;
        t.comms[4].comm_id = None;
        assemble(&mut t);
        let world: Vec<_> = t.logical.iter().filter(|l| l.comm_id == Some(0xfeed)).collect();
        assert_eq!(world.len(), 1);
        assert_eq!(world[0].members.len(), 4);
        let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
        assert_eq!(ranks, vec![3, 2, 1, 0]);
    }

    #[test]
    fn hostname_order_without_init_lines() {
        let mut t = table(false);
        assemble(&mut t);
        // nodeA sorts first: processes 2,3 get ranks 0,1 by bus id.
        let ranks: Vec<_> = t.devices.iter().map(|d| d.global_rank.unwrap()).collect();
        assert_eq!(ranks, vec![2, 3, 0, 1]);
    }

    #[test]
    fn a_rank_claimed_by_two_processes_is_a_conflict() {
        let mut t = table(true);
        assert!(comm_conflicts(&t).is_empty());
        // Process 3 claims rank 3 of the world, which process 0 holds; process 2 another size.
        let w3 = t.comms.iter().position(|c| c.comm_id == Some(0xfeed) && c.rank == Some(0)).unwrap();
        t.comms[w3].rank = Some(3);
        let w2 = t.comms.iter().position(|c| c.comm_id == Some(0xfeed) && c.rank == Some(1)).unwrap();
        t.comms[w2].nranks = Some(8);
        let c = comm_conflicts(&t);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(matches!(c[0], CommConflict::Size { comm_id: 0xfeed, later, .. } if later.ix() == w2));
        assert!(matches!(c[1], CommConflict::Rank { comm_id: 0xfeed, rank: 3, first, later } if first.ix() == 0 && later.ix() == w3));
        // The same process holding two handles of one commId (one log read twice) is none.
        let mut t = table(true);
        let dup = t.comms[0].clone();
        t.comms.push(dup);
        assert!(comm_conflicts(&t).is_empty());
    }

    #[test]
    fn different_sequences_are_different_comms() {
        let mut t = table(false);
        t.comms[0].note_op(OpKind::AllGather);
        assemble(&mut t);
        // comm 0 now differs from its TP partner: 3 logical comms (one single).
        assert_eq!(t.logical.len(), 3);
        assert_eq!(t.logical.iter().filter(|l| l.grouping == Grouping::Single).count(), 2);
    }
}
