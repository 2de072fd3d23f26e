//! Communicator lifecycle text: init sequence, rings/trees, connections, destroy.
//!
//! Owns the lines of one member of one communicator: `... - Init START`, the lines printed
//! once all members have bootstrapped (topology dump on the first communicator of the process,
//! graph search `Pattern` block, `comm ... nRanks ... MNNVL 0`, `Tree`/`Channel`/`Ring`/`Trees`
//! lines, channel summary, `... - Init COMPLETE`, `Init timings`), the ring connection lines
//! written at the first collective (runtime connect, NCCL >= 2.22) or during init (older), the
//! point-to-point connection lines written at the first Send/Recv towards a peer, and the
//! `Destroy COMPLETE` line.
//!
//! Ring of channel `c`: comm ranks in order, reversed on odd channels when there are more than
//! two ranks. Trees are chains along the ring order, reversed every `channels / 4` channels.

use crate::config::{LogFormat, NcclVersion};
use crate::layout::{Comm, Layout};
use crate::topo;

/// Ring order (comm ranks) of channel `c`: whether it runs backwards (reversed on odd channels
/// when there are more than two ranks). Orders are computed, never listed, so a member's
/// neighbours cost O(1) in communicators of 100,000 ranks.
fn ring_reversed(comm: &Comm, c: usize) -> bool {
    comm.nranks() > 2 && c % 2 == 1
}

/// Ring order (comm ranks) of channel `c`, listed (rank 0's `Channel` line prints it).
pub(crate) fn ring_order(comm: &Comm, c: usize) -> Vec<usize> {
    let n = comm.nranks();
    let mut o: Vec<usize> = (0..n).collect();
    if ring_reversed(comm, c) {
        o.reverse();
    }
    o
}

/// Whether the tree chain of channel `c` runs backwards (every `channels / 4` channels).
fn tree_reversed(comm: &Comm, c: usize) -> bool {
    let block = (comm.channels / 4).max(1);
    (c / block) % 2 == 1
}

/// Comm rank at position `i` of `0..n`, read backwards when `reversed`.
fn at(n: usize, reversed: bool, i: usize) -> usize {
    if reversed {
        n - 1 - i
    } else {
        i
    }
}

/// Previous and next comm rank of `me` on a ring of `n` ranks.
fn neighbours(n: usize, reversed: bool, me: usize) -> (usize, usize) {
    let i = at(n, reversed, me);
    (at(n, reversed, (i + n - 1) % n), at(n, reversed, (i + 1) % n))
}

/// Parent and child of `me` on a chain of `n` ranks (-1 at the ends).
fn chain_links(n: usize, reversed: bool, me: usize) -> (i64, i64) {
    let i = at(n, reversed, me);
    let parent = if i == 0 { -1 } else { at(n, reversed, i - 1) as i64 };
    let child = if i + 1 < n { at(n, reversed, i + 1) as i64 } else { -1 };
    (parent, child)
}

/// `ncclCommInitRankConfig comm 0x.. rank r nranks n cudaDev d nvmlDev d busId b commId 0x.. - Init <what>`.
pub(crate) fn init_line(
    ver: &NcclVersion,
    layout: &Layout,
    comm: &Comm,
    rank: usize,
    what: &str,
) -> String {
    let cr = comm.crank(rank);
    let p = &layout.procs[rank];
    let api = if ver.init_api_prefix() {
        "ncclCommInitRankConfig "
    } else {
        ""
    };
    format!(
        "{api}comm {:#x} rank {cr} nranks {} cudaDev {d} nvmlDev {d} busId {:x} commId {:#x} - Init {what}",
        comm.ptrs[cr],
        comm.nranks(),
        p.bus_id,
        comm.comm_id,
        d = p.dev,
    )
}

/// Lines of the init thread written when the member calls init (up to `Init START`).
pub(crate) fn init_start_lines(
    ver: &NcclVersion,
    layout: &Layout,
    comm: &Comm,
    rank: usize,
    first: bool,
) -> Vec<String> {
    let mut v = Vec::new();
    if first {
        v.extend(topo::net_plugin_lines(&layout.procs[rank]));
    }
    v.push("Assigned NET plugin IB to comm".to_string());
    v.push("Using network IB".to_string());
    v.push(init_line(ver, layout, comm, rank, "START"));
    v
}

/// Parameters of the post-bootstrap part that the caller (the timing model) decides.
pub(crate) struct InitTiming {
    /// Whole init duration in seconds (for `Init timings`).
    pub total_s: f64,
    /// Bootstrap duration in seconds (for `Bootstrap timings`).
    pub bootstrap_s: f64,
    /// NCCL-rated bandwidth of the communicator's rings on the member's node, GB/s
    /// (`Timing::ring_bw`; PCIe's when the member is alone on its node).
    pub ring_bw: f64,
}

/// Lines of the init thread after all members bootstrapped, up to `Init COMPLETE` and
/// `Init timings`. `dump` is the topology dump to print (first communicator only).
pub(crate) fn init_rest_lines(
    ver: &NcclVersion,
    layout: &Layout,
    comm: &Comm,
    rank: usize,
    dump: Option<Vec<String>>,
    timing: &InitTiming,
) -> Vec<String> {
    let p = &layout.procs[rank];
    let cr = comm.crank(rank);
    let n = comm.nranks();
    let nch = comm.channels;
    let mut v = Vec::new();
    if ver.init_timings() {
        let b = timing.bootstrap_s;
        v.push(format!(
            "Bootstrap timings total {b:.6} (create {:.6}, send {:.6}, recv {:.6}, ring {:.6}, delay 0.000000)",
            b * 0.03,
            b * 0.1,
            b * 0.12,
            b * 0.6
        ));
    }
    if let Some(d) = dump {
        v.extend(d);
    }
    v.push(topo::affinity_line(p));
    if ver.init_timings() {
        v.push(format!(
            "NVLS multicast support is not available on dev {} (NVLS_NCHANNELS 0)",
            p.dev
        ));
    } else {
        v.push(format!(
            "NVLS multicast support is not available on dev {}",
            p.dev
        ));
    }
    // Graph search (ring pattern); the channels are the found rings, duplicated afterwards.
    let local: Vec<usize> = comm.cranks_on(p.node).iter().map(|&cr| comm.members[cr]).collect();
    let found = (nch / 2).max(1);
    // What the timing model rates this communicator's rings on the node (on a mesh, the links
    // to its own GPUs only), so the logged search and the generated durations agree.
    let local_bw = timing.ring_bw;
    let bw = if comm.inter_node() {
        topo::NET_BW.min(local_bw)
    } else {
        local_bw
    } / found as f64;
    let kind = if local.len() > 1 { "NVL" } else { "LOC" };
    let net = if comm.inter_node() { "PHB" } else { "PIX" };
    v.push(format!(
        "Pattern 4, crossNic 0, nChannels {found}, bw {bw:.6}/{bw:.6}, type {kind}/{net}, sameChannels 1"
    ));
    for c in 0..found {
        // The node's members in ring order: the ring runs over comm ranks, forwards or back.
        let mut on_ring = local.clone();
        if ring_reversed(comm, c) {
            on_ring.reverse();
        }
        let order: Vec<String> = on_ring
            .into_iter()
            .map(|g| format!("GPU/0-{:x}", layout.procs[g].bus_id))
            .collect();
        let body = order.join(" ");
        if comm.inter_node() {
            v.push(format!("{c:2} : NET/0-0 {body} NET/0-0"));
        } else {
            v.push(format!("{c:2} : {body}"));
        }
    }
    let local_rank = local.iter().position(|&m| m == rank).unwrap_or(0);
    let mnnvl = if ver.mnnvl_field() { " MNNVL 0" } else { "" };
    v.push(format!(
        "comm {:#x} rank {cr} nRanks {n} nNodes {} localRanks {} localRank {local_rank}{mnnvl}",
        comm.ptrs[cr],
        comm.n_nodes,
        local.len()
    ));
    for c in 0..nch {
        let (parent, child) = chain_links(n, tree_reversed(comm, c), cr);
        v.push(format!("Tree {c} : {parent} -> {cr} -> {child}/-1/-1"));
    }
    if cr == 0 {
        for c in 0..nch {
            let o: Vec<String> = ring_order(comm, c).iter().map(|r| r.to_string()).collect();
            v.push(format!("Channel {c:02}/{nch:02} : {}", o.join(" ")));
        }
    }
    for c in 0..nch {
        let (prev, next) = neighbours(n, ring_reversed(comm, c), cr);
        v.push(format!("Ring {c:02} : {prev} -> {cr} -> {next}"));
    }
    let trees: Vec<String> = (0..nch)
        .map(|c| {
            let (parent, child) = chain_links(n, tree_reversed(comm, c), cr);
            format!("[{c}] {child}/-1/-1->{cr}->{parent}")
        })
        .collect();
    v.push(format!("Trees {}", trees.join(" ")));
    v.push(format!(
        "P2P Chunksize set to {}",
        if comm.inter_node() { 131072 } else { 524288 }
    ));
    v.push("PROFILER/Plugin: Could not find: libnccl-profiler.so. ".to_string());
    v.push("Check P2P Type isAllDirectP2p 0 directMode 0".to_string());
    v.push(format!(
        "threadThresholds 8/8/64 | {}/8/64 | 512 | 512",
        8 * n
    ));
    let (p2p, per_peer) = comm.p2p_channels();
    let collnet = if ver.collnet_count() { nch } else { 0 };
    if ver.collnet_field() {
        v.push(format!(
            "{nch} coll channels, {collnet} collnet channels, 0 nvls channels, {p2p} p2p channels, {per_peer} p2p channels per peer"
        ));
    } else {
        v.push(format!("{nch} coll channels, 0 nvls channels, {p2p} p2p channels, {per_peer} p2p channels per peer"));
    }
    if !ver.runtime_connect() {
        v.extend(ring_connect_lines(ver, layout, comm, rank));
    }
    v.push("CC Off, workFifoBytes 1048576".to_string());
    v.push(
        "TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.".to_string(),
    );
    v.push(init_line(ver, layout, comm, rank, "COMPLETE"));
    if ver.init_timings() {
        let t = timing.total_s;
        let api = if ver.init_api_prefix() {
            "ncclCommInitRankConfig"
        } else {
            "ncclCommInitRank"
        };
        v.push(format!(
            "Init timings - {api}: rank {cr} nranks {n} total {t:.2} (kernels {:.2}, alloc {:.2}, bootstrap {:.2}, allgathers {:.2}, topo {:.2}, graphs 0.00, connections 0.00, rest {:.2})",
            t * 0.55,
            t * 0.12,
            timing.bootstrap_s,
            t * 0.01,
            t * 0.05,
            (t * 0.27 - timing.bootstrap_s).max(0.0)
        ));
    }
    v
}

fn transport(layout: &Layout, a: usize, b: usize) -> bool {
    layout.procs[a].node == layout.procs[b].node
}

/// Ring connection lines of one member, then `Connected all rings`.
pub(crate) fn ring_connect_lines(
    ver: &NcclVersion,
    layout: &Layout,
    comm: &Comm,
    rank: usize,
) -> Vec<String> {
    let cr = comm.crank(rank);
    let mut v = Vec::new();
    if comm.nranks() > 1 {
        for c in 0..comm.channels {
            let (prev, next) = neighbours(comm.nranks(), ring_reversed(comm, c), cr);
            let (gp, gn) = (comm.members[prev], comm.members[next]);
            let (d, dp, dn) = (
                layout.procs[rank].dev,
                layout.procs[gp].dev,
                layout.procs[gn].dev,
            );
            if !transport(layout, rank, gp) {
                v.push(format!(
                    "Channel {c:02}/0 : {prev}[{dp}] -> {cr}[{d}] [receive] via NET/IB/0/GDRDMA"
                ));
            }
            if transport(layout, rank, gn) {
                v.push(format!(
                    "Channel {c:02}/0 : {cr}[{d}] -> {next}[{dn}] via P2P/CUMEM/read"
                ));
            } else {
                v.push(format!(
                    "Channel {c:02}/0 : {cr}[{d}] -> {next}[{dn}] [send] via NET/IB/0/GDRDMA"
                ));
            }
        }
    }
    if ver.ring_pxn_suffix() {
        v.push("Connected all rings, use ring PXN 0 GDR 1".to_string());
    } else {
        v.push("Connected all rings".to_string());
    }
    v
}

/// Connection lines of the first Send (`send = true`) or Recv towards comm rank `peer`.
/// Intra-node P2P prints only on the sending side; the network prints on both.
pub(crate) fn p2p_connect_lines(
    layout: &Layout,
    comm: &Comm,
    rank: usize,
    peer: usize,
    send: bool,
) -> Vec<String> {
    let cr = comm.crank(rank);
    let gpeer = comm.members[peer];
    let (d, pd) = (layout.procs[rank].dev, layout.procs[gpeer].dev);
    let (_, per_peer) = comm.p2p_channels();
    let same_node = transport(layout, rank, gpeer);
    let mut v = Vec::new();
    for c in 0..per_peer.min(4) {
        match (send, same_node) {
            (true, true) => v.push(format!(
                "Channel {c:02}/1 : {cr}[{d}] -> {peer}[{pd}] via P2P/CUMEM/read"
            )),
            (true, false) => v.push(format!(
                "Channel {c:02}/1 : {cr}[{d}] -> {peer}[{pd}] [send] via NET/IB/0/GDRDMA/Shared"
            )),
            (false, false) => v.push(format!(
                "Channel {c:02}/1 : {peer}[{pd}] -> {cr}[{d}] [receive] via NET/IB/0/GDRDMA/Shared"
            )),
            (false, true) => {}
        }
    }
    v
}

/// `comm 0x.. rank r nranks n cudaDev d busId b - Destroy COMPLETE`.
pub(crate) fn destroy_line(layout: &Layout, comm: &Comm, rank: usize) -> String {
    let cr = comm.crank(rank);
    let p = &layout.procs[rank];
    format!(
        "comm {:#x} rank {cr} nranks {} cudaDev {} busId {:x} - Destroy COMPLETE",
        comm.ptrs[cr],
        comm.nranks(),
        p.dev,
        p.bus_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;
    use crate::rng::SplitMix64;

    #[test]
    fn two_rank_lines() {
        let cfg = RunConfig::default();
        let ver = cfg.validate().unwrap();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(3));
        let tp0 = &layout.comms[1];
        // A 2-GPU communicator on a 4-GPU A100 mesh: one pair's 4 links at NCCL's 20 GB/s.
        let t = InitTiming {
            total_s: 0.5,
            bootstrap_s: 0.002,
            ring_bw: crate::timing::Timing::new(&cfg, ver).ring_bw(2),
        };
        assert_eq!(t.ring_bw, 80.0);
        let r0 = init_rest_lines(&ver, &layout, tp0, 0, None, &t);
        assert!(r0.contains(&"Channel 00/08 : 0 1".to_string()));
        assert!(r0.iter().any(|l| l.starts_with("Pattern 4, crossNic 0, nChannels 4, bw 20.000000/20.000000, type NVL/PIX")), "{r0:?}");
        assert!(r0.contains(&"Ring 00 : 1 -> 0 -> 1".to_string()));
        assert!(r0.iter().any(
            |l| l.starts_with("Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1 [2] -1/-1/-1->0->1")
        ));
        assert!(r0.contains(&"8 coll channels, 8 collnet channels, 0 nvls channels, 8 p2p channels, 8 p2p channels per peer".to_string()));
        assert!(r0.iter().any(|l| l.ends_with("- Init COMPLETE")));
        let r1 = init_rest_lines(&ver, &layout, tp0, 1, None, &t);
        assert!(!r1.iter().any(|l| l.starts_with("Channel ")));
        let c = ring_connect_lines(&ver, &layout, tp0, 1);
        assert_eq!(c[0], "Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read");
        assert_eq!(
            c.last().unwrap(),
            "Connected all rings, use ring PXN 0 GDR 1"
        );
    }

    #[test]
    fn inter_node_connections() {
        let cfg = RunConfig {
            gpus_per_node: 2,
            ..RunConfig::default()
        };
        let ver = cfg.validate().unwrap();
        let layout = Layout::build(&cfg, &mut SplitMix64::new(3));
        let pp0 = layout.comms.iter().find(|c| c.name == "PP0").unwrap();
        assert_eq!(pp0.n_nodes, 2);
        let c = ring_connect_lines(&ver, &layout, pp0, 2);
        assert!(c[0].contains("[receive] via NET/IB/0/GDRDMA"));
        let s = p2p_connect_lines(&layout, pp0, 0, 1, true);
        assert!(s[0].starts_with("Channel 00/1 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"));
    }
}
