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
//! * **`X :` path lines** give one [`TopoPath`](commlens_core::topo::TopoPath) per `target (hops/bw/TYPE)` entry, the
//!   type as printed (`LOC`, `NVL`, `PIX`, `PHB`, `SYS`, `DIS`, …).
//! * **`Paths from` chains** give one [`TopoPath`](commlens_core::topo::TopoPath) per line: the target is the last node
//!   of the chain (the source itself for the bare ` (bw)` line, with 0 hops and `LOC`),
//!   hops = number of `--X->` steps, bw = the number in parentheses, and the kind is
//!   **classified the way NCCL types its paths** rather than taken from one step, so
//!   both dump forms give the same answer for the same machine: NVL steps give `NVL`
//!   (`NVB` when leaving an intermediate GPU), `SYS`/`C2C` steps give themselves, NET
//!   steps count as local, and PCI steps give `PHB` when the chain visits a CPU, `PIX`
//!   when it crosses at most one PCI switch, `PXB` otherwise; the path kind is the
//!   worst of these in NCCL's order (the order of [`LinkKind`](commlens_core::topo::LinkKind)). Checked against the
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
//! types other than GPU, CPU, NIC, NET, NVS and PCI all become [`NodeKind::Other`](commlens_core::topo::NodeKind::Other) and
//! share one id space; a GPU keeps the first rank printed for it.
//!
//! # Where the code lives
//!
//! This module owns the public face ([`TopoParser`], [`TopoLine`]) and block opening
//! and closing. The block state machine (line dispatch, indentation nesting of the
//! node section, node placement) is `topo_block`; the path lines of both forms and
//! NCCL's path typing are `topo_paths`; the byte-level grammar pieces (node
//! references, edges, suffixes, numbers) are `topo_lex`.

use super::topo_block::{Block, Outcome};
use super::topo_lex::{is_cpu_root, parse_header, trim_end};
use commlens_core::topo::Topology;

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
            let mut topo = Topology::default();
            (topo.max_bw_gb_s, topo.total_bw_gb_s) = (max_bw, total_bw);
            self.cur = Some(Block::new(topo));
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

#[cfg(test)]
#[path = "topo_tests.rs"]
mod tests;
