//! Parser for the topology dump that NCCL prints at initialization under
//! `NCCL_DEBUG=INFO` (subsystem GRAPH), turned into [`Topology`] values.
//!
//! This module owns the grammar of the dump as it appears in the *message* part of a
//! log line (the text after `NCCL INFO `); splitting the line prefix, keying lines by
//! `host:pid:tid`, setting [`Topology::host`] and choosing which block to keep (the
//! thesis uses the first one) are the caller's job.
//!
//! # Grammar (one block)
//!
//! ```text
//! === System : maxBw 240.0 totalBw 240.0 ===            header, opens a block
//! CPU/0-0 (1/1/2)                                       root node, column 0
//! + PCI[24.0] - GPU/0-17000 (0)                         edge of the root
//!               + NVL[240.0] - GPU/0-65000              edge of GPU/0-17000 (deeper)
//! + PCI[24.0] - PCI/C000 (11f8400011f8beef)             PCI switch (suffix: device id)
//!               + PCI[24.0] - NIC/9A000
//!                             + NET[7.0] - NET/0 (9cc7170003fd7010/1/7.000000)
//! + SYS[10.0] - CPU/1                                   refers back to another root
//! ==========================================            separator
//! GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) CPU/0-0 (1/24.0/PHB)
//! ```
//!
//! or, in TRACE builds (2.18.1 with GRAPH), instead of the `X :` path lines:
//!
//! ```text
//! Paths from GPU/F000 :
//!  (5000.000000)                                        path to itself
//! --PCI->PCI/C000--PCI->CPU/0--SYS->CPU/1--PCI->PCI/98000--PCI->GPU/9B000 (10.000000)
//! ```
//!
//! * **Nesting** is by indentation. The parent of a `+` line is the most recent node
//!   line with a smaller indentation: the root `CPU/…` line for a `+` in column 0
//!   (the root counts as column −1), the node named by the previous less-indented
//!   edge for deeper ones. Each edge adds a [`TopoLink`](commlens_core::topo::TopoLink)
//!   parent → child with the printed kind and bandwidth (GB/s). Edges that name an
//!   existing node (`+ SYS[10.0] - CPU/1`, the mirrored NVL edge) only add a link.
//! * **Node identity** is (kind, id), the id compared case-insensitively
//!   ([`Topology::node`]). Ids must be `hex` or `hex-hex` (`F000`, `0-17000`, `0-a`).
//! * **Ranks**: the `(n)` suffix of a GPU sets [`TopoNode::rank`](commlens_core::topo::TopoNode);
//!   the suffixes of CPUs `(arch/vendor/model)`, PCI switches `(device)` and NETs
//!   `(guid/port/bw)` are not ranks and are ignored.
//! * **`X :` path lines** give one [`TopoPath`] per `target (hops/bw/TYPE)` entry, the
//!   type as printed (`LOC`, `NVL`, `PIX`, `PHB`, `SYS`, `DIS`, …).
//! * **`Paths from` chains** give one [`TopoPath`] per line: the target is the last node
//!   of the chain (the source itself for the bare ` (bw)` line, with 0 hops and `LOC`),
//!   hops = number of `--X->` steps, bw = the number in parentheses, and the kind is
//!   **classified the way NCCL types its paths** rather than taken from one step, so
//!   both dump forms give the same answer for the same machine: NVL steps give `NVL`
//!   (`NVB` when leaving an intermediate GPU), `SYS`/`C2C` steps give themselves, NET
//!   steps count as local, and PCI steps give `PHB` when the chain visits a CPU, `PIX`
//!   when it crosses at most one PCI switch, `PXB` otherwise; the path kind is the
//!   worst of these in NCCL's order (the order of [`LinkKind`]). Checked against the
//!   `X :` lines NCCL printed for the same 2.18.1 machine in the tests.
//! * Paths are deduplicated by (from, to): the first one printed is kept (2.28.9
//!   repeats NET nodes and their path lines).
//!
//! # Block boundaries and [`TopoLine::BlockDone`]
//!
//! A block ends at the first line that is clearly not part of a dump (returned as
//! [`TopoLine::NotTopology`] so the caller can classify it), at a new header, at a new
//! `CPU/… (a/b/c)` root after the path lines, or at [`TopoParser::finish`]. The dump
//! does not announce its last line, so the end is only seen on the *following* line:
//! * a header or root that closes a block is consumed and returns `BlockDone`;
//! * a non-topology line that closes a block returns `NotTopology` (the enum cannot say
//!   both); the finished block is nevertheless available from
//!   [`TopoParser::take_blocks`] right away;
//! * `finish` closes the last block.
//!
//! Callers should therefore call `take_blocks` after `finish` (and may call it any
//! time before). Blocks without any node are dropped (e.g. a header whose body was lost
//! to interleaving).
//!
//! # Damaged input
//!
//! Lines inside a block that look like dump lines (start with `+`, `=`, `--`, `(`,
//! `Paths from` or a `TYPE/hexid` node reference) but cannot be parsed, and lines
//! starting with a control or non-ASCII byte, are counted in
//! [`TopoParser::malformed_lines`] and do not end the block. A line whose id is followed
//! by a space is trusted even when its suffix is damaged (counted, node kept); a line
//! cut inside an id is dropped, and so are deeper lines hanging off it (counted: their
//! parent is unknown). A GPU, CPU or PCI switch printed as a node (root or PCI edge)
//! must carry its `(…)` suffix, which is how `+ PCI[24.0] - GPU/0-41` (cut short) is
//! detected. A path line cut at NCCL's 1023-byte line limit keeps its complete entries
//! and is not counted. When the header itself was lost (interleaved writers), a
//! well-formed root line `CPU/<id> (<int>/<int>/<int>)` opens a block with
//! `maxBw`/`totalBw` 0.
//!
//! Parsing works on bytes, never panics, and allocates only for new nodes, links and
//! paths.
//!
//! Limitations: a line cut right after an id that needs no suffix (`+ NVL[240.0] -
//! GPU/0-65` for `GPU/0-65000`) cannot be told from a whole one and adds a wrong node;
//! whether a line is "clearly not topology" is judged from its start, so a printable
//! fragment that lost the beginning of a dump line (`0-41000 (1)`) ends the block early,
//! and a non-dump message of the form `TYPE/<hex>` (none seen in NCCL's vocabulary:
//! `NET/IB`, `NET/OFI`, `NET/Socket` are not hex) would be taken as a dump line; node
//! types other than GPU, CPU, NIC, NET, NVS and PCI all become [`NodeKind::Other`] and
//! share one id space; a GPU keeps the first rank printed for it.

use commlens_core::topo::{LinkKind, NodeKind, TopoPath, Topology};

/// What `feed` made of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopoLine {
    /// Not part of a dump; if a block was open it is closed (see the module doc).
    NotTopology,
    /// A dump line (possibly malformed, see [`TopoParser::malformed_lines`]).
    Consumed,
    /// A dump line that closed the previous block: a [`Topology`] is ready.
    BlockDone,
}

/// Streaming parser for the topology dumps of one thread of one process.
#[derive(Debug, Default)]
pub struct TopoParser {
    cur: Option<Block>,
    done: Vec<Topology>,
    malformed: u64,
}

/// The block being parsed.
#[derive(Debug)]
struct Block {
    topo: Topology,
    /// After the separator (or the first path line): node lines are no longer expected.
    in_paths: bool,
    /// Nesting of the node section: (column of the `+`, node named on that line).
    /// The root line has column −1; `None` marks a line that could not be understood.
    stack: Vec<(i64, Option<usize>)>,
    /// Source of the current `Paths from X :` group.
    path_src: Option<usize>,
    /// (from, to) of the paths already in `topo.paths`: keeps deduplication
    /// linear in the number of path entries.
    path_keys: rustc_hash::FxHashSet<(usize, usize)>,
}

/// Result of one line inside an open block.
enum Outcome {
    Ok,
    Malformed,
    /// Clearly not topology: the block ends, the line goes back to the caller.
    End,
    /// A root line after the path lines: the block ends, the line starts a new one.
    Restart,
}

impl TopoParser {
    pub fn new() -> Self {
        TopoParser::default()
    }

    /// `msg` is the message after `NCCL INFO ` with its leading spaces preserved (indentation
    /// matters) and no trailing newline/`\r`. Returns NotTopology for lines that are not part of a
    /// dump (so the caller can classify them otherwise), Consumed for dump lines, BlockDone when a
    /// block (header…nodes…separator…path lines) ended and a Topology is ready.
    pub fn feed(&mut self, msg: &[u8]) -> TopoLine {
        let line = trim_end(msg);
        let indent = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let body = &line[indent..];

        if body.starts_with(b"=== System") {
            let closed = self.close();
            let (max_bw, total_bw, ok) = parse_header(body);
            if !ok {
                self.malformed += 1;
            }
            self.cur = Some(Block::new(Topology {
                max_bw_gb_s: max_bw,
                total_bw_gb_s: total_bw,
                ..Topology::default()
            }));
            return if closed {
                TopoLine::BlockDone
            } else {
                TopoLine::Consumed
            };
        }

        let Some(block) = self.cur.as_mut() else {
            if indent == 0 && is_cpu_root(body) {
                self.open_implicit(body);
                return TopoLine::Consumed;
            }
            return TopoLine::NotTopology;
        };

        match block.line(indent, body) {
            Outcome::Ok => TopoLine::Consumed,
            Outcome::Malformed => {
                self.malformed += 1;
                TopoLine::Consumed
            }
            Outcome::End => {
                self.close();
                TopoLine::NotTopology
            }
            Outcome::Restart => {
                let closed = self.close();
                self.open_implicit(body);
                if closed {
                    TopoLine::BlockDone
                } else {
                    TopoLine::Consumed
                }
            }
        }
    }

    /// Call at end of input: closes an unfinished block.
    pub fn finish(&mut self) {
        self.close();
    }

    /// Takes the completed blocks so far, in order (the caller applies the thesis's first-block rule).
    pub fn take_blocks(&mut self) -> Vec<Topology> {
        std::mem::take(&mut self.done)
    }

    /// Number of lines inside a dump that could not be understood.
    pub fn malformed_lines(&self) -> u64 {
        self.malformed
    }

    /// Closes the open block; true when it produced a (non-empty) topology.
    fn close(&mut self) -> bool {
        match self.cur.take() {
            Some(b) if !b.topo.nodes.is_empty() => {
                self.done.push(b.topo);
                true
            }
            _ => false,
        }
    }

    /// Opens a block whose header was lost, starting with a well-formed CPU root line.
    fn open_implicit(&mut self, root_line: &[u8]) {
        let mut block = Block::new(Topology::default());
        if let Outcome::Malformed = block.line(0, root_line) {
            self.malformed += 1; // unreachable for lines that passed `is_cpu_root`
        }
        self.cur = Some(block);
    }
}

impl Block {
    /// Keeps the first path per (from, to): 2.28 repeats NET nodes and their paths.
    fn add_path(&mut self, p: TopoPath) {
        if self.path_keys.insert((p.from, p.to)) {
            self.topo.paths.push(p);
        }
    }

    fn new(topo: Topology) -> Block {
        Block {
            topo,
            in_paths: false,
            stack: Vec::new(),
            path_src: None,
            path_keys: Default::default(),
        }
    }

    /// One line of an open block; `body` is the line without its indentation.
    fn line(&mut self, indent: usize, body: &[u8]) -> Outcome {
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
            Suffix::None => (Some(self.topo.node(r.kind, r.id)), true),
            Suffix::Paren(content) => {
                let idx = self.topo.node(r.kind, r.id);
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
            Suffix::Bad if id_whole => (Some(self.topo.node(r.kind, r.id)), false),
            Suffix::Bad => (None, false),
        }
    }

    /// `GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) …`
    fn path_list(&mut self, src: NodeRef<'_>, entries: &[u8]) -> Outcome {
        let from = self.topo.node(src.kind, src.id);
        let mut s = entries;
        loop {
            s = skip_ws(s);
            if s.is_empty() {
                return Outcome::Ok;
            }
            match parse_path_entry(s) {
                Some((target, hops, bw, kind, rest)) => {
                    let to = self.topo.node(target.kind, target.id);
                    self.add_path(
                        TopoPath {
                            from,
                            to,
                            hops,
                            bw_gb_s: bw,
                            kind,
                        },
                    );
                    s = rest;
                }
                // Cut at NCCL's line-length limit: the complete entries are kept.
                None if !s.contains(&b')') => return Outcome::Ok,
                None => return Outcome::Malformed,
            }
        }
    }

    /// `Paths from GPU/F000 :` starts a group of chain lines.
    fn paths_from(&mut self, rest: &[u8]) -> Outcome {
        self.path_src = None;
        let Some(r) = node_ref(rest) else {
            return Outcome::Malformed;
        };
        let after = skip_ws(r.rest);
        if after != b":" {
            return Outcome::Malformed;
        }
        self.path_src = Some(self.topo.node(r.kind, r.id));
        Outcome::Ok
    }

    /// `--PCI->PCI/C000--PCI->CPU/0 (24.000000)` or ` (5000.000000)` (path to itself).
    fn chain(&mut self, body: &[u8]) -> Outcome {
        let Some(from) = self.path_src else {
            return Outcome::Malformed;
        };
        let mut class = PathClass::new(self.topo.nodes[from].kind);
        let mut hops = 0u32;
        let mut last: Option<NodeRef<'_>> = None;
        let mut s = body;
        while let Some(step) = s.strip_prefix(b"--") {
            let Some((link, rest)) = upper_word(step) else {
                return Outcome::Malformed;
            };
            let Some(rest) = rest.strip_prefix(b"->") else {
                return Outcome::Malformed;
            };
            let Some(r) = node_ref(rest) else {
                return Outcome::Malformed;
            };
            class.step(LinkKind::from_name(link), r.kind);
            hops = hops.saturating_add(1);
            s = r.rest;
            last = Some(r);
        }
        let s = skip_ws(s);
        let Some(s) = s.strip_prefix(b"(") else {
            return Outcome::Malformed;
        };
        let Some((bw, s)) = parse_bw(s) else {
            return Outcome::Malformed;
        };
        if s != b")" {
            return Outcome::Malformed;
        }
        let (to, kind) = match last {
            Some(r) => (self.topo.node(r.kind, r.id), class.kind()),
            None => (from, LinkKind::Loc),
        };
        self.add_path(
            TopoPath {
                from,
                to,
                hops,
                bw_gb_s: bw,
                kind,
            },
        );
        Outcome::Ok
    }
}

/// NCCL's path typing, recomputed from the link types of a `Paths from` chain.
struct PathClass {
    worst: LinkKind,
    prev: NodeKind,
    first: bool,
    pci: bool,
    cpu: bool,
    pci_switches: u32,
}

impl PathClass {
    fn new(source: NodeKind) -> PathClass {
        PathClass {
            worst: LinkKind::Loc,
            prev: source,
            first: true,
            pci: false,
            cpu: false,
            pci_switches: 0,
        }
    }

    fn step(&mut self, link: LinkKind, to: NodeKind) {
        let kind = match link {
            LinkKind::Nvl | LinkKind::Nvb if !self.first && self.prev == NodeKind::Gpu => {
                Some(LinkKind::Nvb)
            }
            LinkKind::Nvl | LinkKind::Nvb => Some(LinkKind::Nvl),
            LinkKind::Pci => {
                self.pci = true;
                None
            }
            // NCCL treats the NIC-to-network hop as local.
            LinkKind::Loc | LinkKind::Net => None,
            other => Some(other),
        };
        if let Some(k) = kind {
            self.worst = self.worst.max(k);
        }
        match to {
            NodeKind::Cpu => self.cpu = true,
            NodeKind::PciSwitch => self.pci_switches += 1,
            _ => {}
        }
        self.prev = to;
        self.first = false;
    }

    fn kind(&self) -> LinkKind {
        if !self.pci {
            return self.worst;
        }
        let pci = if self.cpu {
            LinkKind::Phb
        } else if self.pci_switches <= 1 {
            LinkKind::Pix
        } else {
            LinkKind::Pxb
        };
        self.worst.max(pci)
    }
}

/// Adds a path unless one with the same ends is already there (the first printed wins).


// ---------------------------------------------------------------------------------
// Byte-level pieces. Every function takes a slice and returns sub-slices; none indexes
// past what it checked.

/// A `TYPE/id` node reference and what follows it.
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    kind: NodeKind,
    id: &'a str,
    rest: &'a [u8],
}

/// `GPU/0-17000`, `PCI/C000`, `NET/0`: an upper-case type name, `/`, and an id of the
/// form `hex` or `hex-hex`. A second `-` is not taken (it starts a `--LINK->` step).
fn node_ref(s: &[u8]) -> Option<NodeRef<'_>> {
    let (name, rest) = upper_word(s)?;
    if !name.iter().all(u8::is_ascii_uppercase) {
        return None;
    }
    let rest = rest.strip_prefix(b"/")?;
    let mut n = hex_len(rest);
    if n == 0 {
        return None;
    }
    if rest.get(n) == Some(&b'-') {
        let tail = hex_len(&rest[n + 1..]);
        if tail > 0 {
            n += 1 + tail;
        }
    }
    let id = std::str::from_utf8(&rest[..n]).ok()?;
    Some(NodeRef {
        kind: NodeKind::from_name(name),
        id,
        rest: &rest[n..],
    })
}

fn hex_len(s: &[u8]) -> usize {
    s.iter().take_while(|b| b.is_ascii_hexdigit()).count()
}

/// 1 to 8 upper-case letters or digits starting with a letter (`PCI`, `NVL`, `C2C`).
fn upper_word(s: &[u8]) -> Option<(&[u8], &[u8])> {
    if !s.first()?.is_ascii_uppercase() {
        return None;
    }
    let n = s
        .iter()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        .count();
    if n > 8 {
        return None;
    }
    Some(s.split_at(n))
}

enum Suffix<'a> {
    /// Nothing after the id.
    None,
    /// ` (content)` and nothing after it.
    Paren(&'a [u8]),
    /// Anything else.
    Bad,
}

fn parse_suffix(rest: &[u8]) -> Suffix<'_> {
    if rest.is_empty() {
        return Suffix::None;
    }
    let s = skip_ws(rest);
    if s.len() == rest.len() {
        return Suffix::Bad; // the id runs into something
    }
    let Some(s) = s.strip_prefix(b"(") else {
        return Suffix::Bad;
    };
    let n = s
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/' || b == b'-')
        .count();
    if n == 0 || &s[n..] != b")" {
        return Suffix::Bad;
    }
    Suffix::Paren(&s[..n])
}

/// `+ PCI[24.0] - GPU/0-17000 (0)` → (link kind, GB/s, node reference).
fn parse_edge(body: &[u8]) -> Option<(LinkKind, f64, NodeRef<'_>)> {
    let s = skip_ws(body.strip_prefix(b"+")?);
    let (name, s) = upper_word(s)?;
    let s = skip_ws(s.strip_prefix(b"[")?);
    let (bw, s) = parse_bw(s)?;
    let s = skip_ws(s.strip_prefix(b"]")?);
    let s = skip_ws(s.strip_prefix(b"-")?);
    let r = node_ref(s)?;
    Some((LinkKind::from_name(name), bw, r))
}

/// `GPU/0-65000 (1/240.0/NVL)` → (target, hops, GB/s, type, rest of the line).
fn parse_path_entry(s: &[u8]) -> Option<(NodeRef<'_>, u32, f64, LinkKind, &[u8])> {
    let r = node_ref(s)?;
    let t = skip_ws(r.rest);
    if t.len() == r.rest.len() {
        return None;
    }
    let t = t.strip_prefix(b"(")?;
    let (hops, t) = parse_int(t)?;
    let hops = u32::try_from(hops).ok()?;
    let t = t.strip_prefix(b"/")?;
    let (bw, t) = parse_bw(t)?;
    let t = t.strip_prefix(b"/")?;
    let (name, t) = upper_word(t)?;
    let t = t.strip_prefix(b")")?;
    if !matches!(t.first(), None | Some(b' ' | b'\t')) {
        return None;
    }
    Some((r, hops, bw, LinkKind::from_name(name), t))
}

/// `=== System : maxBw 240.0 totalBw 240.0 ===` → (maxBw, totalBw, well-formed). The
/// values that could be read are returned even when the line is damaged.
fn parse_header(body: &[u8]) -> (f64, f64, bool) {
    let mut max_bw = 0.0;
    let mut total_bw = 0.0;
    let ok = (|| {
        let s = skip_ws(body.strip_prefix(b"=== System")?);
        let s = skip_ws(s.strip_prefix(b":")?);
        let s = skip_ws(s.strip_prefix(b"maxBw")?);
        let (m, s) = parse_bw(s)?;
        max_bw = m;
        let s = skip_ws(skip_ws(s).strip_prefix(b"totalBw")?);
        let (t, s) = parse_bw(s)?;
        total_bw = t;
        let s = skip_ws(s).strip_prefix(b"===")?;
        s.iter().all(|&b| b == b'=').then_some(())
    })()
    .is_some();
    (max_bw, total_bw, ok)
}

/// `CPU/0-0 (1/1/2)`, `CPU/1 (1/2/-1)`: a root line strict enough to open a block
/// whose header was lost.
fn is_cpu_root(body: &[u8]) -> bool {
    let Some(r) = node_ref(body) else {
        return false;
    };
    if r.kind != NodeKind::Cpu {
        return false;
    }
    let Suffix::Paren(c) = parse_suffix(r.rest) else {
        return false;
    };
    let mut s = c;
    for i in 0..3 {
        let Some((_, rest)) = parse_int(s) else {
            return false;
        };
        s = rest;
        if i < 2 {
            let Some(rest) = s.strip_prefix(b"/") else {
                return false;
            };
            s = rest;
        }
    }
    s.is_empty()
}

/// A decimal bandwidth (`24.0`, `5000.000000`): finite and not negative.
fn parse_bw(s: &[u8]) -> Option<(f64, &[u8])> {
    let n = s
        .iter()
        .take_while(|&&b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        .count();
    if n == 0 || n > 40 || !s[0].is_ascii_digit() {
        return None;
    }
    let v: f64 = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some((v, &s[n..]))
}

/// An optionally negative decimal integer of at most 18 digits.
fn parse_int(s: &[u8]) -> Option<(i64, &[u8])> {
    let (neg, t) = match s.strip_prefix(b"-") {
        Some(t) => (true, t),
        None => (false, s),
    };
    let n = t.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in &t[..n] {
        v = v * 10 + i64::from(d - b'0');
    }
    Some((if neg { -v } else { v }, &t[n..]))
}

fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[n..]
}

fn trim_end(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .rev()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &s[..s.len() - n]
}

#[cfg(test)]
#[path = "topo_tests.rs"]
mod tests;
