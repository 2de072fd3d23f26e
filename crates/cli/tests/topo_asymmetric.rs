//! An asymmetric NVLink (1 link from GPU 0 to GPU 1, 12 links back: 20 and
//! 240 GB/s on SM80) in an NCCL topology XML: the pair matrix `topo` prints
//! holds the slower direction both ways, while the link list keeps both.

mod common;

const XML: &str = r#"<system version="1">
  <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="106">
    <pci busid="0000:17:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="0000:65:00.0" count="1" tclass="0x030200"/></gpu>
    </pci>
    <pci busid="0000:65:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="80" rank="1" gdr="1"><nvlink target="0000:17:00.0" count="12" tclass="0x030200"/></gpu>
    </pci>
  </cpu>
</system>
"#;

#[test]
fn pair_matrix_takes_the_slower_direction() {
    let dir = common::temp_dir("topo", "asym");
    let xml = dir.join("nccl_topo.xml");
    std::fs::write(&xml, XML).unwrap();
    let r = common::run_limited(common::commlens_cmd(&["topo", xml.to_str().unwrap()]), 60, "topo");
    assert_eq!(r.code, 0, "{}", r.err);
    let (links, matrix) = r.out.split_once("GPU-to-GPU bottleneck").expect("pair matrix printed");
    assert!(links.contains("NVL    20.0") && links.contains("NVL   240.0"), "both directions listed:\n{links}");
    let pairs: Vec<&str> = matrix.lines().filter(|l| l.starts_with("0-")).collect();
    assert_eq!(pairs.len(), 2, "{matrix}");
    for row in pairs {
        assert!(row.contains("20.0 NVL") && !row.contains("240.0"), "{row}");
    }
}
