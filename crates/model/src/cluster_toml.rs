//! Clusters described in a small TOML file. Every key is optional except that
//! either `preset` or `gpu` must say where to start; what a key does not set
//! comes from the preset (or from the preset of the GPU).
//!
//! ```toml
//! preset = "dgx-h100"        # optional base (`commlens cluster list`)
//! name = "my-cluster"
//! nodes = 2
//! gpus_per_node = 8
//! gpu = "H100"               # any name `NVIDIA H100 80GB HBM3` style
//! cpu = "intel"              # intel | amd | arm | power
//!
//! [intra]
//! fabric = "nvswitch"        # nvswitch | nvlink-mesh | nvlink-pairs | pcie
//! nvlink_gb_s = 450          # one direction per GPU, nominal
//! nvls = true
//! nvlink_domain = 8
//! pcie_gen = 5
//! sockets = 2
//! sys_gb_s = 22
//!
//! [nics]
//! count = 4
//! gbit_s = 400               # or speed = "400g"
//! tech = "infiniband"        # infiniband | roce | slingshot | efa | tcpx | socket
//! rail_aligned = true
//!
//! [network]
//! shape = "rail-fat-tree"    # rail-fat-tree | hpn-dual-plane | spine-leaf | dragonfly
//! oversubscription = 2.0
//! nodes_per_leaf = 1
//! latency_us = 2.0
//! hop_latency_us = 0.5
//!
//! [efficiency]               # achieved fraction of each nominal rate
//! nvlink = 0.8
//! pcie = 0.83
//! sys = 0.8
//! net = 0.92
//! ```
//!
//! Unknown keys, values of the wrong type and values out of range are errors
//! that name the file, the line and column, and what was expected.

use serde::Deserialize;
use toml::Spanned;

use crate::cluster::{parse_nic_spec, Cluster, CpuVendor, IntraFabric, NetTech, NetworkShape};
use crate::gpu::{gpu_by_name, pcie_x16_gb_s, GPUS};
use crate::presets::{preset, preset_for_gpu, PRESETS};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    preset: Option<Spanned<String>>,
    name: Option<String>,
    nodes: Option<Spanned<u32>>,
    gpus_per_node: Option<Spanned<u32>>,
    gpu: Option<Spanned<String>>,
    cpu: Option<Spanned<String>>,
    intra: Option<Intra>,
    nics: Option<NicsT>,
    network: Option<NetworkT>,
    efficiency: Option<EfficiencyT>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Intra {
    fabric: Option<Spanned<String>>,
    nvlink_gb_s: Option<Spanned<f64>>,
    nvls: Option<Spanned<bool>>,
    nvlink_domain: Option<Spanned<u32>>,
    pcie_gen: Option<Spanned<u32>>,
    sockets: Option<Spanned<u32>>,
    sys_gb_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NicsT {
    count: Option<Spanned<u32>>,
    gbit_s: Option<Spanned<f64>>,
    speed: Option<Spanned<String>>,
    tech: Option<Spanned<String>>,
    rail_aligned: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkT {
    shape: Option<Spanned<String>>,
    oversubscription: Option<Spanned<f64>>,
    nodes_per_leaf: Option<Spanned<u32>>,
    latency_us: Option<Spanned<f64>>,
    hop_latency_us: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EfficiencyT {
    nvlink: Option<Spanned<f64>>,
    pcie: Option<Spanned<f64>>,
    sys: Option<Spanned<f64>>,
    net: Option<Spanned<f64>>,
}

/// Line and column (1-based) of a byte offset.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(at, |i| at - i - 1) + 1;
    (line, col)
}

struct Ctx<'a> {
    text: &'a str,
    path: &'a str,
}

impl Ctx<'_> {
    fn err<T>(&self, span: std::ops::Range<usize>, what: String) -> Result<T, String> {
        let (line, col) = line_col(self.text, span.start);
        Err(format!("{}:{line}:{col}: {what}", self.path))
    }

    /// A number in `[lo, hi]`.
    fn num(&self, v: &Spanned<f64>, key: &str, lo: f64, hi: f64) -> Result<f64, String> {
        let x = *v.get_ref();
        if !(x >= lo && x <= hi) {
            return self.err(v.span(), format!("{key} = {x}: expected a number from {lo} to {hi}"));
        }
        Ok(x)
    }

    fn int(&self, v: &Spanned<u32>, key: &str, lo: u32, hi: u32) -> Result<u32, String> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return self.err(v.span(), format!("{key} = {x}: expected a whole number from {lo} to {hi}"));
        }
        Ok(x)
    }

    fn choice<T>(
        &self,
        v: &Spanned<String>,
        key: &str,
        parse: impl Fn(&str) -> Option<T>,
        names: &str,
    ) -> Result<T, String> {
        match parse(v.get_ref()) {
            Some(t) => Ok(t),
            None => self.err(v.span(), format!("{key} = \"{}\": expected one of {names}", v.get_ref())),
        }
    }
}

/// Builds the cluster a TOML description states; `path` names the file in
/// errors and provenance.
pub fn cluster_from_toml(text: &str, path: &str) -> Result<Cluster, String> {
    let f: File = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!("{path}:{line}:{col}: {}", e.message().trim())
        }
        None => format!("{path}: {}", e.message().trim()),
    })?;
    let cx = Ctx { text, path };
    let presets = PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let gpu_names = GPUS.iter().map(|g| g.name).collect::<Vec<_>>().join(", ");

    let gpu = match &f.gpu {
        Some(g) => match gpu_by_name(g.get_ref()) {
            Some(spec) => Some(spec),
            None => return cx.err(g.span(), format!("gpu = \"{}\": expected one of {gpu_names}", g.get_ref())),
        },
        None => None,
    };
    let mut c = match (&f.preset, gpu) {
        (Some(p), _) => match preset(p.get_ref()) {
            Some(c) => c,
            None => return cx.err(p.span(), format!("preset = \"{}\": expected one of {presets}", p.get_ref())),
        },
        (None, Some(g)) => match preset_for_gpu(g.name) {
            Some(name) => preset(name).expect("preset_for_gpu names presets"),
            None => {
                let span = f.gpu.as_ref().expect("gpu given").span();
                return cx.err(span, format!("gpu = \"{}\": no preset has this GPU; add `preset = \"…\"` ({presets})", g.name));
            }
        },
        (None, None) => {
            return Err(format!("{path}: neither `preset` nor `gpu`: say where to start, e.g. preset = \"dgx-h100\" or gpu = \"H100\""))
        }
    };
    let base = c.name.clone();
    c.provenance = vec![format!("file {path}, based on preset {base}")];

    if let Some(g) = gpu {
        if g.name != c.gpu.name {
            c.gpu = g.clone();
            c.intra.nvlink_gb_s = if c.intra.fabric == IntraFabric::Pcie { 0.0 } else { g.nvlink_gb_s() };
            c.intra.pcie_gb_s = pcie_x16_gb_s(g.pcie_gen);
        }
    }
    if let Some(n) = &f.nodes {
        c.nodes = cx.int(n, "nodes", 1, 1_000_000)?;
    }
    if let Some(n) = &f.gpus_per_node {
        let before = c.gpus_per_node;
        c.gpus_per_node = cx.int(n, "gpus_per_node", 1, 1024)?;
        // A preset's NVLink domain that is its node follows the node.
        if c.intra.fabric != IntraFabric::Pcie && c.intra.nvlink_domain == before {
            c.intra.nvlink_domain = c.gpus_per_node;
        }
    }
    if let Some(v) = &f.cpu {
        c.cpu = cx.choice(v, "cpu", CpuVendor::from_name, "intel, amd, arm, power")?;
    }

    if let Some(i) = &f.intra {
        if let Some(v) = &i.fabric {
            let fabric = cx.choice(v, "fabric", IntraFabric::from_name, "nvswitch, nvlink-mesh, nvlink-pairs, pcie")?;
            if fabric != c.intra.fabric {
                match fabric {
                    IntraFabric::Pcie => {
                        c.intra.nvlink_gb_s = 0.0;
                        c.intra.nvls = false;
                        c.intra.nvlink_domain = 1;
                    }
                    _ => {
                        if c.intra.nvlink_gb_s <= 0.0 {
                            c.intra.nvlink_gb_s = c.gpu.nvlink_gb_s();
                        }
                        if fabric != IntraFabric::NvSwitch {
                            c.intra.nvls = false;
                        }
                        c.intra.nvlink_domain = if fabric == IntraFabric::NvLinkPairs { 2 } else { c.gpus_per_node };
                    }
                }
                c.intra.fabric = fabric;
            }
        }
        if let Some(v) = &i.nvlink_gb_s {
            c.intra.nvlink_gb_s = cx.num(v, "nvlink_gb_s", 0.0, 100_000.0)?;
            if c.intra.nvlink_gb_s > 0.0 && c.intra.fabric == IntraFabric::Pcie {
                return cx.err(v.span(), "nvlink_gb_s > 0 with fabric = \"pcie\": expected 0, or a fabric with NVLink".into());
            }
        }
        if let Some(v) = &i.nvls {
            if *v.get_ref() && c.intra.fabric != IntraFabric::NvSwitch {
                return cx.err(v.span(), format!("nvls = true with fabric = \"{}\": NVLS needs fabric = \"nvswitch\"", c.intra.fabric.name()));
            }
            c.intra.nvls = *v.get_ref();
        }
        if let Some(v) = &i.nvlink_domain {
            c.intra.nvlink_domain = cx.int(v, "nvlink_domain", 1, 100_000)?;
        }
        if let Some(v) = &i.pcie_gen {
            let gen = cx.int(v, "pcie_gen", 1, 7)?;
            c.gpu.pcie_gen = gen;
            c.intra.pcie_gb_s = pcie_x16_gb_s(gen);
        }
        if let Some(v) = &i.sockets {
            c.intra.sockets = cx.int(v, "sockets", 1, 64)?;
        }
        if let Some(v) = &i.sys_gb_s {
            c.intra.sys_gb_s = cx.num(v, "sys_gb_s", 0.1, 100_000.0)?;
        }
    }

    if let Some(n) = &f.nics {
        if let Some(v) = &n.count {
            c.nics.per_node = cx.int(v, "count", 1, 64)?;
        }
        match (&n.gbit_s, &n.speed) {
            (Some(_), Some(s)) => return cx.err(s.span(), "both gbit_s and speed: expected one of them".into()),
            (Some(v), None) => c.nics.gbit_s = cx.num(v, "gbit_s", 1.0, 100_000.0)?,
            (None, Some(s)) => match parse_nic_spec(&format!("1x{}", s.get_ref())) {
                Ok((_, g)) => c.nics.gbit_s = g,
                Err(_) => return cx.err(s.span(), format!("speed = \"{}\": expected a line rate such as \"400g\", \"200\" or \"0.8t\"", s.get_ref())),
            },
            (None, None) => {}
        }
        if let Some(v) = &n.tech {
            c.nics.tech = cx.choice(v, "tech", NetTech::from_name, "infiniband, roce, slingshot, efa, tcpx, socket")?;
            c.network.latency_us = c.nics.tech.default_latency_us();
        }
        if let Some(r) = n.rail_aligned {
            c.nics.rail_aligned = r;
        }
    }

    if let Some(n) = &f.network {
        if let Some(v) = &n.shape {
            c.network.shape =
                cx.choice(v, "shape", NetworkShape::from_name, "rail-fat-tree, hpn-dual-plane, spine-leaf, dragonfly")?;
        }
        if let Some(v) = &n.oversubscription {
            c.network.oversubscription = cx.num(v, "oversubscription", 1.0, 1000.0)?;
        }
        if let Some(v) = &n.nodes_per_leaf {
            c.network.nodes_per_leaf = cx.int(v, "nodes_per_leaf", 1, 1_000_000)?;
        }
        if let Some(v) = &n.latency_us {
            c.network.latency_us = cx.num(v, "latency_us", 0.0, 10_000.0)?;
        }
        if let Some(v) = &n.hop_latency_us {
            c.network.hop_latency_us = cx.num(v, "hop_latency_us", 0.0, 10_000.0)?;
        }
    }

    if let Some(e) = &f.efficiency {
        for (v, key, slot) in [
            (&e.nvlink, "nvlink", &mut c.efficiency.nvlink),
            (&e.pcie, "pcie", &mut c.efficiency.pcie),
            (&e.sys, "sys", &mut c.efficiency.sys),
            (&e.net, "net", &mut c.efficiency.net),
        ] {
            if let Some(v) = v {
                *slot = cx.num(v, key, 0.01, 1.0)?;
            }
        }
    }

    c.name = match f.name {
        Some(n) if !n.trim().is_empty() => n,
        _ => std::path::Path::new(path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string()),
    };
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../examples/cluster.toml");

    #[test]
    fn the_example_parses() {
        let c = cluster_from_toml(EXAMPLE, "examples/cluster.toml").unwrap();
        assert_eq!((c.nodes, c.gpus_per_node, c.gpu.name), (2, 8, "H100"));
        assert_eq!((c.nics.per_node, c.nics.gbit_s, c.nics.tech), (4, 400.0, NetTech::InfiniBand));
        assert!(c.nics.rail_aligned);
        assert_eq!(c.network.shape, NetworkShape::RailFatTree);
        assert_eq!(c.network.oversubscription, 2.0);
        assert_eq!(c.node_net_gb_s(2), 100.0, "4 x 50 GB/s halved above the leaf");
        assert_eq!(c.intra.fabric, IntraFabric::NvSwitch);
        assert_eq!(c.intra.nvlink_gb_s, 450.0);
        assert!(c.provenance[0].contains("examples/cluster.toml"));
    }

    #[test]
    fn minimal_and_gpu_only() {
        let c = cluster_from_toml("preset = \"dgx-a100\"\n", "a.toml").unwrap();
        assert_eq!((c.name.as_str(), c.gpus_per_node), ("a", 8));
        let g = cluster_from_toml("gpu = \"NVIDIA GeForce RTX 4090\"\nnodes = 3\n[nics]\nspeed = \"25g\"\n", "b.toml").unwrap();
        assert_eq!((g.gpu.name, g.nodes, g.nics.gbit_s), ("RTX4090", 3, 25.0));
        let d = cluster_from_toml("preset = \"dgx-h100\"\ngpus_per_node = 4\n", "f.toml").unwrap();
        assert_eq!(d.intra.nvlink_domain, 4);
        let nvl72 = cluster_from_toml("preset = \"gb200-nvl72\"\ngpus_per_node = 2\n", "g.toml").unwrap();
        assert_eq!(nvl72.intra.nvlink_domain, 72);
        assert_eq!(g.intra.fabric, IntraFabric::Pcie);
        // A GPU other than the preset's takes its NVLink and PCIe.
        let h = cluster_from_toml("preset = \"dgx-h100\"\ngpu = \"B200\"\n", "c.toml").unwrap();
        assert_eq!((h.gpu.name, h.intra.nvlink_gb_s, h.intra.pcie_gb_s), ("B200", 900.0, 96.0));
        // Switching to PCIe drops NVLink and NVLS.
        let p = cluster_from_toml("preset = \"dgx-h100\"\n[intra]\nfabric = \"pcie\"\n", "d.toml").unwrap();
        assert_eq!((p.intra.nvlink_gb_s, p.intra.nvls, p.intra.nvlink_domain), (0.0, false, 1));
        let e = cluster_from_toml("preset = \"dgx-h100\"\n[efficiency]\nnet = 0.85\n[nics]\ntech = \"roce\"\n", "e.toml").unwrap();
        assert_eq!((e.efficiency.net, e.network.latency_us), (0.85, 3.0));
    }

    fn error(text: &str) -> String {
        cluster_from_toml(text, "x.toml").unwrap_err()
    }

    #[test]
    fn errors_name_file_line_and_expectation() {
        let e = error("preset = \"dgx-h100\"\n[nics]\ncount = 4\nspeeed = \"400g\"\n");
        assert!(e.starts_with("x.toml:4:"), "{e}");
        assert!(e.contains("unknown field `speeed`") && e.contains("`speed`"), "{e}");
        let e = error("preset = \"dgx-h100\"\nbogus = 1\n");
        assert!(e.starts_with("x.toml:2:") && e.contains("bogus"), "{e}");
        let e = error("preset = \"dgx-h9000\"\n");
        assert!(e.starts_with("x.toml:1:10:") && e.contains("dgx-h100") && e.contains("rtx4090-pcie"), "{e}");
        let e = error("preset = \"dgx-h100\"\n\n[intra]\nfabric = \"optical\"\n");
        assert!(e.starts_with("x.toml:4:") && e.contains("nvswitch, nvlink-mesh"), "{e}");
        let e = error("preset = \"dgx-h100\"\nnodes = -2\n");
        assert!(e.starts_with("x.toml:2:"), "{e}");
        let e = error("preset = \"dgx-h100\"\nnodes = \"two\"\n");
        assert!(e.starts_with("x.toml:2:") && e.contains("u32"), "{e}");
        let e = error("preset = \"dgx-h100\"\n[network]\noversubscription = 0.5\n");
        assert!(e.starts_with("x.toml:3:") && e.contains("from 1 to"), "{e}");
        let e = error("preset = \"dgx-h100\"\n[nics]\ngbit_s = 400\nspeed = \"400g\"\n");
        assert!(e.starts_with("x.toml:4:") && e.contains("both"), "{e}");
        let e = error("preset = \"dgx-h100\"\n[nics]\nspeed = \"fast\"\n");
        assert!(e.starts_with("x.toml:3:") && e.contains("400g"), "{e}");
        let e = error("gpu = \"Voodoo2\"\n");
        assert!(e.starts_with("x.toml:1:") && e.contains("H100"), "{e}");
        let e = error("name = \"x\"\n");
        assert!(e.contains("neither `preset` nor `gpu`"), "{e}");
        let e = error("preset = \"rtx4090-pcie\"\n[intra]\nnvls = true\n");
        assert!(e.starts_with("x.toml:3:") && e.contains("NVLS"), "{e}");
        let e = error("preset = [\n");
        assert!(e.starts_with("x.toml:"), "{e}");
    }
}
