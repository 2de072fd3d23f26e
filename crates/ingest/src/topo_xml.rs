//! Reader for the topology XML that NCCL writes with `NCCL_TOPO_DUMP_FILE=path`,
//! turned into the same [`Topology`] the log reader ([`crate::nccl_log`]) builds from
//! the `=== System` dump NCCL prints for that machine.
//!
//! This module owns the public face ([`read_topo_xml`], [`is_topo_xml`],
//! [`looks_like_topo_xml`]), the nesting of elements and the errors that name the
//! file and line. The tokenizer is `topo_xml::lex`; what each element means to NCCL
//! is `topo_xml::elements`; NCCL's model, its bandwidth constants and the print walk
//! that yields the [`Topology`] are `topo_xml::graph`.
//!
//! # Format
//!
//! ```text
//! <system version="1">
//!   <cpu host_hash="0x…" numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="106">
//!     <pci busid="0000:17:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
//!       <gpu dev="0" sm="80" rank="0" gdr="1">
//!         <nvlink target="0000:65:00.0" count="12" tclass="0x030200"/>
//!       </gpu>
//!     </pci>
//!     <pci busid="0000:4b:00.0" class="0x020000" …>  <nic> <net name="mlx5_0" dev="0" speed="100000" …/> </nic> </pci>
//!     <nic> <net …/> </nic>                      (a NIC without PCI device, e.g. virtual interfaces)
//!   </cpu>
//! </system>
//! ```
//!
//! Nested `<pci>` elements are PCI switches. Attributes may come in any order with
//! either quote; comments, `<?xml …?>`, a byte-order mark and CRLF line ends are
//! accepted; elements and attributes NCCL does not use are skipped.
//!
//! # From XML to topology (NCCL's `ncclTopoGetSystemFromXml`, checked against `NVIDIA/nccl`)
//!
//! * **CPU** per `<cpu>`, id `S-numaid` where `S` is the index of its `host_hash` among
//!   the hashes seen (0 for a one-host file). CPUs of one host are joined pairwise by
//!   SYS links whose bandwidth depends on arch/vendor/family/model (see
//!   `graph::inter_cpu_bw`).
//! * **`<pci>`** becomes a GPU when it holds a `<gpu>` with a `rank` (a `<gpu>` without
//!   rank is not part of the communicator and is left out, as NCCL does), a NIC when it
//!   holds a `<nic>`, a PCI switch when its class is a bridge (`0x0604…` or any class not
//!   GPU `0x03…`/NIC `0x02…`), and nothing otherwise. Its link to its parent is PCI in
//!   both directions, `link_width × rate(link_speed) / 80` GB/s (Gen4 x16 = 24.0).
//!   Ids are the bus id as NCCL packs it: `0000:17:00.0` → `S-17000`.
//! * **`<nic>` directly under `<cpu>`** is one NIC with local id 0 for the host, attached
//!   to the first such CPU by a PCI link of `LOC_BW` (5000); every `<net>` of every such
//!   `<nic>` hangs off it (NCCL 2.28 prints it that way).
//! * **`<net>`** with a `dev` is a NET node `S-dev` linked from its NIC by a NET link of
//!   `speed / 8000` GB/s (Mb/s; ≤ 0 counts as 10000). The same `dev` listed under several
//!   CPUs is one node.
//! * **`<nvlink count tclass target>`** under a GPU: to a GPU (class `0x03…`), one NVL
//!   link from this GPU of `count × per-link GB/s` by the GPU's `sm` (SM80 20.0, so 12
//!   links are 240.0); to `0x068001` the GPU's own CPU, otherwise (NVSwitch `0x068000`)
//!   the host's single NVS node `0-0`, both directions. A target GPU that is not in the
//!   file is ignored, as NCCL does. `<c2c count bw>` gives C2C links GPU↔CPU of
//!   `count × bw / 1000` GB/s; `<pcilink target>` a LOC link between PCI switches.
//!
//! The result is what the log reader gets from NCCL's print of that model: nodes in print
//! order, a link for every printed edge (PCI parent → child, NVL/SYS/NET/C2C from the
//! node that lists them), ranks on GPUs, no `paths` (NCCL does not write them to the
//! XML), and `maxBw`/`totalBw` computed as NCCL does for a one-host communicator (see
//! `graph::Graph::to_topology`).
//!
//! **Host name.** The XML has none, only `host_hash`. [`Topology::host`] is the file
//! stem followed by the hash: `topo (host_hash 0xd3524fac75ffbc89)` (all distinct hashes,
//! comma-separated, for a multi-host file; the stem alone when there is none).
//!
//! # Errors
//!
//! Every error names the file and, for the content, the line: a file that does not start
//! with `<system` (after blanks, header and comments) is refused as "not an NCCL
//! topology XML"; an empty file, text where a tag belongs, an unterminated tag, comment
//! or value, a mismatched or missing end tag (truncated file), an element nested deeper
//! than 64 levels, a missing attribute NCCL needs (`numaid`, `arch`, `busid`, `class`,
//! `link_width`, `link_speed`, `sm`, `count`, `tclass`, …) or a value of the wrong form
//! are errors; nothing panics.
//!
//! Limitations: NCCL's later rewrites of its model are not replayed (flattening of
//! Broadcom Gen4/Gen5 switch pairs, removal of NICs for single-host communicators,
//! MLOPart GPU partitions of NCCL 2.30); constants are those of NCCL's `topo.h`
//! (2.2x–2.30) and older NCCL used others (e.g. SM80 22.0, one SYS figure for all AMD
//! CPUs); integers are read as decimal or `0x` hex (NCCL's `strtol(…, 0)` also reads a
//! leading `0` as octal).

mod elements;
mod graph;
mod lex;

use crate::error::IngestError;
use commlens_core::topo::Topology;
use elements::{Attrs, Frame, Reader};
use lex::{Event, LexError, Lexer};
use std::io::Read;
use std::path::Path;

/// Deepest element nesting accepted (NCCL's own files are 5 to 8 deep).
const MAX_DEPTH: usize = 64;

/// Reads an NCCL topology XML file (`NCCL_TOPO_DUMP_FILE`) into a [`Topology`].
pub fn read_topo_xml(path: &Path) -> Result<Topology, IngestError> {
    let io = |e| IngestError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let stem = path
        .file_stem()
        .map_or_else(|| "topology".into(), |s| s.to_string_lossy().into_owned());
    read_topo_xml_from(file, &stem).map_err(|f| match f {
        Fail::Io(e) => io(e),
        Fail::At(line, what) => IngestError::Format {
            path: path.to_path_buf(),
            line: Some(line),
            what,
        },
    })
}

/// Whether these first bytes of a file start an NCCL topology XML: after an optional
/// byte-order mark, blanks, `<?…?>` and comments comes `<system` ending its name.
pub fn looks_like_topo_xml(head: &[u8]) -> bool {
    let mut s = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    loop {
        s = s.trim_ascii_start();
        let end = if s.starts_with(b"<?") {
            b"?>".as_slice()
        } else if s.starts_with(b"<!--") {
            b"-->".as_slice()
        } else {
            break;
        };
        match memchr::memmem::find(s, end) {
            Some(i) => s = &s[i + end.len()..],
            None => return false,
        }
    }
    s.strip_prefix(b"<system")
        .is_some_and(|r| matches!(r.first(), Some(b' ' | b'\t' | b'\r' | b'\n' | b'>' | b'/')))
}

/// Whether the file at `path` is an NCCL topology XML, judged by its first 64 KiB.
pub fn is_topo_xml(path: &Path) -> Result<bool, IngestError> {
    let io = |e| IngestError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .map_err(io)?;
    Ok(looks_like_topo_xml(&head))
}

#[derive(Debug)]
enum Fail {
    Io(std::io::Error),
    At(u64, String),
}

impl From<LexError> for Fail {
    fn from(e: LexError) -> Fail {
        match e {
            LexError::Io(e) => Fail::Io(e),
            LexError::Syntax { line, what } => Fail::At(line, what),
        }
    }
}

fn read_topo_xml_from<R: Read>(src: R, stem: &str) -> Result<Topology, Fail> {
    let mut lx = Lexer::new(src);
    let not_topo = |line, found: &str| {
        Fail::At(
            line,
            format!(
                "not an NCCL topology XML: expected the root element <system> that NCCL_TOPO_DUMP_FILE writes, found {found}"
            ),
        )
    };
    let mut stack: Vec<(String, u64, Frame)> = Vec::new();
    let mut r = Reader::default();
    match lx.next() {
        Ok(Event::Eof { line }) => return Err(not_topo(line, "an empty file")),
        Ok(Event::Open {
            name, line, empty, ..
        }) if name == "system" => {
            if empty {
                return Err(Fail::At(
                    line,
                    "<system/> is empty: no <cpu> in this topology".into(),
                ));
            }
            stack.push((name, line, Frame::System));
        }
        Ok(Event::Open { name, line, .. }) => return Err(not_topo(line, &format!("<{name}>"))),
        Ok(Event::Close { name, line }) => return Err(not_topo(line, &format!("</{name}>"))),
        Err(LexError::Syntax { line, what }) => return Err(not_topo(line, &what)),
        Err(e) => return Err(e.into()),
    }
    while let Some((name, open_line, _)) = stack.last() {
        match lx.next()? {
            Event::Eof { line } => {
                return Err(Fail::At(
                    line,
                    format!("unexpected end of file: <{name}> opened at line {open_line} is not closed (file truncated?)"),
                ))
            }
            Event::Close { name: closing, line } => {
                if closing != *name {
                    return Err(Fail::At(line, format!("</{closing}> where </{name}> was expected (<{name}> opened at line {open_line})")));
                }
                let (_, _, frame) = stack.pop().expect("checked above");
                r.close(frame);
            }
            Event::Open { name, attrs, line, empty } => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Fail::At(line, format!("<{name}> nested more than {MAX_DEPTH} levels deep")));
                }
                let a = Attrs { elem: &name, line, list: &attrs };
                let frame = r.open(&a, &mut stack)?;
                if empty {
                    r.close(frame);
                } else {
                    stack.push((name, line, frame));
                }
            }
        }
    }
    match lx.next()? {
        Event::Eof { .. } => {}
        Event::Open { name, line, .. } => {
            return Err(Fail::At(
                line,
                format!("<{name}> after the end of </system>"),
            ))
        }
        Event::Close { name, line } => {
            return Err(Fail::At(
                line,
                format!("</{name}> after the end of </system>"),
            ))
        }
    }
    if !r.has_cpu() {
        return Err(Fail::At(
            lx.line(),
            "no <cpu> in <system>: nothing to read".into(),
        ));
    }
    Ok(r.finish(stem))
}

#[cfg(test)]
mod tests;
