//! Tests of the topology-dump parser: the thesis example, golden real dumps, fuzzing.
use super::*;
use std::collections::HashMap;
use std::path::Path;

/// Real NCCL logs, `../shared/data/real/nccl-logs` relative to the workspace root.
const DATA_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/data/real/nccl-logs"
);

/// The data folder, or None (after saying so) when it is missing; missing data is an
/// error under CI.
fn data_dir() -> Option<&'static Path> {
    let dir = Path::new(DATA_DIR);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("shared data not found at {DATA_DIR}");
    }
    println!("skipped: shared data not found");
    None
}

fn read_log(name: &str) -> Option<Vec<u8>> {
    let dir = data_dir()?;
    Some(std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What the test harness made of a log: per `host:pid:tid`, its blocks, with the keys
/// ordered by their first dump line.
struct Parsed {
    keys: Vec<String>,
    blocks: HashMap<String, Vec<Topology>>,
    malformed: u64,
}

impl Parsed {
    /// The first block (in file order) of the first thread whose key starts with `prefix`.
    fn first(&self, prefix: &str) -> &Topology {
        let key = self
            .keys
            .iter()
            .find(|k| k.starts_with(prefix))
            .expect("no dump for prefix");
        &self.blocks[key][0]
    }
    fn all(&self) -> impl Iterator<Item = &Topology> {
        self.keys.iter().flat_map(|k| self.blocks[k].iter())
    }
}

/// Strips the line prefix the simple way (text after the first `NCCL INFO `) and feeds
/// one parser per `host:pid:tid`.
fn parse_log(text: &[u8]) -> Parsed {
    struct Thread {
        parser: TopoParser,
        first_dump_line: Option<usize>,
    }
    let mut threads: HashMap<String, Thread> = HashMap::new();
    for (no, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Some(pos) = find(line, b"NCCL INFO ") else {
            continue;
        };
        let msg = &line[pos + b"NCCL INFO ".len()..];
        let key = line[..pos]
            .split(|&b| b == b' ')
            .find(|t| t.iter().filter(|&&b| b == b':').count() == 2)
            .unwrap_or(b"");
        let key = String::from_utf8_lossy(key).into_owned();
        let t = threads.entry(key).or_insert_with(|| Thread {
            parser: TopoParser::new(),
            first_dump_line: None,
        });
        if t.parser.feed(msg) != TopoLine::NotTopology && t.first_dump_line.is_none() {
            t.first_dump_line = Some(no);
        }
    }
    let mut order = Vec::new();
    let mut blocks = HashMap::new();
    let mut malformed = 0;
    for (key, mut t) in threads {
        t.parser.finish();
        malformed += t.parser.malformed_lines();
        let b = t.parser.take_blocks();
        if !b.is_empty() {
            order.push((t.first_dump_line.unwrap_or(usize::MAX), key.clone()));
            blocks.insert(key, b);
        }
    }
    order.sort();
    Parsed {
        keys: order.into_iter().map(|(_, k)| k).collect(),
        blocks,
        malformed,
    }
}

/// Every index in a topology points at a node.
fn check_indices(t: &Topology) {
    let n = t.nodes.len();
    for l in &t.links {
        assert!(l.from < n && l.to < n, "{l:?}");
    }
    for p in &t.paths {
        assert!(p.from < n && p.to < n, "{p:?}");
    }
}

fn idx(t: &Topology, kind: NodeKind, id: &str) -> usize {
    t.find(kind, id)
        .unwrap_or_else(|| panic!("{kind:?}/{id} missing"))
}

fn link(t: &Topology, from: usize, to: usize) -> Option<(LinkKind, f64)> {
    t.links
        .iter()
        .find(|l| l.from == from && l.to == to)
        .map(|l| (l.kind, l.bw_gb_s))
}

fn path(t: &Topology, from: usize, to: usize) -> Option<(u32, f64, LinkKind)> {
    t.paths
        .iter()
        .find(|p| p.from == from && p.to == to)
        .map(|p| (p.hops, p.bw_gb_s, p.kind))
}

/// Thesis Listing 4.3, as given in the reference (dual socket, NVLink pairs, 2 NICs).
const THESIS: &str = "\
NCCL INFO === System : maxBw 80.0 totalBw 80.0 ===
NCCL INFO CPU/0-0 (1/2/-1)
NCCL INFO + PCI[24.0] - GPU/0-1000 (0)
NCCL INFO           + NVL[80.0] - GPU/0-25000
NCCL INFO + PCI[24.0] - GPU/0-25000 (1)
NCCL INFO           + NVL[80.0] - GPU/0-1000
NCCL INFO + SYS[16.0] - CPU/0-1
NCCL INFO CPU/0-1 (1/2/-1)
NCCL INFO + PCI[24.0] - GPU/0-c1000 (2)
NCCL INFO           + NVL[80.0] - GPU/0-e1000
NCCL INFO + PCI[24.0] - GPU/0-e1000 (3)
NCCL INFO           + NVL[80.0] - GPU/0-c1000
NCCL INFO + SYS[16.0] - CPU/0-0
NCCL INFO + PCI[12.0] - NIC/0-c2000
NCCL INFO           + NET[12.5] - NET/0-0
NCCL INFO + PCI[12.0] - NIC/0-c3000
NCCL INFO           + NET[12.5] - NET/0-1
";

fn messages(text: &str) -> Vec<&[u8]> {
    text.lines()
        .map(|l| l.strip_prefix("NCCL INFO ").unwrap_or(l).as_bytes())
        .collect()
}

fn parse_msgs(msgs: &[&[u8]]) -> (Vec<TopoLine>, Vec<Topology>, u64) {
    let mut p = TopoParser::new();
    let r = msgs.iter().map(|m| p.feed(m)).collect();
    p.finish();
    (r, p.take_blocks(), p.malformed_lines())
}

#[test]
fn thesis_example() {
    let mut msgs = messages(THESIS);
    msgs.push(b"Setting affinity for GPU 0 to 0-15");
    let mut p = TopoParser::new();
    let results: Vec<TopoLine> = msgs.iter().map(|m| p.feed(m)).collect();
    assert!(results[..msgs.len() - 1]
        .iter()
        .all(|&r| r == TopoLine::Consumed));
    // The block ends on a non-topology line: NotTopology, and the block is ready.
    assert_eq!(results[msgs.len() - 1], TopoLine::NotTopology);
    let blocks = p.take_blocks();
    assert_eq!(blocks.len(), 1);
    assert_eq!(p.malformed_lines(), 0);
    let t = &blocks[0];
    check_indices(t);
    assert_eq!(t.host, "");
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (80.0, 80.0));
    let count = |k: NodeKind| t.nodes.iter().filter(|n| n.kind == k).count();
    assert_eq!(count(NodeKind::Gpu), 4);
    assert_eq!(count(NodeKind::Cpu), 2);
    assert_eq!(count(NodeKind::Nic), 2);
    assert_eq!(count(NodeKind::Net), 2);
    assert_eq!(t.nodes.len(), 10);
    // 4 GPU + 2 NIC PCI links, 4 NVL (both directions), 2 SYS, 2 NET.
    assert_eq!(t.links.len(), 14);
    let g: Vec<usize> = ["0-1000", "0-25000", "0-c1000", "0-e1000"]
        .iter()
        .map(|id| idx(t, NodeKind::Gpu, id))
        .collect();
    for (rank, &gi) in g.iter().enumerate() {
        assert_eq!(t.nodes[gi].rank, Some(rank as u32));
    }
    assert_eq!(t.nodes[g[2]].bus_id, Some(0xc1000));
    let (c0, c1) = (idx(t, NodeKind::Cpu, "0-0"), idx(t, NodeKind::Cpu, "0-1"));
    assert_eq!(link(t, c0, g[0]), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, c1, g[3]), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, g[0], g[1]), Some((LinkKind::Nvl, 80.0)));
    assert_eq!(link(t, g[1], g[0]), Some((LinkKind::Nvl, 80.0)));
    assert_eq!(link(t, c0, c1), Some((LinkKind::Sys, 16.0)));
    assert_eq!(link(t, c1, c0), Some((LinkKind::Sys, 16.0)));
    let nic = idx(t, NodeKind::Nic, "0-c3000");
    assert_eq!(link(t, c1, nic), Some((LinkKind::Pci, 12.0)));
    assert_eq!(
        link(t, nic, idx(t, NodeKind::Net, "0-1")),
        Some((LinkKind::Net, 12.5))
    );
    assert_eq!(t.net_bw_gb_s(), Some(12.5));
    assert!(t.paths.is_empty());
    // The thesis's bottleneck rule, through core.
    assert_eq!(t.gpu_pair_bw(g[0], g[1]), Some((80.0, LinkKind::Nvl)));
    assert_eq!(t.gpu_pair_bw(g[2], g[3]), Some((80.0, LinkKind::Nvl)));
    assert_eq!(t.gpu_pair_bw(g[0], g[2]), Some((16.0, LinkKind::Sys)));
    assert_eq!(t.gpu_pair_bw(g[1], g[3]), Some((16.0, LinkKind::Sys)));
}

#[test]
fn block_boundaries() {
    // A second header closes the first block: BlockDone on the header.
    let mut msgs = messages(THESIS);
    msgs.extend(messages(THESIS));
    let (r, blocks, bad) = parse_msgs(&msgs);
    assert_eq!(r.iter().filter(|&&x| x == TopoLine::BlockDone).count(), 1);
    assert_eq!(r[messages(THESIS).len()], TopoLine::BlockDone);
    assert_eq!(blocks.len(), 2, "finish closes the second");
    assert_eq!(blocks[0], blocks[1]);
    assert_eq!(bad, 0);

    // Lines outside a dump are not topology, even dump-like ones without a header.
    let mut p = TopoParser::new();
    for m in [
        &b"+ PCI[24.0] - GPU/0-17000 (0)"[..],
        b"==========",
        b"GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC)",
    ] {
        assert_eq!(p.feed(m), TopoLine::NotTopology);
    }
    p.finish();
    assert!(p.take_blocks().is_empty());

    // A header followed by nothing usable gives no block.
    let (_, blocks, _) = parse_msgs(&[
        b"=== System : maxBw 1.0 totalBw 1.0 ===",
        b"Pattern 4, crossNic 0",
    ]);
    assert!(blocks.is_empty());

    // NCCL messages that start like a node reference end the block.
    let (r, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 24.0 totalBw 24.0 ===",
        b"CPU/1 (1/2/-1)",
        b"+ PCI[24.0] - GPU/81000 (0)",
        b"NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_2'",
    ]);
    assert_eq!(r[3], TopoLine::NotTopology);
    assert_eq!((blocks.len(), bad), (1, 0));
}

#[test]
fn lost_header_opens_a_block_at_a_root_line() {
    let (r, blocks, bad) = parse_msgs(&[
        b"CPU/0-2 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
        b"==========================================",
        b"GPU/0-26000 :GPU/0-26000 (0/5000.0/LOC) CPU/0-2 (1/24.0/PHB)",
        b"CPU/0-2 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
    ]);
    assert_eq!(r[0], TopoLine::Consumed);
    assert_eq!(
        r[4],
        TopoLine::BlockDone,
        "a root after the paths starts a new block"
    );
    assert_eq!((blocks.len(), bad), (2, 0));
    assert_eq!(blocks[0].max_bw_gb_s, 0.0);
    assert_eq!(blocks[0].paths.len(), 2);
    // A loose root-like line needs the full CPU suffix to start a block.
    let mut p = TopoParser::new();
    assert_eq!(p.feed(b"CPU/0-2"), TopoLine::NotTopology);
    assert_eq!(p.feed(b"CPU/0-2 (1/2)"), TopoLine::NotTopology);
}

#[test]
fn malformed_lines_are_counted_and_do_not_end_the_block() {
    let (r, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 24.0 totalBw 24.0 ===",
        b"CPU/0-1 (1/2/-1)",
        b"+ PCI[24.0] - GPU/0-26000 (0)",
        b"+ PCI[24.0] - GPU/0-41", // cut short: no rank suffix
        b"              + NVL[20.0] - GPU/0-26000", // hangs off the damaged line
        b"+ PCI[24.0] - GPU/0-61000 (2", // suffix cut, id whole: kept
        b"+ PCI[24.",              // cut inside the edge
        b"\x00\xff\x13garbage",
        b"",
        b"+ SYS[16.0] - CPU/0-0",
        b"====",
        b"GPU/0-26000 :GPU/0-26000 (0/5000.0/LOC) GPU/0-61000 (3/16.0/SY",
        b"GPU/0-61000 :GPU/0-26000 (3/16.0/SYS) junk) GPU/0-61000 (0/5000.0/LOC)",
        b"+ PCI[24.0] - GPU/0-81000 (3)", // an edge among path lines
        b"Channel 00/02 :    0   1",
    ]);
    assert_eq!(r.iter().filter(|&&x| x == TopoLine::NotTopology).count(), 1);
    assert_eq!(*r.last().unwrap(), TopoLine::NotTopology);
    assert_eq!(bad, 8);
    assert_eq!(blocks.len(), 1);
    let t = &blocks[0];
    check_indices(t);
    assert!(t.find(NodeKind::Gpu, "0-41").is_none());
    assert!(t.find(NodeKind::Gpu, "0-81000").is_none());
    let g61 = idx(t, NodeKind::Gpu, "0-61000");
    assert_eq!(t.nodes[g61].rank, None);
    assert_eq!(
        link(t, idx(t, NodeKind::Cpu, "0-1"), g61),
        Some((LinkKind::Pci, 24.0))
    );
    assert_eq!(
        link(
            t,
            idx(t, NodeKind::Cpu, "0-1"),
            idx(t, NodeKind::Cpu, "0-0")
        ),
        Some((LinkKind::Sys, 16.0))
    );
    // Truncated tail dropped, the complete entries kept; the junk line keeps its head.
    let g26 = idx(t, NodeKind::Gpu, "0-26000");
    assert_eq!(path(t, g26, g26), Some((0, 5000.0, LinkKind::Loc)));
    assert_eq!(path(t, g26, g61), None);
    assert_eq!(path(t, g61, g26), Some((3, 16.0, LinkKind::Sys)));
    assert_eq!(path(t, g61, g61), None);

    // A damaged header still opens a block.
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System stone:1:1 [1] NCCL INFO",
        b"CPU/0 (1/1/2)",
        b"+ PCI[24.0] - GPU/F000 (8)",
    ]);
    assert_eq!((blocks.len(), bad), (1, 1));
}

#[test]
fn nvswitch_c2c_and_case_insensitive_ids() {
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 450.0 totalBw 450.0 ===",
        b"CPU/0-0 (2/0/0)",
        b"+ PCI[64.0] - GPU/0-1b000 (0)",
        b"                + NVL[450.0] - NVS/0-0",
        b"                + C2C[360.0] - CPU/0-0",
        b"+ PCI[64.0] - GPU/0-43000 (1)",
        b"                + NVL[300.0] - NVS/0-0",
        b"==========================================",
        b"GPU/0-1B000 :GPU/0-43000 (2/300.0/NVL)",
    ]);
    assert_eq!(bad, 0);
    let t = &blocks[0];
    assert_eq!(
        t.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::NvSwitch)
            .count(),
        1
    );
    let (a, b) = (
        idx(t, NodeKind::Gpu, "0-1b000"),
        idx(t, NodeKind::Gpu, "0-43000"),
    );
    assert_eq!(
        t.nodes.len(),
        4,
        "GPU/0-1B000 in the path line is GPU/0-1b000"
    );
    assert_eq!(
        link(t, a, idx(t, NodeKind::Cpu, "0-0")),
        Some((LinkKind::C2c, 360.0))
    );
    assert_eq!(path(t, a, b), Some((2, 300.0, LinkKind::Nvl)));
    assert_eq!(
        t.gpu_pair_bw(b, a),
        Some((300.0, LinkKind::Nvl)),
        "via NVSwitch, no path logged"
    );
}

#[test]
fn chain_kinds_follow_nccl_path_types() {
    let (_, blocks, bad) = parse_msgs(&[
        b"=== System : maxBw 20.0 totalBw 20.0 ===",
        b"CPU/0 (1/1/2)",
        b"+ PCI[24.0] - PCI/1000 (1)",
        b"              + PCI[24.0] - PCI/2000 (1)",
        b"                            + PCI[24.0] - GPU/3000 (0)",
        b"              + PCI[24.0] - GPU/4000 (1)",
        b"+ PCI[24.0] - GPU/5000 (2)",
        b"              + NVL[20.0] - GPU/4000",
        b"==========================================",
        b"Paths from GPU/4000 :",
        b" (5000.000000)",
        b"--PCI->PCI/1000--PCI->PCI/2000--PCI->GPU/3000 (24.000000)",
        b"--PCI->PCI/1000--PCI->CPU/0 (24.000000)",
        b"--NVL->GPU/5000 (20.000000)",
        b"Paths from GPU/3000 :",
        b"--PCI->PCI/2000--PCI->PCI/1000--PCI->GPU/4000 (24.000000)",
        b"--PCI->PCI/2000--PCI->PCI/1000--PCI->GPU/4000--NVL->GPU/5000 (20.000000)",
        b"--PCI->PCI/2000 (24.000000)",
    ]);
    assert_eq!(bad, 0);
    let t = &blocks[0];
    let n = |k, id| idx(t, k, id);
    let (g3, g4, g5) = (
        n(NodeKind::Gpu, "3000"),
        n(NodeKind::Gpu, "4000"),
        n(NodeKind::Gpu, "5000"),
    );
    assert_eq!(path(t, g4, g4), Some((0, 5000.0, LinkKind::Loc)));
    assert_eq!(path(t, g4, g3), Some((3, 24.0, LinkKind::Pxb)));
    assert_eq!(
        path(t, g4, n(NodeKind::Cpu, "0")),
        Some((2, 24.0, LinkKind::Phb))
    );
    assert_eq!(path(t, g4, g5), Some((1, 20.0, LinkKind::Nvl)));
    assert_eq!(
        path(t, g3, g5),
        Some((4, 20.0, LinkKind::Pxb)),
        "the worse of PXB and NVB"
    );
    assert_eq!(
        path(t, g3, n(NodeKind::PciSwitch, "2000")),
        Some((1, 24.0, LinkKind::Pix))
    );
    assert_eq!(t.paths.len(), 7);
    // A chain without its `Paths from` line cannot be placed.
    let (_, _, bad) = parse_msgs(&[
        b"=== System : maxBw 1.0 totalBw 1.0 ===",
        b"CPU/0 (1/1/2)",
        b"--PCI->CPU/0 (1.0)",
    ]);
    assert_eq!(bad, 1);
}

/// A tiny deterministic generator, so the fuzz test needs no dependency.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Dump lines of every shape, including the real 2.18.1 and 2.28.9 forms.
fn sample_lines() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = messages(THESIS).into_iter().map(<[u8]>::to_vec).collect();
    for l in [
        "CPU/0 (1/1/2)",
        "+ PCI[24.0] - PCI/C000 (11f8400011f8beef)",
        "              + PCI[24.0] - GPU/F000 (8)",
        "              + PCI[24.0] - NIC/9A000",
        "                            + NET[7.0] - NET/0 (9cc7170003fd7010/1/7.000000)",
        "==========================================",
        "Paths from GPU/F000 :",
        " (5000.000000)",
        "--PCI->PCI/C000--PCI->CPU/0--SYS->CPU/1--PCI->PCI/98000--PCI->NIC/9A000--NET->NET/0 (7.000000)",
        "GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) CPU/0-0 (1/24.0/PHB) ",
        "NET/0-1 :GPU/0-26000 (3/1.2/PHB) NET/0-0 (4/0.1/PHB) NET/0-8 (2/1.2/L",
        "=== System : maxBw 240.0 totalBw 240.0 ===",
    ] {
        v.push(l.as_bytes().to_vec());
    }
    v
}

fn fuzz_parser(p: &mut TopoParser, rng: &mut XorShift, samples: &[Vec<u8>], rounds: usize) {
    const ALPHABET: &[u8] = b" +-=[]()/:.0123456789abcdefABCDEFGPUCINVLSYTOHX\t\r\x00\xff>";
    let mut buf = Vec::new();
    for _ in 0..rounds {
        buf.clear();
        match rng.below(4) {
            0 => {
                let n = rng.below(120);
                buf.extend((0..n).map(|_| rng.next() as u8));
            }
            1 => {
                let n = rng.below(120);
                buf.extend((0..n).map(|_| ALPHABET[rng.below(ALPHABET.len())]));
            }
            2 => {
                // A real line with a few bytes changed.
                buf.extend_from_slice(&samples[rng.below(samples.len())]);
                for _ in 0..rng.below(4) {
                    if !buf.is_empty() {
                        let i = rng.below(buf.len());
                        buf[i] = ALPHABET[rng.below(ALPHABET.len())];
                    }
                }
            }
            _ => {
                // A real line, cut at a random point, perhaps with another glued on.
                let s = &samples[rng.below(samples.len())];
                buf.extend_from_slice(&s[..rng.below(s.len() + 1)]);
                if rng.below(3) == 0 {
                    let o = &samples[rng.below(samples.len())];
                    buf.extend_from_slice(&o[rng.below(o.len() + 1)..]);
                }
            }
        }
        p.feed(&buf);
    }
}

#[test]
fn arbitrary_bytes_and_truncations_never_panic() {
    let samples = sample_lines();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut p = TopoParser::new();
    fuzz_parser(&mut p, &mut rng, &samples, 200_000);
    // Every truncation of every sample line, inside an open block and outside.
    for s in &samples {
        for cut in 0..=s.len() {
            p.feed(b"=== System : maxBw 1.0 totalBw 1.0 ===");
            p.feed(b"CPU/0 (1/1/2)");
            p.feed(&s[..cut]);
            p.feed(&s[cut..]);
            p.feed(b"Paths from GPU/F000 :");
            p.feed(&s[..cut]);
        }
    }
    p.finish();
    let blocks = p.take_blocks();
    assert!(!blocks.is_empty());
    blocks.iter().for_each(check_indices);
    assert!(p.malformed_lines() > 0);
}

#[test]
fn real_2_27_7_two_a100_nvlink_bridge() {
    let Some(text) = read_log("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log")
    else {
        return;
    };
    let parsed = parse_log(&text);
    assert_eq!(parsed.malformed, 0);
    assert_eq!(parsed.all().count(), 2, "one dump per GPU thread");
    let t = parsed.first("mew0:");
    check_indices(t);
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (240.0, 240.0));
    let gpus: Vec<_> = t.gpus().map(|(_, n)| (n.bus_id, n.rank)).collect();
    assert_eq!(gpus, [(Some(0x17000), Some(0)), (Some(0x65000), Some(1))]);
    let a = t.gpu_by_bus(0x17000).unwrap();
    let b = t.gpu_by_bus(0x65000).unwrap();
    let cpu = idx(t, NodeKind::Cpu, "0-0");
    assert_eq!(link(t, a, b), Some((LinkKind::Nvl, 240.0)));
    assert_eq!(link(t, b, a), Some((LinkKind::Nvl, 240.0)));
    assert_eq!(link(t, cpu, a), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, cpu, b), Some((LinkKind::Pci, 24.0)));
    assert_eq!(
        t.nodes.iter().filter(|n| n.kind == NodeKind::Nic).count(),
        1
    );
    assert_eq!(
        link(t, cpu, idx(t, NodeKind::Nic, "0-4b000")),
        Some((LinkKind::Pci, 24.0))
    );
    assert_eq!(path(t, a, b), Some((1, 240.0, LinkKind::Nvl)));
    assert_eq!(path(t, b, a), Some((1, 240.0, LinkKind::Nvl)));
    assert_eq!(path(t, a, cpu), Some((1, 24.0, LinkKind::Phb)));
    assert_eq!(path(t, a, a), Some((0, 5000.0, LinkKind::Loc)));
    assert_eq!(t.paths.len(), 6);
    assert_eq!(t.gpu_pair_bw(a, b), Some((240.0, LinkKind::Nvl)));
}

#[test]
fn real_2_18_1_dual_socket_pci_switches() {
    let Some(text) =
        read_log("panlichen-nccl-tests-log-RTX3090-PCIe-dualsocket-GRAPH-2.18.1.log")
    else {
        return;
    };
    let parsed = parse_log(&text);
    assert_eq!(parsed.malformed, 0);
    assert_eq!(parsed.all().count(), 16);
    let t = parsed.first("oneflow-25:");
    check_indices(t);
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (7.0, 24.0));
    let ids = [
        "F000", "10000", "11000", "12000", "9B000", "9C000", "9D000", "9E000",
    ];
    let gpus: Vec<_> = t.gpus().map(|(_, n)| (n.id.as_str(), n.rank)).collect();
    let want: Vec<_> = ids
        .iter()
        .zip(8u32..)
        .map(|(id, r)| (*id, Some(r)))
        .collect();
    assert_eq!(gpus, want);
    let (c0, c1) = (idx(t, NodeKind::Cpu, "0"), idx(t, NodeKind::Cpu, "1"));
    let (s0, s1) = (
        idx(t, NodeKind::PciSwitch, "C000"),
        idx(t, NodeKind::PciSwitch, "98000"),
    );
    assert_eq!(
        t.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::PciSwitch)
            .count(),
        2
    );
    assert_eq!(link(t, c0, s0), Some((LinkKind::Pci, 24.0)));
    assert_eq!(link(t, c1, s1), Some((LinkKind::Pci, 24.0)));
    for (i, id) in ids.iter().enumerate() {
        let sw = if i < 4 { s0 } else { s1 };
        assert_eq!(
            link(t, sw, idx(t, NodeKind::Gpu, id)),
            Some((LinkKind::Pci, 24.0)),
            "{id}"
        );
    }
    assert_eq!(link(t, c0, c1), Some((LinkKind::Sys, 10.0)));
    assert_eq!(link(t, c1, c0), Some((LinkKind::Sys, 10.0)));
    let nic = idx(t, NodeKind::Nic, "9A000");
    assert_eq!(link(t, s1, nic), Some((LinkKind::Pci, 24.0)));
    assert_eq!(
        link(t, nic, idx(t, NodeKind::Net, "0")),
        Some((LinkKind::Net, 7.0))
    );
    assert_eq!(t.net_bw_gb_s(), Some(7.0));
    // `Paths from` groups: 8 GPUs and the NET, 11 targets each.
    assert_eq!(t.paths.len(), 9 * 11);
    let (f0, g9b) = (
        idx(t, NodeKind::Gpu, "F000"),
        idx(t, NodeKind::Gpu, "9B000"),
    );
    assert_eq!(path(t, f0, g9b), Some((5, 10.0, LinkKind::Sys)));
    assert_eq!(t.gpu_pair_bw(f0, g9b), Some((10.0, LinkKind::Sys)));
    assert_eq!(
        t.gpu_pair_bw(f0, idx(t, NodeKind::Gpu, "10000")),
        Some((24.0, LinkKind::Phb))
    );

    // The other process printed the same machine in the `X :` form: every chain of
    // oneflow-25 must give the hops, bandwidth and type NCCL printed there.
    let u = parsed.first("oneflow-27:");
    assert_eq!(u.paths.len(), 9 * 11);
    for p in &t.paths {
        let (from, to) = (&t.nodes[p.from], &t.nodes[p.to]);
        let q = path(u, idx(u, from.kind, &from.id), idx(u, to.kind, &to.id));
        assert_eq!(
            q,
            Some((p.hops, p.bw_gb_s, p.kind)),
            "{}/{} -> {}/{}",
            from.kind.name(),
            from.id,
            to.kind.name(),
            to.id
        );
    }
}

#[test]
fn real_2_28_9_interleaved_header() {
    let Some(text) = read_log("sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log") else {
        return;
    };
    let parsed = parse_log(&text);
    // The header of stone:2984736 is glued to a line of stone:2984737; its first
    // root line opens the block instead.
    let t = parsed.first("stone:2984736:");
    check_indices(t);
    assert_eq!(t.max_bw_gb_s, 0.0);
    let gpus: Vec<_> = t.gpus().map(|(_, n)| (n.bus_id, n.rank)).collect();
    assert_eq!(
        gpus,
        [
            (Some(0x26000), Some(0)),
            (Some(0x41000), Some(1)),
            (Some(0x61000), Some(2)),
            (Some(0x81000), Some(3))
        ]
    );
    assert_eq!(
        t.nodes.iter().filter(|n| n.kind == NodeKind::Cpu).count(),
        4
    );
    assert_eq!(
        t.links.iter().filter(|l| l.kind == LinkKind::Sys).count(),
        12
    );
    let (a, b) = (
        t.gpu_by_bus(0x26000).unwrap(),
        t.gpu_by_bus(0x41000).unwrap(),
    );
    assert_eq!(t.gpu_pair_bw(a, b), Some((16.0, LinkKind::Sys)));
}

#[test]
fn every_real_log_parses() {
    let Some(dir) = data_dir() else { return };
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    let mut total_blocks = 0;
    for name in &names {
        let text = std::fs::read(name).unwrap();
        let parsed = parse_log(&text);
        let blocks = parsed.all().count();
        total_blocks += blocks;
        parsed.all().for_each(check_indices);
        println!(
            "{}: {} blocks, {} malformed lines",
            name.file_name().unwrap().to_string_lossy(),
            blocks,
            parsed.malformed
        );
        // Observed: 0 everywhere but the 2.28.9 log, whose one glued header counts once.
        assert!(
            parsed.malformed <= 1,
            "{}: {} malformed",
            name.display(),
            parsed.malformed
        );
    }
    assert!(total_blocks >= 25);
}
