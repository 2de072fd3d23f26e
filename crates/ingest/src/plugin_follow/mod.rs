//! Following a commlens plugin file while the process writes it: each
//! [`Follower::poll`] reads only the bytes appended since the last one, decodes
//! the whole chunks among them and keeps the rest (a chunk or header line cut by
//! the writer's buffer) for the next poll, so a poll costs the new bytes, not
//! the file. Operations come out as [`FinishedOp`]s once their kernels finished
//! (the plugin's in-flight rules, see `state`), built as
//! [`trace_to_table`](crate::plugin_out::trace_to_table) builds them; those
//! still running are listed by [`Follower::in_flight`].
//!
//! A file that shrinks or is replaced (another inode under the name) is read
//! again from its start, and the poll says so ([`Progress::Restarted`]). Format
//! errors are those of [`decode`](crate::plugin_out::decode), naming the file
//! and line 1 or the byte offset; the header line is parsed by `decode` itself.
//! A file without END, or ending inside a chunk, is a live file, not an error.

mod records;
mod state;
#[cfg(test)]
mod tests;

pub use records::MAX_OPEN;

use crate::error::IngestError;
use crate::plugin_out::{decode, trace_to_table, PluginHeader, PluginTrace};
use commlens_core::{CollOp, OpKind, OpTable};
use state::State;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Bytes read by one poll at most (the rest waits for the next), so one tick
/// on a large file already written stays short.
pub const MAX_READ: u64 = 64 << 20;
/// The header line must end within this many bytes (as `decode` requires).
const MAX_HEADER: usize = 8192;
const CHUNK_HEADER: usize = 16;

/// An operation that left the follower: `op.proc` is 0, `op.dev` is a
/// placeholder (the caller takes `comms[op.comm].device` from its table) and
/// `op.comm` is the handle's position (communicator index − 1).
#[derive(Debug, Clone)]
pub struct FinishedOp {
    pub op: CollOp,
    /// When its last kernel channel and its last ProxyOp stopped (or it was retired), epoch ns.
    pub done_ns: i64,
    /// Position among the handle's collectives (0, 1, …), the same on every
    /// member because NCCL requires one collective order; `None` for p2p.
    pub coll_ordinal: Option<u64>,
}

/// An operation started and not finished.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlightOp {
    /// Communicator index (1, 2, …).
    pub comm: u32,
    /// The handle's operation counter (0, 1, … over Coll, P2p, CeColl), as in hang dumps.
    pub seq: u64,
    /// NCCL's `seqNumber` (Coll only).
    pub nccl_seq: Option<u64>,
    /// `None` while the function's name string has not arrived.
    pub kind: Option<OpKind>,
    /// The API call's start (else the event's), epoch ns.
    pub start_ns: i64,
    /// The kernel began (a KernelCh START was seen).
    pub running: bool,
    pub channels_done: u16,
    pub channels: u16,
}

/// Counts over the records decoded so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FollowCounts {
    pub chunks: u64,
    pub records: u64,
    pub ops: u64,
    pub ops_with_gpu: u64,
    pub ops_without_comm: u64,
    pub unknown_funcs: u64,
    pub unknown_records: u64,
    /// Records full thread buffers dropped (DROPS and END records).
    pub dropped: u64,
    pub panics: u64,
    /// Open operations given up (more than [`MAX_OPEN`] on one handle) or
    /// effects whose operation never appeared.
    pub forgotten: u64,
}

/// What one poll found.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The file did not grow.
    Unchanged,
    /// `bytes` new bytes were read.
    Read { bytes: u64 },
    /// The file shrank or was replaced: everything decoded before was
    /// dropped and `bytes` were read from its start.
    Restarted { why: String, bytes: u64 },
    /// The file is gone; what was read stays.
    Gone,
}

/// One followed plugin file.
pub struct Follower {
    path: PathBuf,
    /// (device, inode) of the file being read.
    ident: Option<(u64, u64)>,
    /// File bytes read so far; `buf` holds those not yet decoded.
    read_to: u64,
    buf: Vec<u8>,
    header: Option<PluginHeader>,
    st: State,
    skeleton: Option<OpTable>,
}

impl Follower {
    pub fn new(path: &Path) -> Follower {
        #[rustfmt::skip]
        let f = Follower { path: path.to_path_buf(), ident: None, read_to: 0, buf: Vec::new(), header: None,
            st: State::default(), skeleton: None };
        f
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and decodes what was appended since the last poll.
    pub fn poll(&mut self) -> Result<Progress, IngestError> {
        let path = self.path.clone();
        let io = |e| IngestError::Io {
            path: path.clone(),
            source: e,
        };
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Progress::Gone),
            Err(e) => return Err(io(e)),
        };
        let ident = (meta.dev(), meta.ino());
        let restart = match self.ident {
            Some(old) if old != ident => Some("the file was replaced".to_string()),
            _ if meta.len() < self.read_to => Some(format!(
                "the file shrank from {} to {} bytes",
                self.read_to,
                meta.len()
            )),
            _ => None,
        };
        if restart.is_some() {
            *self = Follower::new(&path);
        }
        self.ident = Some(ident);
        if meta.len() == self.read_to {
            return Ok(match restart {
                Some(why) => Progress::Restarted { why, bytes: 0 },
                None => Progress::Unchanged,
            });
        }
        let mut f = std::fs::File::open(&self.path).map_err(io)?;
        f.seek(SeekFrom::Start(self.read_to)).map_err(io)?;
        let want = (meta.len() - self.read_to).min(MAX_READ);
        let before = self.buf.len();
        f.take(want).read_to_end(&mut self.buf).map_err(io)?;
        let got = (self.buf.len() - before) as u64;
        self.read_to += got;
        self.decode_buffered()?;
        Ok(match restart {
            Some(why) => Progress::Restarted { why, bytes: got },
            None if got == 0 => Progress::Unchanged,
            None => Progress::Read { bytes: got },
        })
    }

    /// File offset of `buf[0]`.
    fn consumed(&self) -> u64 {
        self.read_to - self.buf.len() as u64
    }

    fn decode_buffered(&mut self) -> Result<(), IngestError> {
        let bad = |at: u64, what: String| IngestError::Format {
            path: self.path.clone(),
            line: None,
            what: format!("byte offset {at}: {what}"),
        };
        let mut p = 0;
        if self.header.is_none() {
            let Some(nl) = self.buf.iter().take(MAX_HEADER).position(|&b| b == b'\n') else {
                const MAGIC: &[u8] = b"commlens-plugin ";
                let n = self.buf.len().min(MAGIC.len());
                if self.buf.len() >= MAX_HEADER || self.buf[..n] != MAGIC[..n] {
                    // Let `decode` name what is wrong with line 1.
                    decode(&self.path, &self.buf[..self.buf.len().min(MAX_HEADER)])?;
                }
                return Ok(());
            };
            let head = decode(&self.path, &self.buf[..=nl])?;
            let h = head.header;
            self.st.epoch_off = (h.real_ns as i64).wrapping_sub(h.mono_ns as i64);
            self.header = Some(h);
            p = nl + 1;
        }
        let base = self.consumed();
        while self.buf.len() - p >= CHUNK_HEADER {
            let c = &self.buf[p..];
            if &c[..4] != b"CHNK" {
                return Err(bad(
                    base + p as u64,
                    "bad chunk magic (expected \"CHNK\")".into(),
                ));
            }
            let thread = u32::from_le_bytes(c[4..8].try_into().expect("16 bytes"));
            let len = u32::from_le_bytes(c[8..12].try_into().expect("16 bytes")) as usize;
            if c.len() < CHUNK_HEADER + len {
                break;
            }
            let payload = &c[CHUNK_HEADER..CHUNK_HEADER + len];
            let at = base + (p + CHUNK_HEADER) as u64;
            self.st
                .chunk(thread, payload, at)
                .map_err(|(off, what)| bad(off, what))?;
            p += CHUNK_HEADER + len;
        }
        let rest = &self.buf[p..];
        let n = rest.len().min(4);
        if rest[..n] != b"CHNK"[..n] {
            return Err(bad(
                base + p as u64,
                "bad chunk magic (expected \"CHNK\")".into(),
            ));
        }
        self.buf.drain(..p);
        Ok(())
    }

    /// The operations finished since the last call, in the order they finished.
    pub fn take_finished(&mut self) -> Vec<FinishedOp> {
        std::mem::take(&mut self.st.out)
    }

    /// Operations started and not finished.
    pub fn in_flight(&self) -> impl Iterator<Item = InFlightOp> + '_ {
        self.st.in_flight()
    }

    pub fn open_count(&self) -> usize {
        self.st.open_count()
    }

    pub fn header(&self) -> Option<&PluginHeader> {
        self.header.as_ref()
    }

    pub fn comms(&self) -> &[crate::plugin_out::PluginComm] {
        &self.st.comms
    }

    pub fn counts(&self) -> &FollowCounts {
        &self.st.counts
    }

    /// The last record read is END (the process finalized its last communicator or exited).
    pub fn ended(&self) -> bool {
        self.st.ended && self.buf.is_empty()
    }

    /// File bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read_to
    }

    /// Bytes read but not decoded yet (a chunk the writer has not finished).
    pub fn pending_bytes(&self) -> u64 {
        self.buf.len() as u64
    }

    /// The latest time in any record, epoch ns.
    pub fn last_ns(&self) -> Option<i64> {
        self.st.last_ns.map(|t| self.st.epoch(t))
    }

    /// The file's process, devices and communicator handles as
    /// `trace_to_table` makes them, without operations: a finished
    /// operation's `op.comm` indexes its `comms`. Rebuilt when a communicator
    /// was added; `None` before the header was read.
    pub fn skeleton(&mut self) -> Option<&OpTable> {
        let header = self.header.as_ref()?;
        if self
            .skeleton
            .as_ref()
            .is_none_or(|s| s.comms.len() != self.st.comms.len())
        {
            #[rustfmt::skip]
            let mut t = PluginTrace { path: self.path.clone(), header: header.clone(), comms: self.st.comms.clone(),
                threads: self.st.threads.clone(), ..Default::default() };
            self.skeleton = Some(trace_to_table(&mut t));
        }
        self.skeleton.as_ref()
    }
}
