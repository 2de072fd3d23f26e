//! Decoding of one commlens plugin file (`crates/plugin/FORMAT.md`): the header
//! line, the `CHNK` chunks and their records (strings, threads, communicators,
//! START/STOP/STATE, drops, END), the type-specific START fields, and the
//! linking of stops and states to their events, into a [`PluginTrace`] with its
//! [`PluginReport`](crate::plugin_out::PluginReport) counts. Format errors name the
//! file and line 1 or the byte offset. Re-exported as `plugin_out::decode`.

use crate::error::IngestError;
use crate::plugin_out::{
    Fields, PluginComm, PluginEvent, PluginHeader, PluginState, PluginTrace, EVENT_NAMES, FLAG_CTX_FOREIGN,
    FLAG_PARENT_FOREIGN, FORMAT_MAJOR, MAGIC,
};
use std::collections::HashMap;
use std::path::Path;

const KERNEL_CH_STOP: i32 = 22;

/// A format error on the header line (`line` 1) or at a byte offset.
fn bad(path: &Path, line: Option<u64>, at: Option<usize>, msg: String) -> IngestError {
    let what = match at {
        Some(off) => format!("byte offset {off}: {msg}"),
        None => msg,
    };
    IngestError::Format { path: path.to_path_buf(), line, what }
}

/// Little-endian cursor over one record; `None` past its end.
struct Cur<'a>(&'a [u8]);
macro_rules! getters {
    ($($name:ident: $t:ty),*) => {$(
        fn $name(&mut self) -> Option<$t> {
            let (a, rest) = self.0.split_first_chunk()?;
            self.0 = rest;
            Some(<$t>::from_le_bytes(*a))
        }
    )*};
}
impl Cur<'_> {
    getters!(u8: u8, u32: u32, i32: i32, u64: u64, i64: i64);
    fn b(&mut self) -> Option<bool> {
        self.u8().map(|v| v != 0)
    }
}

fn parse_header(path: &Path, bytes: &[u8]) -> Result<(PluginHeader, usize), IngestError> {
    let end = bytes.iter().take(8192).position(|&b| b == b'\n');
    let line = String::from_utf8_lossy(&bytes[..end.unwrap_or(bytes.len().min(80))]).into_owned();
    let mut words = line.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(bad(path, Some(1), None, format!("not a commlens plugin file (starts with {:?})", line)));
    }
    let version = words.next().unwrap_or("").to_string();
    let major = version.strip_prefix('v').and_then(|v| v.split('.').next()).and_then(|m| m.parse::<u32>().ok());
    if major != Some(FORMAT_MAJOR) {
        let msg = format!("commlens-plugin format {version:?} is not supported (this reader reads v{FORMAT_MAJOR})");
        return Err(bad(path, Some(1), None, msg));
    }
    let Some(end) = end else { return Err(bad(path, Some(1), None, "header line has no end".into())) };
    let mut h = PluginHeader { version, ..Default::default() };
    for kv in words {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "host" => h.host = v.to_string(),
            "pid" => h.pid = v.parse().unwrap_or(0),
            "session" => h.session = v.to_string(),
            "mono_ns" => h.mono_ns = v.parse().unwrap_or(0),
            "real_ns" => h.real_ns = v.parse().unwrap_or(0),
            _ => {}
        }
        h.fields.push((k.to_string(), v.to_string()));
    }
    Ok((h, end + 1))
}

fn start_fields(ty: u8, c: &mut Cur) -> Option<Fields> {
    Some(match ty {
        8 => Fields::GroupApi { graph_captured: c.b()?, depth: c.i32()? },
        #[rustfmt::skip]
        9 => Fields::CollApi { func: c.u32()?, count: c.u64()?, dtype: c.u32()?, root: c.i32()?, stream: c.u64()?,
                               graph_captured: c.b()?, user_tag: c.u64()? },
        #[rustfmt::skip]
        10 => Fields::P2pApi { func: c.u32()?, count: c.u64()?, dtype: c.u32()?, stream: c.u64()?, graph_captured: c.b()?,
                               user_tag: c.u64()? },
        11 => Fields::KernelLaunch { stream: c.u64()? },
        #[rustfmt::skip]
        1 => Fields::Coll { seq: c.u64()?, func: c.u32()?, sendbuff: c.u64()?, recvbuff: c.u64()?, count: c.u64()?,
                            root: c.i32()?, dtype: c.u32()?, n_channels: c.u8()?, n_warps: c.u8()?, algo: c.u32()?,
                            proto: c.u32()?, parent_group: c.u64()?, kernel_variant: c.u32()?, is_sym: c.b()?,
                            user_tag: c.u64()? },
        #[rustfmt::skip]
        2 => Fields::P2p { func: c.u32()?, buff: c.u64()?, dtype: c.u32()?, count: c.u64()?, peer: c.i32()?,
                           n_channels: c.u8()?, parent_group: c.u64()?, user_tag: c.u64()? },
        #[rustfmt::skip]
        3 => Fields::ProxyOp { pid: c.i32()?, channel: c.u8()?, peer: c.i32()?, n_steps: c.i32()?, chunk_size: c.i32()?,
                               is_send: c.i32()? != 0 },
        4 => Fields::ProxyStep { step: c.i32()? },
        6 => Fields::KernelCh { channel: c.u8()?, ptimer: c.u64()? },
        #[rustfmt::skip]
        7 => Fields::NetPlugin { id: c.i64()?, data: c.u64()?, net_kind: c.u8()?, net_type: c.u8()?, a: c.i32()?,
                                 b: c.i32()?, c: c.i32()?, length: c.u64()? },
        #[rustfmt::skip]
        12 => Fields::CeColl { seq: c.u64()?, func: c.u32()?, sendbuff: c.u64()?, recvbuff: c.u64()?, count: c.u64()?,
                               root: c.i32()?, dtype: c.u32()?, sync_strategy: c.u32()?, intra_batch_sync: c.b()?,
                               batch_size: c.u32()?, num_batches: c.u32()?, ce_seq: c.u32()?, stream: c.u64()?,
                               user_tag: c.u64()? },
        13 => Fields::CeSync { is_complete: c.b()?, nranks: c.i32()? },
        14 => Fields::CeBatch { num_ops: c.i32()?, total_bytes: c.u64()?, use_intra_sync: c.b()? },
        15 => Fields::KernelPhase { channel: c.u8()?, phase_id: c.u8()?, phase_name: c.u32()?, ptimer: c.u64()? },
        _ => Fields::None,
    })
}

/// Decodes one plugin file held in memory.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<PluginTrace, IngestError> {
    let (header, mut off) = parse_header(path, bytes)?;
    let mut t = PluginTrace { path: path.to_path_buf(), header, ..Default::default() };
    let r = &mut t.report;
    r.path = path.display().to_string();
    r.format = t.header.version.clone();
    r.bytes = bytes.len() as u64;
    let mut stops: HashMap<u64, u64> = HashMap::new();
    let mut drops_by_thread: HashMap<u32, u64> = HashMap::new();
    let mut end_drops = 0;
    let mut last_kind = 0;
    while off < bytes.len() {
        let rest = &bytes[off..];
        if rest.len() < 16 || rest.len() < 16 + u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize {
            if rest.len() >= 4 && &rest[..4] != b"CHNK" {
                return Err(bad(path, None, Some(off), "bad chunk magic (expected \"CHNK\")".into()));
            }
            t.report.truncated_bytes = rest.len() as u64;
            break;
        }
        if &rest[..4] != b"CHNK" {
            return Err(bad(path, None, Some(off), "bad chunk magic (expected \"CHNK\")".into()));
        }
        let thread = u32::from_le_bytes(rest[4..8].try_into().unwrap());
        let len = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let mut p = 16;
        t.report.chunks += 1;
        while p < 16 + len {
            let at = off + p;
            let rec_len = if 16 + len - p >= 4 { u16::from_le_bytes([rest[p], rest[p + 1]]) as usize } else { 0 };
            if rec_len < 4 || p + rec_len > 16 + len {
                return Err(bad(path, None, Some(at), format!("record length {rec_len} does not fit its chunk")));
            }
            let (kind, sub) = (rest[p + 2], rest[p + 3]);
            let mut c = Cur(&rest[p + 4..p + rec_len]);
            t.report.records += 1;
            let record = t.report.records;
            let malformed = || bad(path, None, Some(at), format!("record kind {kind} is too short ({rec_len} bytes)"));
            last_kind = kind;
            match kind {
                1 => {
                    let id = c.u32().ok_or_else(malformed)?;
                    t.strings.insert(id, String::from_utf8_lossy(c.0).into_owned());
                }
                2 => {
                    let (idx, tid) = (c.u32().ok_or_else(malformed)?, c.u32().ok_or_else(malformed)?);
                    t.threads.insert(idx, tid);
                }
                3 => {
                    #[rustfmt::skip]
                    let comm = (|| Some(PluginComm { index: c.u32()?, api: sub, comm_hash: c.u64()?, rank: c.i32()?,
                        nranks: c.i32()?, n_nodes: c.i32()?, init_ns: c.u64()?, fini_ns: None,
                        cuda_dev: Some(c.i32()?).filter(|&d| d >= 0), bus_id: Some(c.i64()?).filter(|&b| b >= 0),
                        name: c.u32()?, mask: c.u32()? }))().ok_or_else(malformed)?;
                    if comm.index as usize != t.comms.len() + 1 {
                        return Err(bad(path, None, Some(at), format!("communicator {} out of order", comm.index)));
                    }
                    t.comms.push(comm);
                }
                4 => {
                    let (idx, ts) = (c.u32().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    if let Some(cm) = idx.checked_sub(1).and_then(|i| t.comms.get_mut(i as usize)) {
                        cm.fini_ns = Some(ts);
                    }
                }
                5 => {
                    #[rustfmt::skip]
                    let ev = (|| Some(PluginEvent { id: c.u64()?, parent: c.u64()?, comm: c.u32()?, rank: c.i32()?,
                        flags: c.u8()?, ty: sub, thread, record, start_ns: c.u64()?, stop_ns: None, gpu_stop: None, gpu_stop_seen_ns: None,
                        n_states: 0, fields: start_fields(sub, &mut c)? }))().ok_or_else(malformed)?;
                    t.report.starts += 1;
                    let name = EVENT_NAMES.get(sub as usize).map_or_else(|| format!("type{sub}"), |s| s.to_string());
                    *t.report.events_by_type.entry(name).or_default() += 1;
                    if ev.flags & (FLAG_CTX_FOREIGN | FLAG_PARENT_FOREIGN) != 0 {
                        t.report.foreign_events += 1;
                    }
                    t.index.insert(ev.id, t.events.len());
                    t.events.push(ev);
                }
                6 => {
                    let (id, ts) = (c.u64().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    t.report.stops += 1;
                    stops.insert(id, ts);
                }
                7 => {
                    #[rustfmt::skip]
                    let s = (|| Some(PluginState { id: c.u64()?, t_ns: c.u64()?, state: c.i32()?,
                        arg: Some(c.u64()?).filter(|_| sub == 1) }))().ok_or_else(malformed)?;
                    t.report.states += 1;
                    t.states.push(s);
                }
                8 => {
                    let (th, total) = (c.u32().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    drops_by_thread.insert(th, total);
                }
                9 => {
                    let (_, d, panics) = (c.u64(), c.u64().ok_or_else(malformed)?, c.u64().ok_or_else(malformed)?);
                    end_drops = end_drops.max(d);
                    t.report.panics = t.report.panics.max(panics);
                }
                _ => t.report.unknown_records += 1,
            }
            p += rec_len;
        }
        off += 16 + len;
    }
    for (id, ts) in stops {
        match t.index.get(&id) {
            Some(&i) => t.events[i].stop_ns = Some(ts),
            None => t.report.orphan_stops += 1,
        }
    }
    for s in &t.states {
        match t.index.get(&s.id) {
            Some(&i) => {
                let e = &mut t.events[i];
                e.n_states += 1;
                if s.state == KERNEL_CH_STOP || s.state == 31 {
                    e.gpu_stop = s.arg.filter(|&v| v != 0);
                    e.gpu_stop_seen_ns = Some(s.t_ns);
                }
            }
            None => t.report.orphan_states += 1,
        }
    }
    let r = &mut t.report;
    r.dropped = end_drops.max(drops_by_thread.values().sum());
    r.clean_end = last_kind == 9 && r.truncated_bytes == 0;
    r.comms = t.comms.len() as u64;
    r.threads = t.threads.len() as u64;
    r.open_events = t.events.iter().filter(|e| e.stop_ns.is_none()).count() as u64;
    Ok(t)
}
