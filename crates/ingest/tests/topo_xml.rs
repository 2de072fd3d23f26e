//! The NCCL topology XML reader on the two real `NCCL_TOPO_DUMP_FILE` samples:
//! golden figures (checked where possible against plain substring counts over the
//! file), agreement with the topology dump NCCL printed in the log of the same
//! machine, and damaged variants made from the real files at test time.

mod common;

use commlens_core::topo::{LinkKind, NodeKind, Topology};
use commlens_ingest::nccl_log::{load_path, ReadOptions};
use commlens_ingest::topo_xml::{is_topo_xml, read_topo_xml};
use commlens_ingest::IngestError;
use std::path::{Path, PathBuf};

const A100_XML: &str = "timez-zx-nccl-tests-nccl_topo_dump_normal.xml";
const A100_LOG: &str = "timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log";
const RTX_XML: &str = "sugarlxn-nccl_test-nccl_topo.xml";
const RTX_LOG: &str = "sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log";

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn name(t: &Topology, i: usize) -> String {
    format!("{}/{}", t.nodes[i].kind.name(), t.nodes[i].id)
}

fn of_kind(t: &Topology, k: NodeKind) -> Vec<String> {
    t.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind == k)
        .map(|(i, _)| name(t, i))
        .collect()
}

/// Bandwidths of the links of one kind, `from>to` → GB/s.
fn links(t: &Topology, k: LinkKind) -> Vec<(String, f64)> {
    t.links
        .iter()
        .filter(|l| l.kind == k)
        .map(|l| (format!("{}>{}", name(t, l.from), name(t, l.to)), l.bw_gb_s))
        .collect()
}

fn gpus(t: &Topology) -> Vec<(Option<u64>, Option<u32>)> {
    let mut g: Vec<_> = t.gpus().map(|(_, n)| (n.bus_id, n.rank)).collect();
    g.sort();
    g
}

#[test]
fn a100_pair_golden() {
    let Some(path) = common::nccl_log(A100_XML) else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(is_topo_xml(&path).unwrap());
    let t = read_topo_xml(&path).unwrap();
    assert_eq!(
        t.host,
        "timez-zx-nccl-tests-nccl_topo_dump_normal (host_hash 0xd3524fac75ffbc89)"
    );
    assert!(text.contains("host_hash=\"0xd3524fac75ffbc89\""));
    assert_eq!(
        gpus(&t),
        [(Some(0x17000), Some(0)), (Some(0x65000), Some(1))]
    );
    assert_eq!(t.gpus().count(), count(&text, "<gpu "));
    assert_eq!(of_kind(&t, NodeKind::Cpu), ["CPU/0-0"]);
    assert_eq!(of_kind(&t, NodeKind::Cpu).len(), count(&text, "<cpu "));
    assert_eq!(of_kind(&t, NodeKind::Nic), ["NIC/0-4b000"]);
    assert_eq!(of_kind(&t, NodeKind::Net), ["NET/0-0", "NET/0-1"]);
    assert_eq!(of_kind(&t, NodeKind::Net).len(), count(&text, "<net "));
    // 12 NVLinks × 20.0 GB/s (SM80) each way; Gen4 x16 = 24.0; 100000 Mb/s = 12.5 GB/s.
    let nvl = links(&t, LinkKind::Nvl);
    assert_eq!(
        nvl,
        [
            ("GPU/0-17000>GPU/0-65000".into(), 240.0),
            ("GPU/0-65000>GPU/0-17000".into(), 240.0)
        ]
    );
    assert!(text.contains("count=\"12\"") && text.contains("sm=\"80\""));
    let pci = links(&t, LinkKind::Pci);
    assert_eq!(pci.len(), 3);
    assert!(pci.iter().all(|(_, bw)| *bw == 24.0), "{pci:?}");
    assert_eq!(
        count(&text, "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\""),
        3
    );
    assert_eq!(
        links(&t, LinkKind::Net),
        [
            ("NIC/0-4b000>NET/0-0".into(), 12.5),
            ("NIC/0-4b000>NET/0-1".into(), 12.5)
        ]
    );
    assert_eq!(t.net_bw_gb_s(), Some(12.5));
    assert!(links(&t, LinkKind::Sys).is_empty(), "one CPU");
    let (a, b) = (
        t.gpu_by_bus(0x17000).unwrap(),
        t.gpu_by_bus(0x65000).unwrap(),
    );
    assert_eq!(t.gpu_pair_bw(a, b), Some((240.0, LinkKind::Nvl)));
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (240.0, 240.0));
}

#[test]
fn a100_pair_agrees_with_the_log_of_the_same_machine() {
    let (Some(xml), Some(log)) = (common::nccl_log(A100_XML), common::nccl_log(A100_LOG)) else {
        return;
    };
    let x = read_topo_xml(&xml).unwrap();
    let (table, _) = load_path(&log, &ReadOptions::default()).unwrap();
    let l = &table.topologies[0];
    assert_eq!(l.host, "mew0");
    // GPUs: bus ids and ranks.
    assert_eq!(gpus(&x), gpus(l));
    // GPU↔GPU NVLink and the PCIe links.
    assert_eq!(links(&x, LinkKind::Nvl), links(l, LinkKind::Nvl));
    assert_eq!(links(&x, LinkKind::Pci), links(l, LinkKind::Pci));
    for t in [&x, l] {
        let (a, b) = (
            t.gpu_by_bus(0x17000).unwrap(),
            t.gpu_by_bus(0x65000).unwrap(),
        );
        assert_eq!(
            t.gpu_pair_bw(a, b),
            Some((240.0, LinkKind::Nvl)),
            "{}",
            t.host
        );
    }
    assert_eq!(
        (x.max_bw_gb_s, x.total_bw_gb_s),
        (l.max_bw_gb_s, l.total_bw_gb_s)
    );
    // Everything the log printed, in its order; the XML adds the NICs' NET nodes
    // (NCCL 2.27.7 left them out of this single-host dump).
    let strip = |t: &Topology| -> (Vec<String>, Vec<String>) {
        let nodes = t
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind != NodeKind::Net)
            .map(|(i, _)| name(t, i))
            .collect();
        let links = t
            .links
            .iter()
            .filter(|k| k.kind != LinkKind::Net)
            .map(|k| {
                format!(
                    "{} {}[{:.1}] {}",
                    name(t, k.from),
                    k.kind.name(),
                    k.bw_gb_s,
                    name(t, k.to)
                )
            })
            .collect();
        (nodes, links)
    };
    assert_eq!(strip(&x), strip(l));
    assert_eq!(of_kind(l, NodeKind::Net).len(), 0);
}

#[test]
fn rtx4090_golden_and_agreement_with_its_log() {
    let Some(path) = common::nccl_log(RTX_XML) else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let t = read_topo_xml(&path).unwrap();
    assert_eq!(
        t.host,
        "sugarlxn-nccl_test-nccl_topo (host_hash 0xa7067bea49cd3731)"
    );
    assert_eq!(
        gpus(&t),
        [
            (Some(0x1000), Some(0)),
            (Some(0x26000), Some(1)),
            (Some(0x61000), Some(2)),
            (Some(0x81000), Some(3))
        ]
    );
    assert_eq!(t.gpus().count(), count(&text, "<gpu "));
    // One CPU per NUMA domain, in file order, all joined by AMD's 16.0 GB/s SYS links.
    assert_eq!(
        of_kind(&t, NodeKind::Cpu),
        ["CPU/0-3", "CPU/0-2", "CPU/0-0", "CPU/0-7"]
    );
    assert_eq!(count(&text, "<cpu "), 4);
    let sys = links(&t, LinkKind::Sys);
    assert_eq!(sys.len(), 12);
    assert!(sys.iter().all(|(_, bw)| *bw == 16.0));
    // The NICs without PCI device (repeated under every CPU) are one NIC/0-0 on the
    // first CPU; the Intel 1 GbE card sits on PCI (Gen3 x4 = 3.0 GB/s).
    assert_eq!(of_kind(&t, NodeKind::Nic), ["NIC/0-0", "NIC/0-22000"]);
    let pci = links(&t, LinkKind::Pci);
    assert!(pci.contains(&("CPU/0-3>NIC/0-0".into(), 5000.0)));
    assert!(pci.contains(&("CPU/0-2>NIC/0-22000".into(), 3.0)));
    assert_eq!(
        pci.iter()
            .filter(|(k, bw)| k.contains(">GPU/") && *bw == 24.0)
            .count(),
        4
    );
    // 16 network devices (dev 0 to 15): 15 virtual ones at 10000 Mb/s, 1 GbE.
    let net = links(&t, LinkKind::Net);
    assert_eq!(net.len(), 16);
    assert_eq!(of_kind(&t, NodeKind::Net).len(), 16);
    assert_eq!(net.iter().filter(|(_, bw)| *bw == 1.25).count(), 15);
    assert!(net.contains(&("NIC/0-22000>NET/0-0".into(), 0.125)));
    assert_eq!(
        count(&text, "<net "),
        61,
        "15 repeated under each of 4 CPUs, plus the 1 GbE"
    );
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (16.0, 24.0));

    // The log is the same host ("stone") in another run (GPU 41000 instead of 1000):
    // the shared nodes and every link kind's bandwidth agree, as does the header.
    let Some(log) = common::nccl_log(RTX_LOG) else {
        return;
    };
    let (table, _) = load_path(&log, &ReadOptions::default()).unwrap();
    let l = table.topologies.iter().find(|t| t.host == "stone").unwrap();
    for id in [
        "GPU/0-26000",
        "GPU/0-61000",
        "GPU/0-81000",
        "CPU/0-2",
        "CPU/0-0",
        "CPU/0-7",
        "NIC/0-0",
        "NIC/0-22000",
    ] {
        assert!(
            l.nodes.iter().enumerate().any(|(i, _)| name(l, i) == id),
            "log lacks {id}"
        );
        assert!(
            t.nodes.iter().enumerate().any(|(i, _)| name(&t, i) == id),
            "xml lacks {id}"
        );
    }
    let mut compared = 0;
    for (key, bw) in links(l, LinkKind::Pci)
        .into_iter()
        .chain(links(l, LinkKind::Sys))
        .chain(links(l, LinkKind::Net))
    {
        let mine = t
            .links
            .iter()
            .find(|k| format!("{}>{}", name(&t, k.from), name(&t, k.to)) == key);
        if let Some(k) = mine {
            // The log prints one decimal (1.25 → 1.2, 0.125 → 0.1).
            assert!(
                (k.bw_gb_s - bw).abs() <= 0.051,
                "{key}: xml {} log {bw}",
                k.bw_gb_s
            );
            compared += 1;
        }
    }
    // 3 GPU PCI links, NIC 22000's PCI and NET links, 6 SYS links among the shared CPUs.
    assert!(compared >= 11, "{compared} links in common");
    assert_eq!(
        (t.max_bw_gb_s, t.total_bw_gb_s),
        (l.max_bw_gb_s, l.total_bw_gb_s)
    );
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-topo-xml-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The error for `content` written to `file`: a Format error naming the file, with its line.
fn format_error(dir: &Path, file: &str, content: &[u8]) -> (u64, String) {
    let p = dir.join(file);
    std::fs::write(&p, content).unwrap();
    let e = read_topo_xml(&p).unwrap_err();
    assert!(e.to_string().contains(file), "{e}");
    match e {
        IngestError::Format {
            line: Some(l),
            what,
            ..
        } => (l, what),
        e => panic!("{file}: expected a Format error with a line, got {e:?}"),
    }
}

#[test]
fn damaged_real_files_give_errors_with_lines() {
    let Some(path) = common::nccl_log(A100_XML) else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let dir = scratch("damaged");

    // Truncated: in the middle of the file, the last open element is named.
    let cut = &text[..text.find("<gpu dev=\"1\"").unwrap() + 8];
    let (line, what) = format_error(&dir, "cut.xml", cut.as_bytes());
    assert_eq!(line, cut.lines().count() as u64);
    assert!(what.contains("end of file"), "{what}");
    // Cut after the last tag: the open <system> is reported.
    let (line, what) = format_error(
        &dir,
        "cut2.xml",
        text.trim_end().trim_end_matches("</system>").as_bytes(),
    );
    assert!(
        what.contains("<system> opened at line 1 is not closed"),
        "{what}"
    );
    assert_eq!(line, text.trim_end().lines().count() as u64);

    // Missing attribute: the second GPU's bus id.
    let attr = "busid=\"0000:65:00.0\" ";
    let at = text.find(attr).unwrap();
    let (line, what) = format_error(&dir, "nobus.xml", text.replacen(attr, "", 1).as_bytes());
    assert_eq!(line, text[..at].matches('\n').count() as u64 + 1);
    assert!(
        what.contains("<pci> without the `busid` attribute"),
        "{what}"
    );

    // Garbage, binary and empty files, and a debug log: refused as not topology XML.
    let (line, what) = format_error(&dir, "garbage.xml", b"\x00\x01\xffgarbage<<>>");
    assert!(
        line == 1 && what.contains("not an NCCL topology XML"),
        "{what}"
    );
    let (line, what) = format_error(&dir, "empty.xml", b"");
    assert!(
        line == 1 && what.contains("not an NCCL topology XML"),
        "{what}"
    );
    let (_, what) = format_error(&dir, "html.xml", b"<html><body/></html>");
    assert!(what.contains("found <html>"), "{what}");
    if let Some(log) = common::nccl_log(A100_LOG) {
        assert!(!is_topo_xml(&log).unwrap());
        let e = read_topo_xml(&log).unwrap_err();
        assert!(
            e.to_string().contains("not an NCCL topology XML") && e.to_string().contains(A100_LOG),
            "{e}"
        );
    }

    // Every prefix of the file is refused without panicking, with a line inside the prefix.
    for n in 0..text.len() - "</system>\n".len() {
        let p = &text.as_bytes()[..n];
        let r = std::panic::catch_unwind(|| format_error(&dir, "prefix.xml", p));
        let (line, _) = r.unwrap_or_else(|_| panic!("prefix of {n} bytes"));
        assert!(
            line >= 1 && line <= p.iter().filter(|&&b| b == b'\n').count() as u64 + 1,
            "prefix {n}: line {line}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `<net …/>` → `<net …></net>` (and the same for every self-closing element).
fn expand_empty(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        match (line.trim_start().strip_prefix('<'), line.strip_suffix("/>")) {
            (Some(rest), Some(open)) => {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                out.push_str(&format!("{open}></{name}>\n"));
            }
            _ => out.push_str(&format!("{line}\n")),
        }
    }
    out
}

#[test]
fn other_spellings_of_the_real_file_read_the_same() {
    let Some(path) = common::nccl_log(RTX_XML) else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let want = read_topo_xml(&path).unwrap();
    let dir = scratch("spellings");
    let variants = [
        text.replace('\n', "\r\n"),
        text.replace('"', "'"),
        // Header, comment, and explicit end tags instead of `/>`.
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- dumped by NCCL -->\n{}",
            expand_empty(&text)
        ),
    ];
    for (i, v) in variants.iter().enumerate() {
        let p = dir.join("sugarlxn-nccl_test-nccl_topo.xml");
        std::fs::write(&p, v).unwrap();
        assert!(is_topo_xml(&p).unwrap());
        assert_eq!(read_topo_xml(&p).unwrap(), want, "variant {i}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
