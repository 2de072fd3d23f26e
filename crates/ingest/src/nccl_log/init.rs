//! Parsers for communicator-initialization messages: the Init line
//! (`[ncclCommInitRank…] comm 0x… rank r nranks n cudaDev d [nvmlDev d] busId b
//! [commId 0x…] - Init START|COMPLETE`), the rank-layout line (`comm 0x… rank r
//! nRanks n nNodes m localRanks l localRank k MNNVL 0`), the version line, and
//! the ring, tree and connection lines printed while channels are set up, and
//! what init prints about tuning (search graphs, `threadThresholds`, the
//! latency/bandwidth table; see [`parse_tuning_init_line`]).

use crate::bytes::{dec_i64, dec_u64, hex_u64, next_token, pointer, tokens, trim_ascii};
use commlens_core::model::{Connection, SplitOrigin, TreeChannel};
use commlens_core::topo::LinkKind;
use commlens_core::tuning::SearchGraph;
use commlens_core::{Algorithm, NcclVersion, OpKind, Protocol};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitPhase {
    Start,
    Complete,
}

/// Fields of an Init or rank-layout line; absent fields stay `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommLine {
    pub comm: u64,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    pub cuda_dev: Option<u32>,
    pub nvml_dev: Option<u32>,
    pub bus_id: Option<u64>,
    pub comm_id: Option<u64>,
    pub n_nodes: Option<u32>,
    pub local_ranks: Option<u32>,
    pub local_rank: Option<u32>,
    pub phase: Option<InitPhase>,
    /// `parent 0x… splitCount n color c` of an `ncclCommSplit` Init line.
    pub split: Option<SplitOrigin>,
}

/// Parses an Init or layout line. The message may start with the API name
/// (`ncclCommInitRankConfig comm 0x…`). A cut line yields the fields before the cut.
pub fn parse_comm_line(msg: &[u8]) -> Option<CommLine> {
    let start = if msg.starts_with(b"comm 0x") {
        0
    } else if msg.starts_with(b"nccl") {
        let (api, rest) = next_token(msg);
        if !api.starts_with(b"ncclComm") || !rest.starts_with(b"comm 0x") {
            return None;
        }
        msg.len() - rest.len()
    } else {
        return None;
    };
    let mut it = tokens(&msg[start..]);
    let mut line = CommLine::default();
    let mut have_comm = false;
    let u32v = |v: &[u8]| dec_u64(v).and_then(|x| u32::try_from(x).ok());
    let (mut parent, mut split_count, mut color) = (None, None, None);
    while let Some(key) = it.next() {
        if key == b"-" {
            line.phase = init_phase(&mut it);
            break;
        }
        let Some(mut val) = it.next() else { break };
        // NCCL 2.28's split START line glues the dash to the last value:
        // `… color 1121016176 key 1- Init START`.
        let glued = val.len() > 1 && val.ends_with(b"-");
        if glued {
            val = &val[..val.len() - 1];
        }
        match key {
            b"comm" => {
                line.comm = pointer(val)?;
                have_comm = true;
            }
            b"rank" => line.rank = u32v(val),
            b"nranks" | b"nRanks" => line.nranks = u32v(val),
            b"cudaDev" => line.cuda_dev = u32v(val),
            b"nvmlDev" => line.nvml_dev = u32v(val),
            b"busId" => line.bus_id = hex_u64(val),
            b"commId" => line.comm_id = hex_u64(val),
            b"nNodes" => line.n_nodes = u32v(val),
            b"localRanks" => line.local_ranks = u32v(val),
            b"localRank" => line.local_rank = u32v(val),
            b"parent" => parent = pointer(val),
            b"splitCount" => split_count = u32v(val),
            b"color" => color = dec_i64(val),
            _ => {}
        }
        if glued {
            line.phase = init_phase(&mut it);
            break;
        }
    }
    if let (Some(parent), Some(split_count), Some(color)) = (parent, split_count, color) {
        line.split = Some(SplitOrigin { parent, split_count, color });
    }
    if have_comm && line.rank.is_some() {
        Some(line)
    } else {
        None
    }
}

/// `Init START|COMPLETE` after the dash of an Init line.
fn init_phase<'a>(it: &mut impl Iterator<Item = &'a [u8]>) -> Option<InitPhase> {
    if it.next() != Some(&b"Init"[..]) {
        return None;
    }
    match it.next() {
        Some(b"START") => Some(InitPhase::Start),
        Some(b"COMPLETE") => Some(InitPhase::Complete),
        _ => None,
    }
}

/// `NCCL version 2.27.7+cuda13.0` (with or without a prefix before it).
pub fn parse_version(msg: &[u8]) -> Option<NcclVersion> {
    let rest = msg.strip_prefix(b"NCCL version ")?;
    NcclVersion::parse(rest)
}

/// Lines printed while channels are built, once per communicator.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelLine {
    /// `Channel 00/24 : 0 1`: ring order of one channel.
    RingOrder { channel: u32, ranks: Vec<u32> },
    /// `Channel 00/0 : 1[1] -> 0[0] via P2P/IPC`.
    Connection(Connection),
    /// `Trees [0] 1/-1/-1->0->-1 [1] …` or `Tree 0 : -1 -> 0 -> 1/-1/-1`.
    Trees(Vec<TreeChannel>),
    /// `Ring 00 : 14 -> 15 -> 0`: neighbours only, nothing to keep.
    RingNeighbors,
}

pub fn parse_channel_line(msg: &[u8]) -> Option<ChannelLine> {
    if let Some(rest) = msg.strip_prefix(b"Channel ") {
        let colon = memchr::memmem::find(rest, b" : ")?;
        let head = &rest[..colon];
        let body = &rest[colon + 3..];
        let ch_text = head.split(|&b| b == b'/').next()?;
        let channel = dec_u64(ch_text).and_then(|v| u32::try_from(v).ok())?;
        if let Some(via) = memchr::memmem::find(body, b" via ") {
            let transport = String::from_utf8_lossy(crate::bytes::trim_ascii(&body[via + 5..])).into_owned();
            let mut toks = tokens(&body[..via]);
            let from = rank_of(toks.next()?)?;
            if toks.next()? != b"->" {
                return None;
            }
            let to = rank_of(toks.next()?)?;
            return Some(ChannelLine::Connection(Connection { channel, from_rank: from, to_rank: to, transport }));
        }
        let mut ranks = Vec::new();
        for t in tokens(body) {
            ranks.push(dec_u64(t).and_then(|v| u32::try_from(v).ok())?);
        }
        if ranks.is_empty() {
            return None;
        }
        return Some(ChannelLine::RingOrder { channel, ranks });
    }
    if let Some(rest) = msg.strip_prefix(b"Trees ") {
        let mut out = Vec::new();
        let mut toks = tokens(rest);
        while let Some(t) = toks.next() {
            let ch = t.strip_prefix(b"[")?.strip_suffix(b"]")?;
            let channel = dec_u64(ch).and_then(|v| u32::try_from(v).ok())?;
            let spec = toks.next()?;
            // children->rank->parent
            let mut parts = spec.split(|&b| b == b'>');
            let children = parts.next()?.strip_suffix(b"-")?;
            let _rank = parts.next()?;
            let parent = dec_i64(parts.next()?)? as i32;
            let children = children
                .split(|&b| b == b'/')
                .map(|c| dec_i64(c).map(|v| v as i32))
                .collect::<Option<Vec<i32>>>()?;
            out.push(TreeChannel { channel, children, parent });
        }
        return if out.is_empty() { None } else { Some(ChannelLine::Trees(out)) };
    }
    if let Some(rest) = msg.strip_prefix(b"Tree ") {
        // `Tree 0 : -1 -> 0 -> 1/-1/-1`: parent -> rank -> children.
        let mut toks = tokens(rest);
        let channel = dec_u64(toks.next()?).and_then(|v| u32::try_from(v).ok())?;
        if toks.next()? != b":" {
            return None;
        }
        let parent = dec_i64(toks.next()?)? as i32;
        let (_, _, _, kids) = (toks.next()?, toks.next()?, toks.next()?, toks.next()?);
        let children = kids
            .split(|&b| b == b'/')
            .map(|c| dec_i64(c).map(|v| v as i32))
            .collect::<Option<Vec<i32>>>()?;
        return Some(ChannelLine::Trees(vec![TreeChannel { channel, children, parent }]));
    }
    if let Some(rest) = msg.strip_prefix(b"Ring ") {
        if memchr::memmem::find(rest, b" -> ").is_some() {
            return Some(ChannelLine::RingNeighbors);
        }
    }
    None
}

/// `1[a1090]` or `1[1]` → 1.
fn rank_of(t: &[u8]) -> Option<u32> {
    let end = memchr::memchr(b'[', t).unwrap_or(t.len());
    dec_u64(&t[..end]).and_then(|v| u32::try_from(v).ok())
}

/// A line NCCL prints about tuning while a communicator initialises.
#[derive(Debug, Clone, PartialEq)]
pub enum TuningInitLine {
    /// `Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type
    /// NVL/PIX, sameChannels 1` (`line` is 0: the caller knows it).
    Graph(SearchGraph),
    /// `threadThresholds 8/8/64 | 32/8/64 | 512 | 512`: every number in order.
    ThreadThresholds(Vec<u64>),
    /// `  Algorithm   |   Tree   |   Ring   |   CollNetDirect   |`: the
    /// algorithms of the table block that follows (NCCL ≥ 2.12).
    Algorithms(Vec<Algorithm>),
    /// `  Protocol    |   LL |  LL128 | Simple | LL | …` (repeated for three
    /// algorithms even when the block has fewer).
    Protocols(Vec<Protocol>),
    /// `Latency/AlgBw |    Tree/    LL |    Tree/ LL128 | …` (NCCL ≤ 2.11): the
    /// columns of the whole one-line table.
    Columns(Vec<(Algorithm, Protocol)>),
    /// ` Max NThreads |  512 |  640 | …`, one value per column.
    MaxThreads(Vec<u32>),
    /// `    AllReduce |  18.8/ 0.6 | …`: (latency µs, bandwidth GB/s) per column.
    Row { kind: OpKind, cells: Vec<(f64, f64)> },
}

/// Report kinds of malformed tuning-init lines.
pub const MALFORMED_PATTERN: &str = "Pattern";
pub const MALFORMED_THRESHOLDS: &str = "threadThresholds";
pub const MALFORMED_TABLE: &str = "tuning table";

/// Column of the `|` that ends the label of a tuning-table line: labels are
/// printed `%13s |` (` Max NThreads |`, `ReduceScatter |`, `Latency/AlgBw |`).
const TABLE_BAR: usize = 14;

/// A search-graph, `threadThresholds` or tuning-table line: `None` when `msg`
/// is none of them (a byte test, cheap for the lines that are not), else the
/// parsed line or the report kind of a malformed one (cut, garbled, or
/// unknown names inside a known label).
#[inline]
pub fn parse_tuning_init_line(msg: &[u8]) -> Option<Result<TuningInitLine, &'static str>> {
    match msg.first()? {
        b'P' if msg.starts_with(b"Pattern ") => Some(parse_graph(msg).map(TuningInitLine::Graph).ok_or(MALFORMED_PATTERN)),
        b't' if msg.starts_with(b"threadThresholds ") => Some(parse_thresholds(msg).map(TuningInitLine::ThreadThresholds).ok_or(MALFORMED_THRESHOLDS)),
        _ if msg.get(TABLE_BAR) == Some(&b'|') => parse_table_line(msg),
        _ => None,
    }
}

/// `Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX,
/// sameChannels 1`. Older forms: `speed` for `bw` (2.7–2.11, integers before
/// 2.7), numeric `type 2/2` or a single `type 2` (kept as `LinkKind::Other`),
/// `nvlink 1` (ignored), no `sameChannels` (false), nothing after `nChannels`
/// (2.4: bandwidths 0). A field cut short or garbled makes the line malformed.
fn parse_graph(msg: &[u8]) -> Option<SearchGraph> {
    let mut g = SearchGraph {
        pattern: 0,
        cross_nic: 0,
        n_channels: 0,
        bw_intra: 0.0,
        bw_inter: 0.0,
        type_intra: LinkKind::Other,
        type_inter: LinkKind::Other,
        same_channels: false,
        line: 0,
    };
    let (mut have_pattern, mut have_channels) = (false, false);
    for field in trim_ascii(msg).split(|&b| b == b',') {
        let mut it = tokens(field);
        let (key, val) = (it.next()?, it.next()?);
        if it.next().is_some() {
            return None;
        }
        match key {
            b"Pattern" => {
                g.pattern = u8::try_from(dec_u64(val)?).ok()?;
                have_pattern = true;
            }
            b"crossNic" => g.cross_nic = u8::try_from(dec_u64(val)?).ok()?,
            b"nChannels" => {
                g.n_channels = u32::try_from(dec_u64(val)?).ok()?;
                have_channels = true;
            }
            b"bw" | b"speed" => {
                let (a, b) = split_pair(val, b'/')?;
                (g.bw_intra, g.bw_inter) = (number(a)?, number(b)?);
            }
            b"type" => {
                let (a, b) = split_pair(val, b'/').unwrap_or((val, val));
                (g.type_intra, g.type_inter) = (LinkKind::from_name(a), LinkKind::from_name(b));
            }
            b"sameChannels" => g.same_channels = dec_u64(val)? != 0,
            b"nvlink" => {
                dec_u64(val)?;
            }
            _ => return None,
        }
    }
    (have_pattern && have_channels).then_some(g)
}

/// `threadThresholds 8/8/64 | 32/8/64 | 512 | 512` → `[8, 8, 64, 32, 8, 64, 512, 512]`.
fn parse_thresholds(msg: &[u8]) -> Option<Vec<u64>> {
    let rest = msg.strip_prefix(b"threadThresholds ")?;
    let mut out = Vec::new();
    for group in rest.split(|&b| b == b'|') {
        for n in trim_ascii(group).split(|&b| b == b'/') {
            out.push(dec_u64(trim_ascii(n))?);
        }
    }
    Some(out)
}

/// A line of the tuning table (`TABLE_BAR` holds a `|`). `None` when the label
/// is not one the table prints.
fn parse_table_line(msg: &[u8]) -> Option<Result<TuningInitLine, &'static str>> {
    let label = trim_ascii(&msg[..TABLE_BAR]);
    let body = &msg[TABLE_BAR + 1..];
    let line = match label {
        b"Algorithm" => cells(body, algorithm).map(TuningInitLine::Algorithms),
        b"Protocol" => cells(body, Protocol::from_name).map(TuningInitLine::Protocols),
        b"Max NThreads" => cells(body, |c| u32::try_from(dec_u64(c)?).ok()).map(TuningInitLine::MaxThreads),
        b"Latency/AlgBw" => cells(body, |c| {
            let (a, p) = split_pair(c, b'/')?;
            Some((algorithm(trim_ascii(a))?, Protocol::from_name(trim_ascii(p))?))
        })
        .map(TuningInitLine::Columns),
        _ => {
            let kind = OpKind::from_name(label)?;
            cells(body, |c| {
                let (lat, bw) = split_pair(c, b'/')?;
                Some((number(trim_ascii(lat))?, number(trim_ascii(bw))?))
            })
            .map(|cells| TuningInitLine::Row { kind, cells })
        }
    };
    Some(line.ok_or(MALFORMED_TABLE))
}

/// The `|`-terminated cells of a table line, each parsed by `f`; `None` when
/// the line does not end with `|` (cut) or a cell does not parse.
fn cells<T>(body: &[u8], f: impl Fn(&[u8]) -> Option<T>) -> Option<Vec<T>> {
    let body = trim_ascii(body).strip_suffix(b"|")?;
    let mut out = Vec::new();
    for c in body.split(|&b| b == b'|') {
        out.push(f(trim_ascii(c))?);
    }
    (!out.is_empty()).then_some(out)
}

/// An algorithm name of the table; `CollNet` (NCCL 2.6–2.11) was the direct kind.
fn algorithm(name: &[u8]) -> Option<Algorithm> {
    if name == b"CollNet" {
        return Some(Algorithm::CollNetDirect);
    }
    Algorithm::from_name(name)
}

fn split_pair(s: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let i = memchr::memchr(sep, s)?;
    Some((&s[..i], &s[i + 1..]))
}

/// A printed float (`20.000000`, `0.6`, `12`), or `inf`/`nan` as printf writes them.
fn number(s: &[u8]) -> Option<f64> {
    crate::bytes::float(s).or_else(|| {
        let t = s.strip_prefix(b"-").unwrap_or(s);
        if t.eq_ignore_ascii_case(b"nan") {
            Some(f64::NAN)
        } else if t.eq_ignore_ascii_case(b"inf") {
            Some(if t.len() < s.len() { f64::NEG_INFINITY } else { f64::INFINITY })
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_lines_across_versions() {
        let l = parse_comm_line(b"comm 0x5a502c0 rank 0 nranks 2 cudaDev 0 busId 81000 commId 0x6b3a635efdd98e3f - Init COMPLETE").unwrap();
        assert_eq!((l.comm, l.rank, l.nranks, l.cuda_dev), (0x5a502c0, Some(0), Some(2), Some(0)));
        assert_eq!((l.bus_id, l.comm_id, l.phase), (Some(0x81000), Some(0x6b3a635efdd98e3f), Some(InitPhase::Complete)));
        let l = parse_comm_line(b"ncclCommInitRankConfig comm 0x55b6aa64a990 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 17000 commId 0x54fe282d32a87d85 - Init START").unwrap();
        assert_eq!((l.nvml_dev, l.phase), (Some(0), Some(InitPhase::Start)));
        let l = parse_comm_line(b"ncclCommInitAll comm 0x5a92f7200dd0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 8000 commId 0x5a07cf57dd8b27fc - Init COMPLETE").unwrap();
        assert_eq!(l.nranks, Some(1));
        // NCCL 2.28.9's ncclCommSplit lines (torch new_group), START with the dash glued on.
        let l = parse_comm_line(b"ncclCommSplit comm 0x28c95760 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 60 parent 0x212dff10 splitCount 2 color 1121016176 key 1- Init START").unwrap();
        assert_eq!((l.comm, l.rank, l.nranks, l.comm_id, l.phase), (0x28c95760, Some(1), Some(2), None, Some(InitPhase::Start)));
        assert_eq!(l.split, Some(SplitOrigin { parent: 0x212dff10, split_count: 2, color: 1121016176 }));
        let l = parse_comm_line(b"ncclCommSplit comm 0x28c95760 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 60 parent 0x212dff10 splitCount 2 color 1121016176 key 1 - Init COMPLETE").unwrap();
        assert_eq!((l.phase, l.split.map(|s| s.split_count)), (Some(InitPhase::Complete), Some(2)));
        let l = parse_comm_line(b"comm 0x55d1b1f2c9a0 rank 3 nranks 8 cudaDev 3 busId 1c000 - Init COMPLETE").unwrap();
        assert_eq!(l.split, None);
        assert_eq!((l.rank, l.comm_id), (Some(3), None));
    }

    #[test]
    fn layout_line_and_cut_lines() {
        let l = parse_comm_line(b"comm 0x55b6aa64a990 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0").unwrap();
        assert_eq!((l.nranks, l.n_nodes, l.local_ranks, l.local_rank, l.phase), (Some(2), Some(1), Some(2), Some(1), None));
        let l = parse_comm_line(b"comm 0x558e72d8e6a0 rank 1 nRanks 4 nNodes").unwrap();
        assert_eq!((l.rank, l.nranks, l.n_nodes), (Some(1), Some(4), None));
        assert!(parse_comm_line(b"comm 0x9497920 rank").is_none());
        assert!(parse_comm_line(b"comm 12 rank 1").is_none());
        assert!(parse_comm_line(b"ncclCommInitRank: rank 1 nranks 4 total 0.31").is_none());
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version(b"NCCL version 2.28.9+cuda12.4"), Some(NcclVersion::new(2, 28, 9)));
        assert_eq!(parse_version(b"NCCL version 2.26.6+cudaCUDA_MAJOR.CUDA_MINOR"), Some(NcclVersion::new(2, 26, 6)));
        assert_eq!(parse_version(b"NCCL version"), None);
    }

    #[test]
    fn channel_lines() {
        assert_eq!(
            parse_channel_line(b"Channel 01/04 :    0   1"),
            Some(ChannelLine::RingOrder { channel: 1, ranks: vec![0, 1] })
        );
        match parse_channel_line(b"Channel 00/0 : 5[1] -> 1[1] [receive] via NET/AWS Libfabric/3/GDRDMA").unwrap() {
            ChannelLine::Connection(c) => {
                assert_eq!((c.channel, c.from_rank, c.to_rank), (0, 5, 1));
                assert_eq!(c.transport, "NET/AWS Libfabric/3/GDRDMA");
            }
            other => panic!("{other:?}"),
        }
        match parse_channel_line(b"Channel 00 : 2[3] -> 0[1] via SHM/direct/direct").unwrap() {
            ChannelLine::Connection(c) => assert_eq!(c.transport, "SHM/direct/direct"),
            other => panic!("{other:?}"),
        }
        match parse_channel_line(b"Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1").unwrap() {
            ChannelLine::Trees(t) => {
                assert_eq!(t.len(), 2);
                assert_eq!(t[0].children, vec![1, -1, -1]);
                assert_eq!(t[1].parent, 1);
            }
            other => panic!("{other:?}"),
        }
        match parse_channel_line(b"Tree 1 : 1 -> 0 -> -1/-1/-1").unwrap() {
            ChannelLine::Trees(t) => assert_eq!((t[0].channel, t[0].parent), (1, 1)),
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_channel_line(b"Ring 00 : 14 -> 15 -> 0"), Some(ChannelLine::RingNeighbors));
        assert_eq!(parse_channel_line(b"Channel 00/24 : 0 x"), None);
        assert_eq!(parse_channel_line(b"Trees [0] garbage"), None);
    }

    fn tuning(msg: &[u8]) -> TuningInitLine {
        match parse_tuning_init_line(msg) {
            Some(Ok(t)) => t,
            other => panic!("{}: {other:?}", String::from_utf8_lossy(msg)),
        }
    }

    fn malformed(msg: &[u8]) -> &'static str {
        match parse_tuning_init_line(msg) {
            Some(Err(kind)) => kind,
            other => panic!("{}: {other:?}", String::from_utf8_lossy(msg)),
        }
    }

    #[test]
    fn search_graph_lines_across_versions() {
        let TuningInitLine::Graph(g) =
            tuning(b"Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1")
        else {
            panic!()
        };
        assert_eq!((g.pattern, g.cross_nic, g.n_channels, g.bw_intra, g.bw_inter), (4, 0, 12, 20.0, 20.0));
        assert_eq!((g.type_intra, g.type_inter, g.same_channels, g.line), (LinkKind::Nvl, LinkKind::Pix, true, 0));
        assert_eq!(g.algorithm(), Some(Algorithm::Ring));
        let TuningInitLine::Graph(g) =
            tuning(b"Pattern 1, crossNic 0, nChannels 2, bw 4.000000/3.000000, type SYS/SYS, sameChannels 0")
        else {
            panic!()
        };
        assert_eq!((g.bw_intra, g.bw_inter, g.type_intra, g.same_channels), (4.0, 3.0, LinkKind::Sys, false));
        // 2.7-2.11: `speed`.
        let TuningInitLine::Graph(g) =
            tuning(b"Pattern 3, crossNic 1, nChannels 2, speed 22.000000/22.000000, type PHB/PIX, sameChannels 0")
        else {
            panic!()
        };
        assert_eq!((g.pattern, g.cross_nic, g.bw_intra, g.type_intra, g.type_inter), (3, 1, 22.0, LinkKind::Phb, LinkKind::Pix));
        // 2.5/2.6: integer speeds, numeric types, `nvlink`; without sameChannels it defaults to false.
        let TuningInitLine::Graph(g) = tuning(b"Pattern 4, crossNic 0, nChannels 1, speed 12/12, nvlink 1, type 2") else {
            panic!()
        };
        assert_eq!((g.bw_intra, g.type_intra, g.type_inter, g.same_channels), (12.0, LinkKind::Other, LinkKind::Other, false));
        // 2.4: nothing after nChannels.
        let TuningInitLine::Graph(g) = tuning(b"Pattern 2, crossNic 0, nChannels 4") else { panic!() };
        assert_eq!((g.pattern, g.n_channels, g.bw_intra), (2, 4, 0.0));
        // Cut or garbled.
        for bad in [
            &b"Pattern 4, crossNic 0"[..],
            b"Pattern 4, crossNic 0, nChannels 12, bw 20.000000",
            b"Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.0000x0, type NVL/PIX, sameChannels 1",
            b"Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameCh",
            b"Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1 extra",
            b"Pattern x, crossNic 0, nChannels 12",
            b"Pattern 4, crossNic 0,, nChannels 12",
            b"Pattern 400, crossNic 0, nChannels 12",
            b"Pattern 4, colour 0, nChannels 12",
        ] {
            assert_eq!(malformed(bad), MALFORMED_PATTERN, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_tuning_init_line(b"Patterns are nice"), None);
        assert_eq!(parse_tuning_init_line(b"P"), None);
        assert_eq!(parse_tuning_init_line(b""), None);
    }

    #[test]
    fn thread_threshold_lines() {
        assert_eq!(
            tuning(b"threadThresholds 8/8/64 | 32/8/64 | 512 | 512"),
            TuningInitLine::ThreadThresholds(vec![8, 8, 64, 32, 8, 64, 512, 512])
        );
        assert_eq!(tuning(b"threadThresholds 8/8/64 | 64/8/64 | 8/8/512"), TuningInitLine::ThreadThresholds(vec![8, 8, 64, 64, 8, 64, 8, 8, 512]));
        for bad in [&b"threadThresholds 8/8/64 | 32/8/"[..], b"threadThresholds ", b"threadThresholds 8/8/64 | 32/x/64 | 512 | 512"] {
            assert_eq!(malformed(bad), MALFORMED_THRESHOLDS, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_tuning_init_line(b"threadThresholdsX 1"), None);
    }

    #[test]
    fn tuning_table_block_lines() {
        use Algorithm as A;
        use Protocol as P;
        // NCCL 2.27.7, lines 477-484 of the timez log and 494-496 (PAT alone).
        assert_eq!(
            tuning(b"  Algorithm   |                            Tree                  |                            Ring                  |                   CollNetDirect                  |"),
            TuningInitLine::Algorithms(vec![A::Tree, A::Ring, A::CollNetDirect])
        );
        assert_eq!(
            tuning(b"  Algorithm   |                    CollNetChain                  |                            NVLS                  |                        NVLSTree                  |"),
            TuningInitLine::Algorithms(vec![A::CollNetChain, A::Nvls, A::NvlsTree])
        );
        assert_eq!(tuning(b"  Algorithm   |                             PAT                  |"), TuningInitLine::Algorithms(vec![A::Pat]));
        assert_eq!(
            tuning(b"  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |"),
            TuningInitLine::Protocols(vec![P::Ll, P::Ll128, P::Simple, P::Ll, P::Ll128, P::Simple])
        );
        assert_eq!(
            tuning(b" Max NThreads |            512 |            640 |            512 |              0 |"),
            TuningInitLine::MaxThreads(vec![512, 640, 512, 0])
        );
        assert_eq!(
            tuning(b"    AllReduce |     8.0/  37.9 |    16.5/ 112.0 |    16.4/ 144.0 |"),
            TuningInitLine::Row { kind: OpKind::AllReduce, cells: vec![(8.0, 37.9), (16.5, 112.0), (16.4, 144.0)] }
        );
        assert_eq!(
            tuning(b"ReduceScatter |     0.0/   0.0 |"),
            TuningInitLine::Row { kind: OpKind::ReduceScatter, cells: vec![(0.0, 0.0)] }
        );
        assert_eq!(tuning(b"    Broadcast |     1.0/   inf |"), TuningInitLine::Row { kind: OpKind::Broadcast, cells: vec![(1.0, f64::INFINITY)] });
    }

    #[test]
    fn tuning_table_old_one_line_form() {
        use Algorithm as A;
        use Protocol as P;
        // NCCL 2.5-2.11: ` %7s/%6s |` headers; `CollNet` is the direct kind.
        assert_eq!(
            tuning(b"Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |    Tree/Simple |    Ring/    LL |    Ring/ LL128 |    Ring/Simple | CollNet/    LL | CollNet/ LL128 | CollNet/Simple |"),
            TuningInitLine::Columns(vec![
                (A::Tree, P::Ll), (A::Tree, P::Ll128), (A::Tree, P::Simple),
                (A::Ring, P::Ll), (A::Ring, P::Ll128), (A::Ring, P::Simple),
                (A::CollNetDirect, P::Ll), (A::CollNetDirect, P::Ll128), (A::CollNetDirect, P::Simple),
            ])
        );
        // NCCL 2.4: ` %4s/%6s |` headers and `%7.1f/%5.1f|` cells.
        assert_eq!(
            tuning(b"Latency/AlgBw | Tree/    LL | Tree/ LL128 | Tree/Simple | Ring/    LL | Ring/ LL128 | Ring/Simple |"),
            TuningInitLine::Columns(vec![
                (A::Tree, P::Ll), (A::Tree, P::Ll128), (A::Tree, P::Simple),
                (A::Ring, P::Ll), (A::Ring, P::Ll128), (A::Ring, P::Simple),
            ])
        );
        assert_eq!(
            tuning(b"    AllGather |    4.4/  2.9|   11.0/ 10.1|"),
            TuningInitLine::Row { kind: OpKind::AllGather, cells: vec![(4.4, 2.9), (11.0, 10.1)] }
        );
    }

    #[test]
    fn tuning_table_cut_and_garbled_lines() {
        for bad in [
            // cut: no closing bar
            &b"    AllReduce |     8.0/  37.9 |    16.5/ 11"[..],
            b"    AllReduce |     8.0/  37.9 |    16.5/ |",
            b"    AllReduce |     8.0/  3x.9 |",
            b"    AllReduce |     8.0   37.9 |",
            b"    AllReduce |",
            b"  Algorithm   |        Tree        |        Rung        |",
            b"  Algorithm   |        Tree        |        Ri",
            b"  Protocol    |             LL |          LL129 |",
            b" Max NThreads |            512 |            -1 |",
            b"Latency/AlgBw |    Tree/    LL |    Tree LL128 |",
        ] {
            assert_eq!(malformed(bad), MALFORMED_TABLE, "{}", String::from_utf8_lossy(bad));
        }
        // A bar at column 14 under a label the table never prints is not a table line.
        assert_eq!(parse_tuning_init_line(b"  something   | else |"), None);
        assert_eq!(parse_tuning_init_line(b"    AllReduce : opCount 0"), None);
        assert_eq!(parse_tuning_init_line(b"    AllReduce |"[..14].as_ref()), None);
    }
}
