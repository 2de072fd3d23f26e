//! What each element of the topology XML means to NCCL (`ncclTopoAddCpu`,
//! `ncclTopoAddPci`, `ncclTopoAddNic`, `ncclTopoAddNet`, `ncclTopoAddGpu`, and the
//! second pass `ncclTopoAddNvLinks`/`ncclTopoAddC2c`/`ncclTopoAddPciLinks`): the
//! per-element state of the open elements, the attribute lookups with their
//! errors, and the calls into [`Graph`] (see the parent module's doc for the rules).

use super::graph::{self, CpuInfo, Graph, LOC_BW};
use super::Fail;
use commlens_core::topo::{LinkKind, NodeKind, Topology};

/// What an open element is to the reader.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Frame {
    System,
    Cpu {
        cpu: usize,
        sys: u64,
    },
    Pci {
        parent: usize,
        sys: u64,
        bus: u64,
        class: Class,
        bw: f64,
        role: Role,
    },
    /// `net` elements go to this NIC.
    Nic {
        nic: usize,
        sys: u64,
    },
    Gpu {
        gpu: usize,
        sys: u64,
    },
    /// Unused element: its content is checked for well-formedness only.
    Skip,
}

/// PCI class as NCCL reads it (`kvDictPciClass`, prefix match).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Class {
    Bridge,
    Gpu,
    Nic,
    NvSwitch,
    Cpu,
}

fn class_of(s: &str) -> Class {
    if s.starts_with("0x060400") || s.starts_with("0x080100") {
        Class::Bridge
    } else if s.starts_with("0x068000") {
        Class::NvSwitch
    } else if s.starts_with("0x068001") {
        Class::Cpu
    } else if s.starts_with("0x03") {
        Class::Gpu
    } else if s.starts_with("0x02") {
        Class::Nic
    } else {
        Class::Bridge
    }
}

/// What a `<pci>` turned out to be (decided by its first `gpu`, `nic` or `pci` child).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Role {
    Pending,
    Node { node: usize, attach: bool },
    Nothing,
}

/// An `<nvlink>` waiting for every GPU to be known.
struct NvLink {
    gpu: usize,
    sys: u64,
    class: Class,
    target: Option<u64>,
    count: i64,
}

/// The attributes of one element, with the lookups and the errors that name it.
pub(super) struct Attrs<'a> {
    pub(super) elem: &'a str,
    pub(super) line: u64,
    pub(super) list: &'a [(String, String)],
}

impl Attrs<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.list
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
    }

    fn req(&self, key: &str) -> Result<&str, Fail> {
        self.get(key).ok_or_else(|| {
            Fail::At(
                self.line,
                format!("<{}> without the `{key}` attribute NCCL needs", self.elem),
            )
        })
    }

    fn bad(&self, key: &str, v: &str, expected: &str) -> Fail {
        Fail::At(
            self.line,
            format!("<{} {key}={v:?}>: expected {expected}", self.elem),
        )
    }

    fn int_of(&self, key: &str, v: &str) -> Result<i64, Fail> {
        let (neg, t) = v.strip_prefix('-').map_or((false, v), |t| (true, t));
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => i64::from_str_radix(h, 16).ok(),
            None => t.parse::<i64>().ok().filter(|_| !t.starts_with('+')),
        };
        parsed
            .map(|x| if neg { -x } else { x })
            .ok_or_else(|| self.bad(key, v, "an integer"))
    }

    fn int(&self, key: &str) -> Result<Option<i64>, Fail> {
        self.get(key).map(|v| self.int_of(key, v)).transpose()
    }

    fn req_int(&self, key: &str) -> Result<i64, Fail> {
        self.int_of(key, self.req(key)?)
    }

    /// A required count or bandwidth: an integer ≥ 0.
    fn req_count(&self, key: &str) -> Result<i64, Fail> {
        let v = self.req(key)?;
        let n = self.int_of(key, v)?;
        if n < 0 {
            return Err(self.bad(key, v, "an integer ≥ 0"));
        }
        Ok(n)
    }

    /// A PCI bus id `dddd:bb:dd.f` packed as NCCL does (hex digits, `:` and `.` dropped).
    fn bus_id(&self, key: &str) -> Result<u64, Fail> {
        let v = self.req(key)?;
        let hex: String = v.chars().filter(|c| !matches!(c, ':' | '.')).collect();
        if hex.is_empty()
            || hex.len() > 15
            || !v
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(self.bad(key, v, "a PCI bus id such as 0000:17:00.0"));
        }
        u64::from_str_radix(&hex, 16)
            .map_err(|_| self.bad(key, v, "a PCI bus id such as 0000:17:00.0"))
    }
}

/// The reader's state between events.
#[derive(Default)]
pub(super) struct Reader {
    g: Graph,
    hosts: Vec<u64>,
    nvlinks: Vec<NvLink>,
    c2c: Vec<(usize, f64)>,
    pcilinks: Vec<(usize, u64, u64)>,
}

impl Reader {
    pub(super) fn has_cpu(&self) -> bool {
        self.g.nodes.iter().any(|n| n.kind == NodeKind::Cpu)
    }

    /// An element opens inside the innermost open one.
    pub(super) fn open(
        &mut self,
        a: &Attrs<'_>,
        stack: &mut [(String, u64, Frame)],
    ) -> Result<Frame, Fail> {
        let parent = stack.last_mut().map(|f| &mut f.2);
        Ok(match (parent, a.elem) {
            (Some(Frame::System), "cpu") => self.cpu(a)?,
            (Some(&mut Frame::Cpu { cpu, sys }), "pci") => pci(a, cpu, sys)?,
            (Some(&mut Frame::Cpu { cpu, sys }), "nic") => {
                let (nic, new) = self.g.get_or_add(NodeKind::Nic, sys, 0);
                if new {
                    self.g.attach(nic, cpu, LOC_BW);
                }
                Frame::Nic { nic, sys }
            }
            (
                Some(Frame::Pci {
                    sys,
                    bus,
                    class,
                    role,
                    ..
                }),
                child @ ("pci" | "gpu" | "nic" | "pcilink"),
            ) => {
                let (sys, bus) = (*sys, *bus);
                match (*role, child) {
                    (Role::Pending, "gpu") => {
                        let Some(rank) = a.int("rank")? else {
                            *role = Role::Nothing;
                            return Ok(Frame::Skip);
                        };
                        let rank = u32::try_from(rank).map_err(|_| {
                            a.bad("rank", a.get("rank").unwrap_or(""), "a rank ≥ 0")
                        })?;
                        let sm = a.req_int("sm")?;
                        let (gpu, _) = self.g.get_or_add(NodeKind::Gpu, sys, bus);
                        let node = &mut self.g.nodes[gpu];
                        node.rank.get_or_insert(rank);
                        node.sm = sm;
                        *role = Role::Node {
                            node: gpu,
                            attach: true,
                        };
                        Frame::Gpu { gpu, sys }
                    }
                    (Role::Pending, "nic") => {
                        let (nic, new) = self.g.get_or_add(NodeKind::Nic, sys, bus);
                        *role = Role::Node {
                            node: nic,
                            attach: new,
                        };
                        Frame::Nic { nic, sys }
                    }
                    (Role::Pending, "pci") if *class == Class::Bridge => {
                        let (sw, _) = self.g.get_or_add(NodeKind::PciSwitch, sys, bus);
                        *role = Role::Node {
                            node: sw,
                            attach: true,
                        };
                        pci(a, sw, sys)?
                    }
                    (Role::Node { node, .. }, "pci")
                        if self.g.nodes[node].kind == NodeKind::PciSwitch =>
                    {
                        pci(a, node, sys)?
                    }
                    (Role::Node { node, .. }, "pcilink")
                        if self.g.nodes[node].kind == NodeKind::PciSwitch =>
                    {
                        let target = a.bus_id("target")?;
                        self.pcilinks.push((node, sys, target));
                        Frame::Skip
                    }
                    _ => Frame::Skip,
                }
            }
            (Some(&mut Frame::Nic { nic, sys }), "net") => {
                self.net(a, nic, sys)?;
                Frame::Skip
            }
            (Some(&mut Frame::Gpu { gpu, sys }), "nvlink") => {
                let count = a.req_count("count")?;
                let class = class_of(a.req("tclass")?);
                let target = if class == Class::Gpu {
                    Some(a.bus_id("target")?)
                } else {
                    None
                };
                self.nvlinks.push(NvLink {
                    gpu,
                    sys,
                    class,
                    target,
                    count,
                });
                Frame::Skip
            }
            (Some(&mut Frame::Gpu { gpu, .. }), "c2c") => {
                let bw = a.req_count("count")? as f64 * a.req_count("bw")? as f64 / 1000.0;
                self.c2c.push((gpu, bw));
                Frame::Skip
            }
            _ => Frame::Skip,
        })
    }

    /// `<cpu>`: the CPU node, its host, and the bandwidth of its SYS links.
    fn cpu(&mut self, a: &Attrs<'_>) -> Result<Frame, Fail> {
        let numa = a.req_int("numaid")?;
        let hash = match a.get("host_hash") {
            Some(v) => u64::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16)
                .map_err(|_| a.bad("host_hash", v, "a hexadecimal host hash"))?,
            None => 0,
        };
        let sys = match self.hosts.iter().position(|&h| h == hash) {
            Some(i) => i as u64,
            None => {
                self.hosts.push(hash);
                self.hosts.len() as u64 - 1
            }
        };
        let arch = a.req("arch")?;
        let mut info = CpuInfo {
            arch,
            vendor: None,
            family: 0,
            model: 0,
        };
        if arch.starts_with("x86_64") {
            let vendor = a.req("vendor")?;
            info.vendor = Some(vendor);
            let intel_like = ["GenuineIntel", "CentaurHauls", "  Shanghai  "]
                .iter()
                .any(|v| vendor.starts_with(v));
            if intel_like || vendor.starts_with("AuthenticAMD") {
                info.family = a.req_int("familyid")?;
            }
            if intel_like {
                info.model = a.req_int("modelid")?;
            }
        }
        // NCCL_TOPO_ID keeps the low 56 bits of the local id (numaid -1 included).
        let (cpu, _) = self
            .g
            .get_or_add(NodeKind::Cpu, sys, (numa as u64) & 0x00ff_ffff_ffff_ffff);
        self.g.nodes[cpu].sys_bw = graph::inter_cpu_bw(&info);
        Ok(Frame::Cpu { cpu, sys })
    }

    /// `<net dev speed>` under a NIC (skipped without `dev`, or when marked `net="0"`).
    fn net(&mut self, a: &Attrs<'_>, nic: usize, sys: u64) -> Result<(), Fail> {
        let Some(dev) = a.int("dev")? else {
            return Ok(());
        };
        if a.int("net")? == Some(0) {
            return Ok(());
        }
        let mbps = a.int("speed")?.filter(|&s| s > 0).unwrap_or(10000);
        let (net, _) = self
            .g
            .get_or_add(NodeKind::Net, sys, (dev as u64) & 0x00ff_ffff_ffff_ffff);
        // NCCL makes a new NET node per listing; ours are merged, so one link each way.
        if !self.g.has_link(nic, net, LinkKind::Net) {
            let bw = mbps as f64 / 8000.0;
            self.g.connect(nic, net, LinkKind::Net, bw);
            self.g.connect(net, nic, LinkKind::Net, bw);
        }
        Ok(())
    }

    /// An element closes; a `<pci>` joins its parent now (after its children, as in NCCL).
    pub(super) fn close(&mut self, frame: Frame) {
        if let Frame::Pci {
            parent,
            sys,
            bus,
            class,
            bw,
            role,
        } = frame
        {
            let node = match role {
                Role::Pending if class == Class::Bridge => {
                    Some(self.g.get_or_add(NodeKind::PciSwitch, sys, bus).0)
                }
                Role::Node { node, attach: true } => Some(node),
                _ => None,
            };
            if let Some(n) = node {
                self.g.attach(n, parent, bw);
            }
        }
    }

    /// Second pass (NVLink, C2C and PCI links, which need every node), SYS links, sort, print walk.
    pub(super) fn finish(mut self, stem: &str) -> Topology {
        for l in std::mem::take(&mut self.nvlinks) {
            let bw = l.count as f64 * graph::nvlink_bw(self.g.nodes[l.gpu].sm);
            match l.class {
                Class::Gpu => {
                    if let Some(remote) =
                        l.target.and_then(|b| self.g.find(NodeKind::Gpu, l.sys, b))
                    {
                        self.g.connect(l.gpu, remote, LinkKind::Nvl, bw);
                    }
                }
                class => {
                    let remote = if class == Class::Cpu {
                        self.g.local_cpu(l.gpu)
                    } else {
                        Some(self.g.get_or_add(NodeKind::NvSwitch, 0, 0).0)
                    };
                    if let Some(remote) = remote {
                        self.g.connect(l.gpu, remote, LinkKind::Nvl, bw);
                        self.g.connect(remote, l.gpu, LinkKind::Nvl, bw);
                    }
                }
            }
        }
        for (gpu, bw) in std::mem::take(&mut self.c2c) {
            if let Some(cpu) = self.g.local_cpu(gpu) {
                self.g.connect(gpu, cpu, LinkKind::C2c, bw);
                self.g.connect(cpu, gpu, LinkKind::C2c, bw);
            }
        }
        for (sw, sys, target) in std::mem::take(&mut self.pcilinks) {
            if let Some(remote) = self.g.find(NodeKind::PciSwitch, sys, target) {
                self.g.connect(sw, remote, LinkKind::Loc, LOC_BW);
            }
        }
        self.g.connect_cpus();
        self.g.sort();
        let hashes: Vec<String> = self
            .hosts
            .iter()
            .filter(|&&h| h != 0)
            .map(|h| format!("{h:#018x}"))
            .collect();
        let host = if hashes.is_empty() {
            stem.to_string()
        } else {
            format!("{stem} (host_hash {})", hashes.join(", "))
        };
        self.g.to_topology(&host)
    }
}

/// `<pci>` under `parent`: its class, bus id and link bandwidth; what it is comes later.
fn pci(a: &Attrs<'_>, parent: usize, sys: u64) -> Result<Frame, Fail> {
    let bus = a.bus_id("busid")?;
    let class = class_of(a.req("class")?);
    let width = a.req_int("link_width")?;
    let speed = a.req("link_speed")?;
    if !(0..=1024).contains(&width) {
        return Err(a.bad(
            "link_width",
            a.get("link_width").unwrap_or(""),
            "a lane count (0 to 1024)",
        ));
    }
    Ok(Frame::Pci {
        parent,
        sys,
        bus,
        class,
        bw: graph::pci_bw(width, speed),
        role: Role::Pending,
    })
}
