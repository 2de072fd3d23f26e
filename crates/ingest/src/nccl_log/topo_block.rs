//! The state machine of one open topology block (see [`super::topo`] for the
//! grammar): dispatches each line by its form, nests the node section's `+` edges
//! by indentation (a stack of columns), and finds or adds nodes, reading a GPU's
//! rank from its suffix. Path lines are handed to `topo_paths`.

use super::topo_lex::{
    is_cpu_root, node_ref, parse_edge, parse_int, parse_suffix, skip_ws, NodeRef, Suffix,
};
use commlens_core::topo::{LinkKind, NodeKind, Topology};

/// Room for this many [`NodeKind`]s per id in [`Block::node`]'s index (a
/// kind beyond it just goes without the index).
const KINDS: usize = 8;

/// The block being parsed.
#[derive(Debug)]
pub(super) struct Block {
    pub(super) topo: Topology,
    /// After the separator (or the first path line): node lines are no longer expected.
    in_paths: bool,
    /// Nesting of the node section: (column of the `+`, node named on that line).
    /// The root line has column −1; `None` marks a line that could not be understood.
    stack: Vec<(i64, Option<usize>)>,
    /// Source of the current `Paths from X :` group.
    pub(super) path_src: Option<usize>,
    /// (from, to) of the paths already in `topo.paths`: keeps deduplication
    /// linear in the number of path entries.
    pub(super) path_keys: super::topo_paths::PairSet,
    /// Node index by id bytes (packed, [`id_key`]) and kind, for [`Block::node`].
    node_index: rustc_hash::FxHashMap<u128, [Option<usize>; KINDS]>,
    /// The previous path line's entries (see [`super::topo_paths::PathRows`]).
    pub(super) rows: super::topo_paths::PathRows,
}

/// An id of at most 15 bytes as one number: its bytes, and its length in
/// the top byte (so that ids of different lengths differ). Hashing it costs
/// two multiplications, a byte string's hash and comparison more.
#[inline]
pub(super) fn id_key(id: &[u8]) -> Option<u128> {
    if id.len() > 15 {
        return None;
    }
    let mut b = [0u8; 16];
    b[..id.len()].copy_from_slice(id);
    b[15] = id.len() as u8;
    Some(u128::from_le_bytes(b))
}

/// Result of one line inside an open block.
pub(super) enum Outcome {
    Ok,
    Malformed,
    /// Clearly not topology: the block ends, the line goes back to the caller.
    End,
    /// A root line after the path lines: the block ends, the line starts a new one.
    Restart,
}

impl Block {
    pub(super) fn new(topo: Topology) -> Block {
        Block {
            topo,
            in_paths: false,
            stack: Vec::new(),
            path_src: None,
            path_keys: Default::default(),
            node_index: Default::default(),
            rows: Default::default(),
        }
    }

    /// `Topology::node` for a node reference, remembered by its exact bytes:
    /// path lines name the same nodes again and again, and `Topology::node`
    /// compares every node (ignoring case). Nodes are only ever appended, so
    /// the node it returned for an id stays the first match for that id.
    /// Ids too long for the packed key (none seen) go to `Topology::node`
    /// every time.
    pub(super) fn node(&mut self, kind: NodeKind, id: &[u8]) -> usize {
        let id_str = || std::str::from_utf8(id).expect("node ids are ASCII");
        let k = kind as usize;
        let Some(key) = id_key(id).filter(|_| k < KINDS) else {
            return self.topo.node(kind, id_str());
        };
        if let Some(Some(i)) = self.node_index.get(&key).map(|by_kind| by_kind[k]) {
            return i;
        }
        let i = self.topo.node(kind, id_str());
        self.node_index.entry(key).or_insert([None; KINDS])[k] = Some(i);
        i
    }

    /// One line of an open block; `body` is the line without its indentation.
    pub(super) fn line(&mut self, indent: usize, body: &[u8]) -> Outcome {
        let Some(&first) = body.first() else {
            return Outcome::Malformed; // blank line inside a dump
        };
        if first == b'=' {
            // The separator (headers were handled by the caller). A line of `=` signs,
            // cut or not, is the separator; anything else starting with `=` is damaged.
            if body.iter().all(|&b| b == b'=') {
                self.in_paths = true;
                self.stack.clear();
                return Outcome::Ok;
            }
            if body.starts_with(b"====") {
                self.in_paths = true;
                self.stack.clear();
            }
            return Outcome::Malformed;
        }
        if let Some(rest) = body.strip_prefix(b"Paths from ") {
            self.in_paths = true;
            return self.paths_from(rest);
        }
        if first == b'+' {
            if self.in_paths {
                return Outcome::Malformed;
            }
            return self.edge(indent, body);
        }
        if body.starts_with(b"--") || first == b'(' {
            self.in_paths = true;
            return self.chain(body);
        }
        if let Some(r) = node_ref(body) {
            let after = skip_ws(r.rest);
            if let Some(entries) = after.strip_prefix(b":") {
                self.in_paths = true;
                return self.path_list(r, entries);
            }
            if indent == 0 && r.kind == NodeKind::Cpu {
                if !self.in_paths {
                    return self.root(r);
                }
                if is_cpu_root(body) {
                    return Outcome::Restart;
                }
            }
            return Outcome::Malformed;
        }
        if !(0x20..0x7f).contains(&first) {
            return Outcome::Malformed; // binary garbage
        }
        Outcome::End
    }

    /// `CPU/0-0 (1/1/2)`: a new root; its `+` lines in column 0 hang off it.
    fn root(&mut self, r: NodeRef<'_>) -> Outcome {
        self.stack.clear();
        let (node, ok) = self.place(r, true);
        self.stack.push((-1, node));
        if ok {
            Outcome::Ok
        } else {
            Outcome::Malformed
        }
    }

    /// `+ LINK[bw] - TYPE/id[ (suffix)]` at column `indent`.
    fn edge(&mut self, indent: usize, body: &[u8]) -> Outcome {
        let col = indent as i64;
        while matches!(self.stack.last(), Some(&(c, _)) if c >= col) {
            self.stack.pop();
        }
        let parent = self.stack.last().and_then(|&(_, n)| n);
        let Some((link, bw, r)) = parse_edge(body) else {
            self.stack.push((col, None));
            return Outcome::Malformed;
        };
        // A node reached over PCI is printed as a node of its own (NCCL recurses into
        // it), with its suffix; other links print the remote node bare.
        let required = link == LinkKind::Pci
            && matches!(r.kind, NodeKind::Cpu | NodeKind::Gpu | NodeKind::PciSwitch);
        let (child, ok) = self.place(r, required);
        self.stack.push((col, child));
        match (parent, child) {
            (Some(p), Some(c)) => {
                self.topo.add_link(p, c, link, bw);
                if ok {
                    Outcome::Ok
                } else {
                    Outcome::Malformed
                }
            }
            _ => Outcome::Malformed,
        }
    }

    /// Finds or adds the node of a node line, reading a GPU's rank from its suffix.
    /// Returns the node (None when the id itself may be damaged) and whether the line
    /// was entirely understood.
    fn place(&mut self, r: NodeRef<'_>, suffix_required: bool) -> (Option<usize>, bool) {
        // An id followed by a blank was printed whole, whatever comes after it.
        let id_whole = matches!(r.rest.first(), Some(b' ' | b'\t'));
        match parse_suffix(r.rest) {
            Suffix::None if suffix_required => (None, false),
            Suffix::None => (Some(self.node(r.kind, r.id)), true),
            Suffix::Paren(content) => {
                let idx = self.node(r.kind, r.id);
                if r.kind != NodeKind::Gpu {
                    return (Some(idx), true);
                }
                match parse_int(content).and_then(|(v, rest)| rest.is_empty().then_some(v)) {
                    Some(rank) if (0..=u32::MAX as i64).contains(&rank) => {
                        let node = &mut self.topo.nodes[idx];
                        if node.rank.is_none() {
                            node.rank = Some(rank as u32);
                        }
                        (Some(idx), true)
                    }
                    _ => (Some(idx), false),
                }
            }
            Suffix::Bad if id_whole => (Some(self.node(r.kind, r.id)), false),
            Suffix::Bad => (None, false),
        }
    }
}
