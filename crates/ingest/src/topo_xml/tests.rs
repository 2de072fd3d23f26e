//! The XML reader on small hand-written files: the shapes NCCL writes that the two
//! real samples do not have (PCI switches, NVSwitch, several hosts, skipped GPUs),
//! the tolerated syntax, and the errors. The real files are in tests/topo_xml.rs.

use super::{looks_like_topo_xml, read_topo_xml_from, Fail};
use commlens_core::topo::{LinkKind, Topology};

fn read(s: &str) -> Result<Topology, (u64, String)> {
    read_topo_xml_from(s.as_bytes(), "t").map_err(|f| match f {
        Fail::At(l, w) => (l, w),
        Fail::Io(e) => panic!("{e}"),
    })
}

/// Links as `FROM>TO KIND bw` strings, in order.
fn links(t: &Topology) -> Vec<String> {
    let n = |i: usize| format!("{}/{}", t.nodes[i].kind.name(), t.nodes[i].id);
    t.links
        .iter()
        .map(|l| format!("{}>{} {} {}", n(l.from), n(l.to), l.kind.name(), l.bw_gb_s))
        .collect()
}

const SWITCHED: &str = r#"<?xml version="1.0"?>
<!-- two GPUs behind a PCI switch, NVSwitch, a skipped GPU, a NIC on the switch -->
<system version="1">
  <cpu numaid='1' host_hash='0x1' arch='x86_64' vendor='GenuineIntel' familyid='6' modelid='0x8f'>
    <pci busid="0000:0c:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci link_width="16" link_speed="32.0 GT/s PCIe" class="0x030200" busid="0000:0f:00.0">
        <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="0000:a0:00.0" count="18" tclass="0x068000"/></gpu>
      </pci>
      <pci busid="0000:10:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="90" rank="1" gdr="1"><nvlink target="0000:a1:00.0" count="18" tclass="0x068000"/></gpu>
      </pci>
      <pci busid="0000:11:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="2" sm="90"/></pci>
      <pci busid="0000:12:00.0" class="0x020000" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1"/><net name="nodev" speed="1"/></nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="0" host_hash="0x1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="0x8f"/>
</system>
"#;

#[test]
fn switches_nvswitch_and_ranks() {
    let t = read(SWITCHED).unwrap();
    assert_eq!(t.host, "t (host_hash 0x0000000000000001)");
    let ids: Vec<String> = t
        .nodes
        .iter()
        .map(|n| format!("{}/{}", n.kind.name(), n.id))
        .collect();
    // Print order: links sorted by bandwidth, the NVS seen from the first GPU.
    assert_eq!(
        ids,
        [
            "CPU/0-1",
            "PCI/0-c000",
            "GPU/0-f000",
            "NVS/0-0",
            "GPU/0-10000",
            "NIC/0-12000",
            "NET/0-0",
            "CPU/0-0"
        ]
    );
    assert_eq!(
        links(&t),
        [
            "CPU/0-1>PCI/0-c000 PCI 48",
            "PCI/0-c000>GPU/0-f000 PCI 48",
            "GPU/0-f000>NVS/0-0 NVL 370.8",
            "PCI/0-c000>GPU/0-10000 PCI 48",
            "GPU/0-10000>NVS/0-0 NVL 370.8",
            "PCI/0-c000>NIC/0-12000 PCI 48",
            "NIC/0-12000>NET/0-0 NET 50",
            "CPU/0-1>CPU/0-0 SYS 22",
            "CPU/0-0>CPU/0-1 SYS 22",
        ]
    );
    let g: Vec<_> = t.gpus().map(|(i, n)| (i, n.rank, n.bus_id)).collect();
    assert_eq!(
        g.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        [(Some(0), Some(0xf000)), (Some(1), Some(0x10000))]
    );
    assert_eq!(t.gpu_pair_bw(g[0].0, g[1].0), Some((370.8, LinkKind::Nvl)));
    assert_eq!((t.max_bw_gb_s, t.total_bw_gb_s), (370.8, 370.8));
    assert_eq!(t.net_bw_gb_s(), Some(50.0));
    assert!(t.paths.is_empty());
}

#[test]
fn hosts_sockets_and_cpu_nics() {
    let xml = "<system version=\"1\">\r\n\
        <cpu numaid=\"0\" host_hash=\"0xa\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\">\r\n\
          <pci busid=\"0000:01:00.0\" class=\"0x030000\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"><gpu sm=\"89\" rank=\"0\"/></pci>\r\n\
          <nic><net dev=\"1\" speed=\"10000\"/></nic>\r\n\
        </cpu>\r\n\
        <cpu numaid=\"1\" host_hash=\"0xa\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\">\r\n\
          <pci busid=\"0000:81:00.0\" class=\"0x030000\" link_speed=\"8.0 GT/s PCIe\" link_width=\"16\"><gpu sm=\"89\" rank=\"1\"/></pci>\r\n\
          <nic><net dev=\"1\" speed=\"10000\"/><net dev=\"2\" speed=\"-1\"/></nic>\r\n\
        </cpu>\r\n\
        <cpu numaid=\"0\" host_hash=\"0xb\" arch=\"arm64\"><pci busid=\"0000:01:00.0\" class=\"0x030000\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"><gpu sm=\"90\" rank=\"2\"/></pci></cpu>\r\n\
        </system>\r\n";
    let t = read(xml).unwrap();
    assert_eq!(
        t.host,
        "t (host_hash 0x000000000000000a, 0x000000000000000b)"
    );
    let l = links(&t);
    assert_eq!(
        l,
        [
            "CPU/0-0>NIC/0-0 PCI 5000",
            "NIC/0-0>NET/0-1 NET 1.25",
            "NIC/0-0>NET/0-2 NET 1.25",
            "CPU/0-0>GPU/0-1000 PCI 24",
            "CPU/0-0>CPU/0-1 SYS 24",
            "CPU/0-1>CPU/0-0 SYS 24",
            "CPU/0-1>GPU/0-81000 PCI 12",
            "CPU/1-0>GPU/1-1000 PCI 24",
        ]
    );
    let g: Vec<usize> = t.gpus().map(|(i, _)| i).collect();
    assert_eq!(t.gpu_pair_bw(g[0], g[1]), Some((12.0, LinkKind::Sys)));
    assert_eq!(t.nodes[g[2]].bus_id, Some(0x1000));
}

#[test]
fn syntax_variants_give_the_same_topology() {
    let a = read(r#"<system version="1"><cpu numaid="0" arch="ppc64"><pci busid="0000:04:00.0" class="0x030200" link_speed="8 GT/s" link_width="16"><gpu sm="70" rank="0"><nvlink count="3" tclass="0x068001"/></gpu></pci></cpu></system>"#).unwrap();
    let b = read(
        "\u{feff}  <!-- c --><?xml version='1.0'?>\n<system\nversion='1'\n>\n<cpu arch = 'ppc64' numaid = '0' >\n<pci link_width='16' link_speed='8 GT/s' class='0x030200' busid='0000:04:00.0'>\n<gpu rank='0' sm='70'>\n<nvlink tclass='0x068001' count='3'></nvlink><!-- x --><unknown a='1'><b/></unknown>\n</gpu></pci></cpu></system>\n<!-- end -->\n",
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.host, "t");
    assert_eq!(
        links(&a),
        [
            "CPU/0-0>GPU/0-4000 NVL 60",
            "CPU/0-0>GPU/0-4000 PCI 12",
            "GPU/0-4000>CPU/0-0 NVL 60"
        ]
    );
    assert_eq!((a.max_bw_gb_s, a.total_bw_gb_s), (5000.0, 5000.0));
}

#[test]
fn detection() {
    assert!(looks_like_topo_xml(b"<system version=\"1\">"));
    assert!(looks_like_topo_xml(
        b"\xEF\xBB\xBF\r\n<?xml version=\"1.0\"?>\n<!-- x -->\n<system>"
    ));
    assert!(!looks_like_topo_xml(b"<systemx>"));
    assert!(!looks_like_topo_xml(b"<graphs version=\"1\">"));
    assert!(!looks_like_topo_xml(b"host:1:1 [0] NCCL INFO <system"));
    assert!(!looks_like_topo_xml(b"<!-- never closed"));
    assert!(!looks_like_topo_xml(b""));
}

#[test]
fn errors_name_the_line_and_what_was_expected() {
    let cases: [(&str, u64, &str); 14] = [
        ("", 1, "not an NCCL topology XML"),
        ("  \n\n", 3, "empty file"),
        ("hello world", 1, "not an NCCL topology XML"),
        ("<graphs version=\"1\"/>", 1, "found <graphs>"),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"arm64\">\n<pci",
            3,
            "end of file inside `<pci`",
        ),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"arm64\">\n",
            3,
            "<cpu> opened at line 2 is not closed",
        ),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"arm64\">\n</pci>",
            3,
            "</pci> where </cpu> was expected",
        ),
        (
            "<system>\n<cpu arch=\"arm64\">\n",
            2,
            "<cpu> without the `numaid` attribute",
        ),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"arm64\">\n<pci class=\"0x0604\"/>",
            3,
            "<pci> without the `busid` attribute",
        ),
        (
            "<system>\n<cpu numaid=\"x\" arch=\"arm64\"/>",
            2,
            "<cpu numaid=\"x\">: expected an integer",
        ),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"arm64\"><pci busid=\"zz:00.0\"/>",
            2,
            "expected a PCI bus id",
        ),
        ("<system>\n</system>", 2, "no <cpu>"),
        (
            "<system><cpu numaid=\"0\" arch=\"arm64\"/></system>\n<system>",
            2,
            "after the end of </system>",
        ),
        (
            "<system>\n<cpu numaid=\"0\" arch=\"x86_64\"/>",
            2,
            "without the `vendor` attribute",
        ),
    ];
    for (xml, line, what) in cases {
        let (l, w) = read(xml).unwrap_err();
        assert!(l == line && w.contains(what), "{xml:?}: got {l}: {w}");
    }
    let neg = "<system>\n<cpu numaid=\"0\" arch=\"arm64\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\" link_speed=\"8 GT/s\" link_width=\"16\">\n<gpu sm=\"80\" rank=\"0\">\n<nvlink count=\"-2\" tclass=\"0x068000\"/>";
    let (l, w) = read(neg).unwrap_err();
    assert!(
        l == 5 && w.contains("<nvlink count=\"-2\">: expected an integer ≥ 0"),
        "{l}: {w}"
    );
    let deep = format!(
        "<system><cpu numaid=\"0\" arch=\"arm64\">{}",
        "<a>".repeat(100)
    );
    assert!(read(&deep).unwrap_err().1.contains("levels deep"));
}
