//! Raw traces into a [`Workload`]: process groups resolved across ranks (declared members,
//! rank start/stride, or the ranks whose traces use a group; every rank → the WORLD group),
//! each rank's nodes put in dependency order (Kahn's algorithm, file order breaking ties;
//! cycles, duplicate ids and data dependencies on absent nodes are errors), pass-through nodes
//! removed with their dependencies carried over, and streams assigned.
//!
//! Dependencies are kept small: tasks of one stream run in order, so a node's "frontier" is
//! the last task it needs on each stream, and a task lists only frontier tasks of other streams.

use super::raw::{RawTrace, What};
use super::ChakraError;
use crate::{
    CollCall, Compute, Group, GroupId, GroupKind, GroupSel, Origin, P2pCall, Peer, Program, Stream,
    Task, Work, Workload,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How the traces map to ranks.
pub(crate) enum Layout {
    /// `traces[r]` is rank `r`.
    PerRank,
    /// One trace stands for every rank of a `world`-rank job.
    Replicated { world: u32 },
}

struct Groups {
    /// Group name → the selector its tasks use (several groups share one selector when a
    /// replicated trace's group is laid out as consecutive blocks).
    by_name: HashMap<String, GroupSel>,
}

/// Last task per stream a node needs.
type Front = Vec<(Stream, u32)>;

fn merge(into: &mut Front, from: &[(Stream, u32)]) {
    for &(s, t) in from {
        match into.iter_mut().find(|(x, _)| *x == s) {
            Some(e) => e.1 = e.1.max(t),
            None => into.push((s, t)),
        }
    }
}

/// Per-trace renaming of process-local group ids (`local:<pointer>`) to their order of first
/// use, so the same group gets the same name on every rank.
fn localise(t: &mut RawTrace) {
    let mut seen: Vec<String> = Vec::new();
    for n in &mut t.nodes {
        let pg = match &mut n.what {
            What::Coll { pg, .. } | What::P2p { pg, .. } => pg,
            _ => continue,
        };
        if let Some(name) = pg.as_ref().filter(|p| p.starts_with("local:")) {
            let k = seen.iter().position(|s| s == name).unwrap_or_else(|| {
                seen.push(name.clone());
                seen.len() - 1
            });
            *pg = Some(format!("local#{k}"));
        }
    }
}

fn resolve_groups(traces: &[RawTrace], layout: &Layout, w: &mut Workload) -> Groups {
    let world = w.world;
    let all: Vec<u32> = (0..world).collect();
    w.groups.push(Group {
        kind: GroupKind::World,
        tag: 0,
        name: "world".into(),
        ranks: all.clone(),
    });
    for m in &mut w.membership {
        m.push(GroupId(0));
    }
    let mut by_name: HashMap<String, GroupSel> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut users: HashMap<String, Vec<u32>> = HashMap::new();
    for (r, t) in traces.iter().enumerate() {
        for n in &t.nodes {
            if let What::Coll { pg: Some(p), .. } | What::P2p { pg: Some(p), .. } = &n.what {
                let u = users.entry(p.clone()).or_insert_with(|| {
                    order.push(p.clone());
                    Vec::new()
                });
                if !u.contains(&(r as u32)) {
                    u.push(r as u32);
                }
            }
        }
    }
    let decl = |name: &str| {
        traces
            .iter()
            .flat_map(|t| &t.pgs)
            .filter(|p| p.name == name)
            .max_by_key(|p| p.ranks.len())
    };
    let mut next_tag = 0u32;
    for name in order {
        let d = decl(&name);
        let declared: Vec<u32> = d
            .map(|d| d.ranks.iter().copied().filter(|&r| r < world).collect())
            .unwrap_or_default();
        let size = d.and_then(|d| d.size);
        let blocks: Vec<Vec<u32>> = if !declared.is_empty() {
            vec![declared]
        } else if size.is_none_or(|s| s >= world)
            && (d.is_some() || matches!(layout, Layout::Replicated { .. }))
        {
            vec![all.clone()]
        } else if let Layout::Replicated { .. } = layout {
            let s = size.unwrap_or(world).max(1);
            w.notes.push(format!(
                "group {name}: {s} of {world} ranks, members unknown; assumed consecutive blocks"
            ));
            all.chunks(s as usize).map(|c| c.to_vec()).collect()
        } else {
            let mut u = users[&name].clone();
            u.sort_unstable();
            if let Some(s) = size.filter(|&s| s as usize != u.len()) {
                w.notes.push(format!(
                    "group {name}: declared {s} ranks, used by {} traces",
                    u.len()
                ));
            }
            vec![u]
        };
        if blocks.len() == 1 && blocks[0].len() == world as usize && {
            let mut s = blocks[0].clone();
            s.sort_unstable();
            s == all
        } {
            by_name.insert(name, GroupSel::of(GroupKind::World));
            continue;
        }
        let sel = GroupSel {
            kind: GroupKind::Other,
            tag: next_tag,
        };
        next_tag += 1;
        for (b, ranks) in blocks.into_iter().enumerate() {
            let id = GroupId(w.groups.len() as u32);
            for &r in &ranks {
                w.membership[r as usize].push(id);
            }
            let gname = if b == 0 {
                format!("pg:{name}")
            } else {
                format!("pg:{name}#{b}")
            };
            w.groups.push(Group {
                kind: GroupKind::Other,
                tag: sel.tag,
                name: gname,
                ranks,
            });
        }
        by_name.insert(name, sel);
    }
    Groups { by_name }
}

/// Kahn's algorithm, lowest file position first; on a cycle, a node on or behind it and how
/// many nodes never became ready.
fn topo(deps: &[Vec<usize>]) -> Result<Vec<usize>, (usize, usize)> {
    let n = deps.len();
    let mut indeg: Vec<u32> = deps.iter().map(|d| d.len() as u32).collect();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            children[j].push(i as u32);
        }
    }
    let mut heap: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indeg[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = heap.pop() {
        order.push(i);
        for &c in &children[i] {
            indeg[c as usize] -= 1;
            if indeg[c as usize] == 0 {
                heap.push(Reverse(c as usize));
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0);
        return Err((stuck, n - order.len()));
    }
    Ok(order)
}

/// One rank's program from its trace.
fn program(
    t: &RawTrace,
    rank: u32,
    w: &Workload,
    groups: &Groups,
    notes: &mut Vec<String>,
) -> Result<Program, ChakraError> {
    let file = || t.source.clone();
    let n = t.nodes.len();
    let mut pos: HashMap<u64, usize> = HashMap::with_capacity(n);
    for (i, node) in t.nodes.iter().enumerate() {
        if let Some(j) = pos.insert(node.id, i) {
            return Err(ChakraError::Graph {
                file: file(),
                message: format!(
                    "node id {} appears twice (records {j} and {i}); expected unique ids",
                    node.id
                ),
            });
        }
    }
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(n);
    let mut data_only: Vec<Vec<usize>> = Vec::with_capacity(n);
    let (mut missing_ctrl, mut self_deps) = (0usize, 0usize);
    for node in &t.nodes {
        let mut d = Vec::with_capacity(node.data_deps.len() + node.ctrl_deps.len());
        for &x in &node.data_deps {
            match pos.get(&x) {
                Some(_) if x == node.id => self_deps += 1,
                Some(&j) => d.push(j),
                None => {
                    return Err(ChakraError::Graph {
                        file: file(),
                        message: format!(
                            "node {} ({}) has a data dependency on node {x}, which the trace does not hold",
                            node.id, node.name
                        ),
                    })
                }
            }
        }
        let mut dd = d.clone();
        dd.sort_unstable();
        dd.dedup();
        data_only.push(dd);
        for &x in &node.ctrl_deps {
            match pos.get(&x) {
                Some(_) if x == node.id => self_deps += 1,
                Some(&j) => d.push(j),
                None => missing_ctrl += 1,
            }
        }
        d.sort_unstable();
        d.dedup();
        deps.push(d);
    }
    if missing_ctrl > 0 {
        notes.push(format!(
            "{}: {missing_ctrl} control dependencies name nodes absent from the trace (ignored)",
            t.source
        ));
    }
    if self_deps > 0 {
        notes.push(format!(
            "{}: {self_deps} self-dependencies ignored",
            t.source
        ));
    }
    let order = match topo(&deps) {
        Ok(o) => o,
        Err(_) => match topo(&data_only) {
            Ok(o) => {
                notes.push(format!(
                    "{}: control dependencies form cycles; ordered by data dependencies only",
                    t.source
                ));
                deps = data_only;
                o
            }
            Err((stuck, left)) => {
                let node = &t.nodes[stuck];
                return Err(ChakraError::Graph {
                    file: file(),
                    message: format!(
                        "dependency cycle: {left} of {n} nodes never become ready, e.g. node {} ({}); expected an acyclic graph",
                        node.id, node.name
                    ),
                });
            }
        },
    };
    // Streams: the trace's comm stream ids in order of first use.
    let mut comm_streams: Vec<i64> = Vec::new();
    let mut stream_of = |what: &What, hint: Option<i64>| -> Stream {
        if !what.is_comm() {
            return Stream::Compute;
        }
        let Some(h) = hint else {
            return Stream::Comm(0);
        };
        let k = comm_streams
            .iter()
            .position(|&s| s == h)
            .unwrap_or_else(|| {
                comm_streams.push(h);
                comm_streams.len() - 1
            });
        Stream::Comm(k.min(255) as u8)
    };
    let sel_of = |pg: &Option<String>| {
        pg.as_ref()
            .and_then(|p| groups.by_name.get(p).copied())
            .unwrap_or(GroupSel::of(GroupKind::World))
    };
    let mut fronts: Vec<Front> = vec![Vec::new(); n];
    let mut last: Front = Vec::new();
    let mut tasks: Vec<Task> = Vec::new();
    let mut off_group = 0usize;
    for &i in &order {
        let node = &t.nodes[i];
        let mut f: Front = Vec::new();
        for &j in &deps[i] {
            merge(&mut f, &fronts[j]);
        }
        let stream = stream_of(&node.what, node.stream_hint);
        let work = match &node.what {
            What::Skip => {
                fronts[i] = f;
                continue;
            }
            What::Compute {
                kind,
                time_us,
                flops,
                mem_bytes,
            } => Work::Compute(Compute {
                name: node.name.clone(),
                kind: *kind,
                flops: *flops,
                mem_bytes: *mem_bytes,
                time_us: *time_us,
            }),
            What::Coll {
                kind,
                count,
                dtype,
                redop,
                root,
                sync,
                pg,
            } => {
                let group = sel_of(pg);
                let root = w
                    .group_of(rank, group)
                    .and_then(|g| w.comm_rank(g, *root))
                    .unwrap_or(*root);
                Work::Coll(CollCall {
                    group,
                    kind: *kind,
                    count: *count,
                    dtype: *dtype,
                    redop: *redop,
                    root,
                    sync: *sync,
                    tag: 0,
                })
            }
            What::P2p {
                send,
                peer,
                count,
                dtype,
                tag,
                pg,
            } => {
                let group = sel_of(pg);
                let Some(p) = w.group_of(rank, group).and_then(|g| w.comm_rank(g, *peer)) else {
                    off_group += 1;
                    fronts[i] = f;
                    continue;
                };
                Work::P2p {
                    group,
                    calls: vec![P2pCall {
                        send: *send,
                        peer: Peer::Rank(p),
                        count: *count,
                        dtype: *dtype,
                        tag: *tag,
                    }],
                }
            }
            What::IterEnd { iter } => {
                f = last.clone();
                Work::IterationEnd { iter: *iter }
            }
        };
        let idx = tasks.len() as u32;
        let mut tdeps: Vec<u32> = f
            .iter()
            .filter(|(s, _)| *s != stream)
            .map(|&(_, t)| t)
            .collect();
        tdeps.sort_unstable();
        tdeps.dedup();
        tasks.push(Task {
            stream,
            deps: tdeps,
            phase: node.phase,
            work,
        });
        fronts[i] = vec![(stream, idx)];
        merge(&mut last, &[(stream, idx)]);
    }
    if off_group > 0 {
        notes.push(format!(
            "{}: {off_group} send/recv nodes name a peer outside their group (left out)",
            t.source
        ));
    }
    if !tasks
        .iter()
        .any(|t| matches!(t.work, Work::IterationEnd { .. }))
    {
        let deps = last
            .iter()
            .filter(|(s, _)| *s != Stream::Compute)
            .map(|&(_, t)| t)
            .collect();
        tasks.push(Task {
            stream: Stream::Compute,
            deps,
            phase: crate::Phase::Other,
            work: Work::IterationEnd { iter: 0 },
        });
    }
    Ok(Program { tasks })
}

/// Sends and receives that find no partner (by ranks, tag and bytes), for the notes.
fn unmatched_p2p(w: &Workload) -> usize {
    let mut bal: HashMap<(u32, u32, u64, u64), i64> = HashMap::new();
    for r in 0..w.world {
        for t in &w.program_of(r).tasks {
            let Work::P2p { group, calls } = &t.work else {
                continue;
            };
            let Some(g) = w.group_of(r, *group) else {
                continue;
            };
            for c in calls {
                let Peer::Rank(p) = c.peer else { continue };
                let Some(&peer) = w.group(g).ranks.get(p as usize) else {
                    continue;
                };
                let key = if c.send {
                    (r, peer, c.tag, c.bytes())
                } else {
                    (peer, r, c.tag, c.bytes())
                };
                *bal.entry(key).or_default() += if c.send { 1 } else { -1 };
            }
        }
    }
    bal.values().map(|v| v.unsigned_abs() as usize).sum()
}

/// Builds the workload; `traces` are in rank order for [`Layout::PerRank`].
pub(crate) fn build(
    name: &str,
    mut traces: Vec<RawTrace>,
    layout: Layout,
    mut notes: Vec<String>,
) -> Result<Workload, ChakraError> {
    let world = match layout {
        Layout::PerRank => traces.len() as u32,
        Layout::Replicated { world } => world,
    };
    for t in &mut traces {
        localise(t);
        notes.append(&mut t.notes);
    }
    let mut w = Workload {
        name: name.to_string(),
        origin: Origin::Chakra,
        world,
        gpus_per_node: None,
        iterations: 0,
        groups: Vec::new(),
        programs: Vec::new(),
        rank_program: Vec::new(),
        membership: vec![Vec::new(); world as usize],
        representative: Vec::new(),
        notes: Vec::new(),
    };
    let groups = resolve_groups(&traces, &layout, &mut w);
    let mut pnotes = Vec::new();
    for (r, t) in traces.iter().enumerate() {
        let rank = match layout {
            Layout::PerRank => r as u32,
            Layout::Replicated { .. } => t.rank_hint.filter(|&h| h < world).unwrap_or(0),
        };
        w.programs.push(program(t, rank, &w, &groups, &mut pnotes)?);
    }
    w.rank_program = match layout {
        Layout::PerRank => (0..world).collect(),
        Layout::Replicated { .. } => vec![0; world as usize],
    };
    let iters: Vec<u32> = w
        .programs
        .iter()
        .map(|p| {
            p.tasks
                .iter()
                .filter(|t| matches!(t.work, Work::IterationEnd { .. }))
                .count() as u32
        })
        .collect();
    w.iterations = iters.iter().copied().max().unwrap_or(0);
    if iters.iter().any(|&i| i != w.iterations) {
        pnotes.push(format!("ranks hold different iteration counts: {iters:?}"));
    }
    notes.extend(pnotes);
    let lost = unmatched_p2p(&w);
    if lost > 0 {
        notes.push(format!(
            "{lost} sends/receives have no matching partner (src, dst, tag, bytes)"
        ));
    }
    w.notes.splice(0..0, notes);
    w.validate().map_err(|m| ChakraError::Graph {
        file: name.to_string(),
        message: format!("built workload is inconsistent: {m}"),
    })?;
    Ok(w)
}
