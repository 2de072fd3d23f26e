//! Tests of the topology-dump parser on golden real logs, per NCCL version
//! (2.27.7, 2.18.1, 2.28.9) and every log in the shared data folder, with the
//! harness that splits a log into per-thread parsers.
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
    commlens_testdata::skip_unless_ci("topology from real logs", &format!("shared data not found at {DATA_DIR}"), "put ../shared beside the repository");
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
