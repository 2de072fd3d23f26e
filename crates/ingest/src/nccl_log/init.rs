//! Parsers for communicator-initialization messages: the Init line
//! (`[ncclCommInitRank…] comm 0x… rank r nranks n cudaDev d [nvmlDev d] busId b
//! [commId 0x…] - Init START|COMPLETE`), the rank-layout line (`comm 0x… rank r
//! nRanks n nNodes m localRanks l localRank k MNNVL 0`), the version line, and
//! the ring, tree and connection lines printed while channels are set up.

use crate::bytes::{dec_i64, dec_u64, hex_u64, next_token, pointer, tokens};
use commlens_core::model::{Connection, TreeChannel};
use commlens_core::NcclVersion;

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
    while let Some(key) = it.next() {
        if key == b"-" {
            if it.next() == Some(&b"Init"[..]) {
                line.phase = match it.next() {
                    Some(b"START") => Some(InitPhase::Start),
                    Some(b"COMPLETE") => Some(InitPhase::Complete),
                    _ => None,
                };
            }
            break;
        }
        let Some(val) = it.next() else { break };
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
            _ => {}
        }
    }
    if have_comm && line.rank.is_some() {
        Some(line)
    } else {
        None
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
        let l = parse_comm_line(b"comm 0x55d1b1f2c9a0 rank 3 nranks 8 cudaDev 3 busId 1c000 - Init COMPLETE").unwrap();
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
}
