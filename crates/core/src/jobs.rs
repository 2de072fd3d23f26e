//! Jobs in one table: which processes belong together.
//!
//! Owns [`jobs`]: the processes joined by communicators. Two processes are in one job when
//! a logical communicator with members on both exists (a commId they share, or the
//! operation sequences `assemble` grouped); the jobs are the connected components. A table
//! whose inputs mixed two runs (two transcripts in one file, unrelated traces in one
//! folder) has several, and cross-rank figures (stragglers, clock offsets, bandwidth per
//! parallelism) would mix them; the CLI names them in a warning.

use crate::model::{OpTable, ProcIdx};

/// Processes per job, each job's processes in table order, jobs by their first process.
/// Processes that share no communicator with any other are jobs of their own.
pub fn jobs(t: &OpTable) -> Vec<Vec<ProcIdx>> {
    let n = t.processes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for l in &t.logical {
        let mut first: Option<usize> = None;
        for m in &l.members {
            let Some(c) = t.comms.get(m.ix()) else { continue };
            let p = c.proc.ix();
            if p >= n {
                continue;
            }
            match first {
                None => first = Some(p),
                Some(f) => {
                    let (a, b) = (find(&mut parent, f), find(&mut parent, p));
                    if a != b {
                        parent[a.max(b)] = a.min(b);
                    }
                }
            }
        }
    }
    let mut by_root: std::collections::BTreeMap<usize, Vec<ProcIdx>> = std::collections::BTreeMap::new();
    for p in 0..n {
        let r = find(&mut parent, p);
        by_root.entry(r).or_default().push(ProcIdx(p as u32));
    }
    by_root.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CommMember, Process};

    fn table(groups: &[&[u32]]) -> OpTable {
        let mut t = OpTable::default();
        let n = groups.iter().flat_map(|g| g.iter()).max().map_or(0, |m| m + 1);
        for i in 0..n {
            t.processes.push(Process { host: "h".into(), pid: 100 + i, nccl_version: None });
        }
        for (gi, g) in groups.iter().enumerate() {
            for &p in g.iter() {
                let mut c = CommMember::new(ProcIdx(p), 0x1000 + gi as u64 * 64 + p as u64);
                c.comm_id = Some(gi as u64 + 1);
                c.nranks = Some(g.len() as u32);
                t.comms.push(c);
            }
        }
        crate::assemble::assemble(&mut t);
        t
    }

    #[test]
    fn communicators_join_processes_into_jobs() {
        // Job A: 0,1,2,3 (a world and two TP pairs); job B: 4,5.
        let t = table(&[&[0, 1, 2, 3], &[0, 1], &[2, 3], &[4, 5]]);
        let j = jobs(&t);
        let ids: Vec<Vec<u32>> = j.iter().map(|g| g.iter().map(|p| p.0).collect()).collect();
        assert_eq!(ids, vec![vec![0, 1, 2, 3], vec![4, 5]]);
        // Chained groups make one job.
        let t = table(&[&[0, 1], &[1, 2], &[2, 3]]);
        assert_eq!(jobs(&t).len(), 1);
    }
}
