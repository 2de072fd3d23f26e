//! The slowest link inside each logical communicator (thesis eq. 4.12):
//! `BW_bottleneck = min over member pairs (i, j) of BW_link(i, j)`, where the
//! link between two GPUs of one host comes from that host's topology (the
//! slower direction of the pair) and the link between hosts is the slower of
//! the two GPUs' routes to their NICs (NCCL's logged GPU → NET paths, else the
//! hosts' NIC speeds).

use commlens_core::model::{DevIdx, LogicalCommIdx};
use commlens_core::{LinkKind, OpTable};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    pub comm: String,
    pub bw_gb_s: f64,
    pub link: LinkKind,
    /// Global ranks (or device indices when ranks are unknown) of the pair.
    pub between: (String, String),
    /// Pairs whose bandwidth could not be determined (no topology logged).
    pub unknown_pairs: usize,
}

/// Bandwidth and type of the link between two devices, when known.
pub fn pair_bandwidth(t: &OpTable, a: DevIdx, b: DevIdx) -> Option<(f64, LinkKind)> {
    let da = &t.devices[a.ix()];
    let db = &t.devices[b.ix()];
    let ha = &t.processes[da.proc.ix()].host;
    let hb = &t.processes[db.proc.ix()].host;
    if ha != hb {
        // Each side's GPU → NIC route as NCCL logged it (else its host's NIC speed).
        let side = |host: &str, bus: Option<u64>| {
            let topo = t.topology_of_host(host)?;
            match bus.and_then(|b| topo.gpu_by_bus(b)) {
                Some(g) => topo.gpu_net_bw(g),
                None => topo.net_bw_gb_s(),
            }
        };
        let na = side(ha, da.bus_id)?;
        let nb = side(hb, db.bus_id)?;
        return Some((na.min(nb), LinkKind::Net));
    }
    let topo = t.topology_of_host(ha)?;
    let ga = topo.gpu_by_bus(da.bus_id?)?;
    let gb = topo.gpu_by_bus(db.bus_id?)?;
    topo.gpu_pair_bw(ga, gb)
}

/// Bottleneck of one logical communicator; `None` for single-member groups
/// or when no pair's bandwidth is known.
pub fn bottleneck(t: &OpTable, l: LogicalCommIdx) -> Option<Bottleneck> {
    let lc = &t.logical[l.ix()];
    let devs: Vec<DevIdx> = lc.members.iter().filter_map(|m| t.comms[m.ix()].device).collect();
    let label = |d: DevIdx| {
        t.devices[d.ix()].global_rank.map_or_else(|| format!("dev{}", d.0), |r| format!("r{r}"))
    };
    let mut best: Option<Bottleneck> = None;
    let mut unknown = 0;
    for (i, &a) in devs.iter().enumerate() {
        for &b in &devs[i + 1..] {
            match pair_bandwidth(t, a, b) {
                Some((bw, link)) => {
                    if best.as_ref().is_none_or(|x| bw < x.bw_gb_s) {
                        best = Some(Bottleneck {
                            comm: lc.name.clone(),
                            bw_gb_s: bw,
                            link,
                            between: (label(a), label(b)),
                            unknown_pairs: 0,
                        });
                    }
                }
                None => unknown += 1,
            }
        }
    }
    best.map(|mut b| {
        b.unknown_pairs = unknown;
        b
    })
}

/// Bottlenecks of every logical communicator with at least two members.
pub fn all_bottlenecks(t: &OpTable) -> Vec<(LogicalCommIdx, Option<Bottleneck>)> {
    (0..t.logical.len())
        .map(|i| LogicalCommIdx(i as u32))
        .filter(|&l| t.logical[l.ix()].members.len() > 1)
        .map(|l| (l, bottleneck(t, l)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlens_core::model::{CommMember, Device, ProcIdx, Process};
    use commlens_core::{NodeKind, Topology};

    /// Two hosts; host a has GPUs 0x1000 and 0x2000 joined by NVLink 80.
    fn table() -> OpTable {
        let mut t = OpTable::default();
        let mut topo_a = Topology::new("a");
        let cpu = topo_a.node(NodeKind::Cpu, "0-0");
        let g0 = topo_a.node(NodeKind::Gpu, "0-1000");
        let g1 = topo_a.node(NodeKind::Gpu, "0-2000");
        let nic = topo_a.node(NodeKind::Nic, "0-3000");
        let net = topo_a.node(NodeKind::Net, "0-0");
        topo_a.add_link(cpu, g0, LinkKind::Pci, 24.0);
        topo_a.add_link(cpu, g1, LinkKind::Pci, 24.0);
        topo_a.add_link(g0, g1, LinkKind::Nvl, 80.0);
        topo_a.add_link(cpu, nic, LinkKind::Pci, 24.0);
        topo_a.add_link(nic, net, LinkKind::Net, 12.5);
        let mut topo_b = topo_a.clone();
        topo_b.host = "b".into();
        t.topologies = vec![topo_a, topo_b];
        for (i, (host, bus)) in [("a", 0x1000), ("a", 0x2000), ("b", 0x1000)].iter().enumerate() {
            t.processes.push(Process { host: host.to_string(), pid: i as u32, nccl_version: None });
            t.devices.push(Device {
                proc: ProcIdx(i as u32),
                cuda_dev: Some(0),
                nvml_dev: None,
                bus_id: Some(*bus),
                global_rank: None,
                local_rank: None,
            });
        }
        t
    }

    fn comm(t: &mut OpTable, devs: &[u32], id: u64) {
        for (r, d) in devs.iter().enumerate() {
            let mut c = CommMember::new(ProcIdx(*d), 0x100 + id * 16 + *d as u64);
            c.device = Some(DevIdx(*d));
            c.comm_id = Some(id);
            c.nranks = Some(devs.len() as u32);
            c.rank = Some(r as u32);
            t.comms.push(c);
        }
    }

    #[test]
    fn intra_node_nvlink_and_inter_node_network() {
        let mut t = table();
        comm(&mut t, &[0, 1, 2], 1);
        comm(&mut t, &[0, 1], 2);
        commlens_core::assemble::assemble(&mut t);
        let all = all_bottlenecks(&t);
        assert_eq!(all.len(), 2);
        let world = all.iter().find(|(l, _)| t.logical[l.ix()].members.len() == 3).unwrap();
        let b = world.1.as_ref().unwrap();
        assert_eq!((b.bw_gb_s, b.link), (12.5, LinkKind::Net));
        let pair = all.iter().find(|(l, _)| t.logical[l.ix()].members.len() == 2).unwrap();
        let b = pair.1.as_ref().unwrap();
        assert_eq!((b.bw_gb_s, b.link), (80.0, LinkKind::Nvl));
    }

    /// An NVLink of 20 GB/s one way and 240 the other is a 20 GB/s pair,
    /// whichever member lists it first.
    #[test]
    fn asymmetric_link_counts_its_slower_direction() {
        for flip in [false, true] {
            let mut t = table();
            let topo = &mut t.topologies[0];
            let g0 = topo.node(NodeKind::Gpu, "0-1000");
            let g1 = topo.node(NodeKind::Gpu, "0-2000");
            topo.links.retain(|l| l.kind != LinkKind::Nvl);
            let (fast, slow) = if flip { ((g1, g0), (g0, g1)) } else { ((g0, g1), (g1, g0)) };
            topo.add_link(fast.0, fast.1, LinkKind::Nvl, 240.0);
            topo.add_link(slow.0, slow.1, LinkKind::Nvl, 20.0);
            comm(&mut t, &[0, 1], 4);
            commlens_core::assemble::assemble(&mut t);
            let b = all_bottlenecks(&t)[0].1.clone().unwrap();
            assert_eq!((b.bw_gb_s, b.link), (20.0, LinkKind::Nvl), "flip {flip}");
        }
    }

    /// Across hosts, a GPU whose logged route to the NIC is slower than the
    /// NIC (a SYS hop) limits the pair to that route, not to the NIC's speed.
    #[test]
    fn network_pair_uses_the_logged_gpu_to_nic_path() {
        let mut t = table();
        let topo = &mut t.topologies[0];
        let g1 = topo.node(NodeKind::Gpu, "0-2000");
        let net = topo.node(NodeKind::Net, "0-0");
        topo.paths.push(commlens_core::topo::TopoPath { from: g1, to: net, hops: 3, bw_gb_s: 6.0, kind: LinkKind::Sys });
        comm(&mut t, &[1, 2], 5);
        comm(&mut t, &[0, 2], 6);
        commlens_core::assemble::assemble(&mut t);
        let all = all_bottlenecks(&t);
        let of = |a: u32| {
            all.iter()
                .find(|(l, _)| t.logical[l.ix()].members.iter().any(|m| t.comms[m.ix()].device == Some(DevIdx(a))))
                .and_then(|(_, b)| b.clone())
                .unwrap()
        };
        assert_eq!((of(1).bw_gb_s, of(1).link), (6.0, LinkKind::Net));
        // GPU 0 has no logged path: the NIC's 12.5 GB/s.
        assert_eq!(of(0).bw_gb_s, 12.5);
    }

    #[test]
    fn unknown_without_topology() {
        let mut t = table();
        t.topologies.clear();
        comm(&mut t, &[0, 1], 3);
        commlens_core::assemble::assemble(&mut t);
        assert_eq!(all_bottlenecks(&t)[0].1, None);
    }
}
