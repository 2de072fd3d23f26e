//! What an nsys export says about the job beyond its kernels: the host the
//! session ran on, and what NCCL's own NVTX annotations say about each
//! process's rank and network traffic.
//!
//! * Host: `TARGET_INFO_SYSTEM_ENV` row `Hostname` (the profiled machine;
//!   `META_DATA_EXPORT.EXPORT_HOST` is where `nsys export` ran, often another
//!   node, and is not used), else `META_DATA_CAPTURE.DEVICE_DISPLAY_NAME`.
//! * Network marks of the `nccl_nvtx` fork of NCCL (used by the
//!   DistributedSysLab captures): NVTX text such as
//!   `ncclNetIsend(): Data_Size: 524288, Sender_Rank: 1, Receiver_Rank: 2,
//!   Channel_ID: 0`. The calling process is the sender of `ncclNetIsend` /
//!   `ncclNetSendTest` and the receiver of `ncclNetIrecv` /
//!   `ncclNetRecvTest`, which names its rank. Bytes are counted once per
//!   transfer: a send at `ncclNetIsend` (the size posted is the size sent),
//!   a receive at a `ncclNetRecvTest` that reports a size (a completed
//!   receive; `ncclNetIrecv` reports the buffer posted, not the data).
//!
//! The marks are streamed in start order and folded per process: one rank
//! vote tally and the transfer list (16 bytes each) the caller assigns to
//! kernels.

use super::schema::{pid_of, Schema};
use rusqlite::Connection;
use std::collections::HashMap;

const NVTX: &str = "NVTX_EVENTS";

/// The profiled host's name.
pub(crate) fn host_name(conn: &Connection, s: &Schema) -> Option<String> {
    let pick = |sql: &str| -> Option<String> {
        conn.query_row(sql, [], |r| r.get::<_, Option<String>>(0))
            .ok()
            .flatten()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let env = "TARGET_INFO_SYSTEM_ENV";
    if s.has_col(env, "name") && s.has_col(env, "value") {
        if let Some(h) = pick(&format!("SELECT CAST(value AS TEXT) FROM {env} WHERE name = 'Hostname' LIMIT 1")) {
            return Some(h);
        }
    }
    let cap = "META_DATA_CAPTURE";
    if s.has_col(cap, "name") && s.has_col(cap, "value") {
        return pick(&format!("SELECT CAST(value AS TEXT) FROM {cap} WHERE name = 'DEVICE_DISPLAY_NAME' LIMIT 1"));
    }
    None
}

/// One network transfer a process's proxy made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transfer {
    pub ts_ns: i64,
    pub bytes: u64,
    pub sent: bool,
}

/// Per process: rank votes and transfers in start order.
#[derive(Debug, Default)]
pub(crate) struct ForkMarks {
    pub votes: HashMap<u32, HashMap<u32, u64>>,
    pub transfers: HashMap<u32, Vec<Transfer>>,
}

impl ForkMarks {
    /// The rank every mark of `pid` agrees on; `None` without marks or when
    /// they disagree.
    pub fn rank_of(&self, pid: u32) -> Option<u32> {
        let v = self.votes.get(&pid)?;
        (v.len() == 1).then(|| *v.keys().next().expect("one"))
    }
}

/// A parsed fork mark: (is the caller the sender, data size, sender, receiver).
pub(crate) fn parse_mark(text: &str) -> Option<(bool, Option<u64>, Option<u32>, Option<u32>, &str)> {
    let func = text.split(['(', ':']).next()?.trim();
    let sender = match func {
        "ncclNetIsend" | "ncclNetSendTest" => true,
        "ncclNetIrecv" | "ncclNetRecvTest" => false,
        _ => return None,
    };
    let field = |name: &str| -> Option<u64> {
        let at = text.find(name)? + name.len();
        let rest = text[at..].trim_start_matches([':', ' ']);
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let small = |v: Option<u64>| v.and_then(|v| u32::try_from(v).ok());
    Some((sender, field("Data_Size"), small(field("Sender_Rank")), small(field("Receiver_Rank")), func))
}

/// Streams the fork's marks (NVTX text containing `Data_Size`).
pub(crate) fn fork_marks(conn: &Connection, s: &Schema) -> rusqlite::Result<ForkMarks> {
    let mut out = ForkMarks::default();
    if !(s.has_col(NVTX, "start") && s.has_col(NVTX, "globalTid")) {
        return Ok(out);
    }
    let inline = s.has_col(NVTX, "text");
    let by_id = s.has_col(NVTX, "textId") && s.has("StringIds");
    let (text, join) = match (inline, by_id) {
        (true, true) => ("COALESCE(n.text, st.value)", "LEFT JOIN StringIds AS st ON st.id = n.textId"),
        (false, true) => ("st.value", "LEFT JOIN StringIds AS st ON st.id = n.textId"),
        (true, false) => ("n.text", ""),
        (false, false) => return Ok(out),
    };
    let sql = format!(
        "SELECT n.start, n.globalTid, {text} FROM {NVTX} AS n {join} WHERE {text} LIKE '%Data\\_Size%' ESCAPE '\\' \
         ORDER BY n.start"
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (Ok(start), Ok(gtid), Some(t)) = (r.get::<_, i64>(0), r.get::<_, i64>(1), super::query::text_at(r, 2)?)
        else {
            continue;
        };
        let Some((sender, size, from, to, func)) = parse_mark(&t) else { continue };
        let pid = pid_of(gtid);
        if let Some(me) = if sender { from } else { to } {
            *out.votes.entry(pid).or_default().entry(me).or_insert(0) += 1;
        }
        let counted = (sender && func == "ncclNetIsend") || (!sender && func == "ncclNetRecvTest");
        if let (true, Some(bytes)) = (counted, size) {
            out.transfers.entry(pid).or_default().push(Transfer { ts_ns: start, bytes, sent: sender });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_marks_name_the_caller() {
        let m = parse_mark("ncclNetIsend(): Data_Size: 524288, Sender_Rank: 1, Receiver_Rank: 2, Channel_ID: 0");
        assert_eq!(m, Some((true, Some(524288), Some(1), Some(2), "ncclNetIsend")));
        let m = parse_mark("ncclNetRecvTest(): Data_Size: 4096, Sender_Rank: 3, Receiver_Rank: 0, Channel_ID: 1");
        assert_eq!(m, Some((false, Some(4096), Some(3), Some(0), "ncclNetRecvTest")));
        assert_eq!(parse_mark("ncclAllReduce"), None);
        assert_eq!(parse_mark("myRange: Data_Size: 5"), None);
    }
}
