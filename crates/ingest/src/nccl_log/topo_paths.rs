//! The path lines of a topology block: `X :` lists (one path per entry, the type as
//! printed), `Paths from X :` groups and their `--LINK->` chains (the type
//! recomputed the way NCCL types its paths, [`PathClass`]), and deduplication of
//! paths by (from, to). See [`super::topo`] for the grammar.

use super::topo_block::{Block, Outcome};
use super::topo_lex::{node_ref, parse_bw, parse_path_entry, skip_ws, upper_word, NodeRef};
use commlens_core::topo::{LinkKind, NodeKind, TopoPath};

impl Block {
    /// Keeps the first path per (from, to): 2.28 repeats NET nodes and their paths.
    fn add_path(&mut self, p: TopoPath) {
        if self.path_keys.insert((p.from, p.to)) {
            self.topo.paths.push(p);
        }
    }

    /// `GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) …`
    pub(super) fn path_list(&mut self, src: NodeRef<'_>, entries: &[u8]) -> Outcome {
        let from = self.node(src.kind, src.id);
        let mut s = entries;
        loop {
            s = skip_ws(s);
            if s.is_empty() {
                return Outcome::Ok;
            }
            match parse_path_entry(s) {
                Some((target, hops, bw, kind, rest)) => {
                    let to = self.node(target.kind, target.id);
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
    pub(super) fn paths_from(&mut self, rest: &[u8]) -> Outcome {
        self.path_src = None;
        let Some(r) = node_ref(rest) else {
            return Outcome::Malformed;
        };
        let after = skip_ws(r.rest);
        if after != b":" {
            return Outcome::Malformed;
        }
        self.path_src = Some(self.node(r.kind, r.id));
        Outcome::Ok
    }

    /// `--PCI->PCI/C000--PCI->CPU/0 (24.000000)` or ` (5000.000000)` (path to itself).
    pub(super) fn chain(&mut self, body: &[u8]) -> Outcome {
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
            Some(r) => (self.node(r.kind, r.id), class.kind()),
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
