//! AICB / SimAI workload text files → [`Workload`].
//!
//! Owns the reader of the format AICB's `SimAI_training_workload_generator.py` writes and SimAI's
//! `Workload.cc` reads: line 1 a parallelism policy token and `key: value` pairs (colons optional,
//! tabs or spaces, keys may be missing), line 2 the number of rows, then rows of 12 fields
//! `id depen fp_compute fp_comm_type fp_comm_size ig_compute ig_comm_type ig_comm_size
//! wg_compute wg_comm_type wg_comm_size wg_update` (times in ns ticks, sizes in bytes). Unsuffixed
//! forward/input-grad communication goes to the TP group, unsuffixed weight-grad communication to
//! the DP group; `_EP` / `_DP_EP` suffixes name the expert groups.
//!
//! What SimAI dies on (a header without `vpp`, `ga` or `all_gpus`: SIGFPE) is filled here with a
//! note in [`Workload::notes`]; what cannot be filled is an [`AicbError`] naming file, line and
//! what was expected. Other AICB outputs (physical-run CSVs, the spec table, AIOB inputs) are
//! recognised and refused by name.
//!
//! Program shape (SimAI analytical, `HYBRID_TRANSFORMER_FWD_IN_BCKWD`): forward compute then
//! forward communication for every row in order, then the rows in reverse: input-grad compute,
//! input-grad communication, weight-grad compute, weight-grad communication. Every collective
//! is issued in line on [`Stream::Compute`]: SimAI 1.6 analytical charges every collective as
//! exposed (its `EndToEnd.csv` shows exposed = total for all phases, weight-grad included), so
//! nothing overlaps. Rows already hold the `ga` micro-batches (the generator unrolls them), so the
//! rows are run once; `ga`, `pp`, `vpp` only enter SimAI's closed-form bubble ([`AicbInfo`]).
//! `wg_update_time` is kept in [`AicbRow`] but not charged (SimAI analytical does not).
//!
//! Groups, with rank `r = t + TP·(p + PP·d)` (`t` TP position, `p` stage, `d` data replica; the
//! layout SimAI's `MockNcclGroup` implies): TP groups contiguous, PP groups strided by TP, DP
//! groups strided by TP·PP, EP groups `ep` consecutive members of a DP group and DP_EP groups the
//! DP members congruent mod `ep` (with PP = 1 exactly SimAI's groups "from the TP groups").
//!
//! Representatives: every rank runs the one program and every group of a kind has the same size,
//! so all ranks share rank 0's timing (`representative[r] = 0`), which is also what SimAI's
//! analytical mode reports. With [`AicbOptions::simai_compat`], GPU counts that TP·PP does not
//! divide are truncated as SimAI does (DP = ⌊GPUs / (TP·PP)⌋); the ranks left over run an empty
//! program and represent themselves.

use crate::program::*;
use commlens_core::{DataType, OpKind, RedOp};
use std::fmt;
use std::path::Path;

/// Choices the file does not make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AicbOptions {
    /// GPU count (SimAI's `-g`): wins over the header's `all_gpus`, fills it when missing.
    pub gpus: Option<u32>,
    /// GPUs per node (SimAI's `-g_p_s`), recorded in [`Workload::gpus_per_node`].
    pub gpus_per_node: Option<u32>,
    /// Accept what SimAI 1.6 accepts: a GPU count TP·PP does not divide (DP truncated) and an EP
    /// size that does not divide DP (SimAI's groups from consecutive TP groups). Off: an error.
    pub simai_compat: bool,
}

/// A file that cannot be read as an AICB/SimAI workload: where, and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct AicbError {
    pub file: String,
    /// 1-based line; 0 when the problem is the file as a whole.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for AicbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for AicbError {}

/// A collective as the file names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AicbOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    /// `ALLREDUCEALLTOALL`: an all-reduce carried out with all-to-all stages; modelled as an
    /// all-reduce of the same buffer.
    AllReduceAllToAll,
    Broadcast,
}

impl AicbOp {
    pub fn op_kind(self) -> OpKind {
        match self {
            AicbOp::AllReduce | AicbOp::AllReduceAllToAll => OpKind::AllReduce,
            AicbOp::AllGather => OpKind::AllGather,
            AicbOp::ReduceScatter => OpKind::ReduceScatter,
            AicbOp::AllToAll => OpKind::AllToAll,
            AicbOp::Broadcast => OpKind::Broadcast,
        }
    }
}

/// One communication field of a row. `bytes` is the file's size: the whole buffer (the
/// gathered output of an all-gather, the input of a reduce-scatter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AicbComm {
    pub op: AicbOp,
    pub group: GroupKind,
    pub bytes: u64,
}

/// One row (layer) of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct AicbRow {
    pub line: usize,
    pub name: String,
    pub fwd_ticks: u64,
    pub fwd_comm: Option<AicbComm>,
    pub ig_ticks: u64,
    pub ig_comm: Option<AicbComm>,
    pub wg_ticks: u64,
    pub wg_comm: Option<AicbComm>,
    pub wg_update_ticks: u64,
}

/// The header as used (filled where it was silent) and the rows, for SimAI-style reports.
#[derive(Debug, Clone, PartialEq)]
pub struct AicbInfo {
    pub policy: String,
    pub tp: u32,
    pub ep: u32,
    pub pp: u32,
    pub vpp: u32,
    pub ga: u32,
    /// GPUs of the job (ranks of the workload).
    pub world: u32,
    /// Data-parallel size, ⌊world / (TP·PP)⌋.
    pub dp: u32,
    /// Expert-data-parallel size, ⌊DP / EP⌋.
    pub dp_ep: u32,
    pub pp_comm_bytes: u64,
    pub rows: Vec<AicbRow>,
}

/// Most ranks a file may declare: membership is stored per rank.
pub const MAX_RANKS: u32 = 1 << 20;

/// Reads an AICB/SimAI workload file.
pub fn load(path: &Path, opts: &AicbOptions) -> Result<Workload, AicbError> {
    load_with_info(path, opts).map(|(w, _)| w)
}

/// [`load`], also returning the header and rows as used.
pub fn load_with_info(path: &Path, opts: &AicbOptions) -> Result<(Workload, AicbInfo), AicbError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| err(&file, 0, format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        err(&file, 0, format!("not a text file (a Chakra .et trace or an archive?); expected {FORMAT}"))
    })?;
    let name = path.file_stem().map_or(file.clone(), |s| s.to_string_lossy().into_owned());
    parse_named(&text, &name, &file, opts)
}

/// Parses the text of a workload file; `name` names the workload and its errors.
pub fn parse(text: &str, name: &str, opts: &AicbOptions) -> Result<Workload, AicbError> {
    parse_with_info(text, name, opts).map(|(w, _)| w)
}

/// [`parse`], also returning the header and rows as used.
pub fn parse_with_info(text: &str, name: &str, opts: &AicbOptions) -> Result<(Workload, AicbInfo), AicbError> {
    parse_named(text, name, name, opts)
}

const FORMAT: &str = "the AICB/SimAI workload text format (line 1 `POLICY key: value …`, line 2 the row count, \
                      then rows of 12 fields `id depen fp_compute fp_type fp_size ig_compute ig_type ig_size \
                      wg_compute wg_type wg_size wg_update`)";

fn err(file: &str, line: usize, message: impl Into<String>) -> AicbError {
    AicbError { file: file.to_string(), line, message: message.into() }
}

/// Names the other formats AICB and SimAI write, so the error says what the file is.
fn foreign_format(first: &str) -> Option<&'static str> {
    let t = first.trim_start_matches('\u{feff}').trim();
    if t.starts_with("comm_type,") || t.starts_with("[rank") {
        Some("an AICB physical-run communication log (CSV)")
    } else if t.starts_with("id\tName") || t.starts_with("id,Name") {
        Some("the AICB workload specification table")
    } else if t.starts_with("train_iter") {
        Some("an AICB AIOB compute-time input")
    } else if t.starts_with("<?xml") || t.starts_with('<') {
        Some("an XML file (an ASTRA-sim custom collective?)")
    } else if t.starts_with('{') {
        Some("a JSON file (an ASTRA-sim system configuration?)")
    } else if t.contains(',') {
        Some("a CSV file")
    } else {
        None
    }
}

#[derive(Default)]
struct Header {
    policy: String,
    tp: Option<u64>,
    ep: Option<u64>,
    pp: Option<u64>,
    vpp: Option<u64>,
    ga: Option<u64>,
    all_gpus: Option<u64>,
    pp_comm: Option<u64>,
    unknown: Vec<String>,
}

fn parse_header(line: &str, file: &str) -> Result<Header, AicbError> {
    let mut h = Header::default();
    let mut toks = line.split_whitespace().peekable();
    if let Some(t) = toks.peek() {
        if !t.contains(':') && !is_key(t) && t.parse::<u64>().is_err() {
            h.policy = t.to_string();
            toks.next();
        }
    }
    while let Some(tok) = toks.next() {
        let (key, inline) = match tok.split_once(':') {
            Some((k, v)) => (k, (!v.is_empty()).then_some(v)),
            None => (tok, None),
        };
        let value = match inline {
            Some(v) => v.to_string(),
            None => match toks.next() {
                Some(v) => v.to_string(),
                None => return Err(err(file, 1, format!("header key `{key}` has no value"))),
            },
        };
        let n: u64 = value.parse().map_err(|_| {
            err(file, 1, format!("header key `{key}`: expected a non-negative integer, found `{value}`"))
        })?;
        match key {
            "model_parallel_NPU_group" | "tp" => h.tp = Some(n),
            "ep" | "expert_parallel_npu_group" => h.ep = Some(n),
            "pp" | "pipeline_model_parallelism" => h.pp = Some(n),
            "vpp" => h.vpp = Some(n),
            "ga" => h.ga = Some(n),
            "all_gpus" => h.all_gpus = Some(n),
            "pp_comm" => h.pp_comm = Some(n),
            "checkpoints" | "checkpoint_initiates" => {}
            other => h.unknown.push(other.to_string()),
        }
    }
    Ok(h)
}

fn is_key(t: &str) -> bool {
    matches!(t, "model_parallel_NPU_group" | "ep" | "pp" | "vpp" | "ga" | "all_gpus" | "pp_comm" | "checkpoints")
}

fn parse_comm(
    tok: &str,
    size: u64,
    default: GroupKind,
    file: &str,
    line: usize,
    field: &str,
) -> Result<Option<AicbComm>, AicbError> {
    let up = tok.to_ascii_uppercase();
    let (base, group) = if let Some(b) = up.strip_suffix("_DP_EP") {
        (b, GroupKind::DpEp)
    } else if let Some(b) = up.strip_suffix("_EP") {
        (b, GroupKind::Ep)
    } else {
        (up.as_str(), default)
    };
    let op = match base {
        "NONE" => return Ok(None),
        "ALLREDUCE" => AicbOp::AllReduce,
        "ALLGATHER" => AicbOp::AllGather,
        "REDUCESCATTER" => AicbOp::ReduceScatter,
        "ALLTOALL" => AicbOp::AllToAll,
        "ALLREDUCEALLTOALL" => AicbOp::AllReduceAllToAll,
        "BROADCAST" => AicbOp::Broadcast,
        _ => {
            return Err(err(
                file,
                line,
                format!(
                    "{field}: unknown communication type `{tok}` (expected ALLREDUCE, ALLGATHER, REDUCESCATTER, \
                     ALLTOALL, ALLREDUCEALLTOALL, BROADCAST or NONE, optionally with _EP or _DP_EP)"
                ),
            ))
        }
    };
    Ok(Some(AicbComm { op, group, bytes: size }))
}

fn num(tok: &str, file: &str, line: usize, field: &str) -> Result<u64, AicbError> {
    tok.parse().map_err(|_| err(file, line, format!("{field}: expected a non-negative integer, found `{tok}`")))
}

const FIELDS: [&str; 12] = [
    "id",
    "depen",
    "fp_compute_time",
    "fp_comm_type",
    "fp_comm_size",
    "ig_compute_time",
    "ig_comm_type",
    "ig_comm_size",
    "wg_compute_time",
    "wg_comm_type",
    "wg_comm_size",
    "wg_update_time",
];

fn parse_row(line: &str, no: usize, file: &str) -> Result<AicbRow, AicbError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 12 {
        return Err(err(file, no, format!("expected 12 fields ({}), found {}", FIELDS.join(" "), f.len())));
    }
    f[1].parse::<i64>().map_err(|_| err(file, no, format!("depen: expected an integer, found `{}`", f[1])))?;
    let n = |i: usize| num(f[i], file, no, FIELDS[i]);
    Ok(AicbRow {
        line: no,
        name: f[0].to_string(),
        fwd_ticks: n(2)?,
        fwd_comm: parse_comm(f[3], n(4)?, GroupKind::Tp, file, no, FIELDS[3])?,
        ig_ticks: n(5)?,
        ig_comm: parse_comm(f[6], n(7)?, GroupKind::Tp, file, no, FIELDS[6])?,
        wg_ticks: n(8)?,
        wg_comm: parse_comm(f[9], n(10)?, GroupKind::Dp, file, no, FIELDS[9])?,
        wg_update_ticks: n(11)?,
    })
}

fn parse_named(text: &str, name: &str, file: &str, opts: &AicbOptions) -> Result<(Workload, AicbInfo), AicbError> {
    let mut notes = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty());
    let Some((l1, first)) = lines.next() else {
        return Err(err(file, 0, format!("empty file; expected {FORMAT}")));
    };
    if let Some(kind) = foreign_format(first) {
        return Err(err(file, l1, format!("this is {kind}, not {FORMAT}")));
    }
    // Line 1 is normally the header; a bare integer means the header is missing.
    let (header, count_line) = if first.trim().parse::<u64>().is_ok() {
        notes.push("no header line: TP, EP, PP, VPP and GA assumed 1".to_string());
        (Header::default(), (l1, first))
    } else {
        let h = parse_header(first, file).map_err(|mut e| {
            e.message = format!("{}; expected {FORMAT}", e.message);
            e
        })?;
        match lines.next() {
            Some(l) => (h, l),
            None => return Err(err(file, l1, "header only: expected line 2 with the number of rows")),
        }
    };
    let declared: u64 = count_line.1.trim().parse().map_err(|_| {
        err(file, count_line.0, format!("expected the number of rows, found `{}` ({FORMAT})", count_line.1.trim()))
    })?;
    let mut rows = Vec::new();
    for (no, line) in lines.by_ref() {
        if rows.len() as u64 == declared {
            notes.push(format!("lines from {no} on follow the {declared} declared rows and were ignored"));
            break;
        }
        rows.push(parse_row(line, no, file)?);
    }
    if (rows.len() as u64) < declared {
        return Err(err(
            file,
            0,
            format!("line {} declares {declared} rows; the file holds {}", count_line.0, rows.len()),
        ));
    }
    if !header.unknown.is_empty() {
        notes.push(format!("header keys not used: {}", header.unknown.join(", ")));
    }
    let info = settle(header, rows, opts, file, &mut notes)?;
    let w = build(&info, name, opts, &mut notes);
    Ok((w, info))
}

/// Fills the header's gaps and checks that the parallel sizes fit the GPU count.
fn settle(
    h: Header,
    rows: Vec<AicbRow>,
    opts: &AicbOptions,
    file: &str,
    notes: &mut Vec<String>,
) -> Result<AicbInfo, AicbError> {
    let mut get = |v: Option<u64>, key: &str| -> Result<u32, AicbError> {
        match v {
            None => {
                notes.push(format!("header has no `{key}`: 1 assumed"));
                Ok(1)
            }
            Some(0) => Err(err(file, 1, format!("header `{key}` is 0; expected at least 1"))),
            Some(n) if n > MAX_RANKS as u64 => {
                Err(err(file, 1, format!("header `{key}` is {n}; at most {MAX_RANKS} supported")))
            }
            Some(n) => Ok(n as u32),
        }
    };
    let tp = get(h.tp, "model_parallel_NPU_group")?;
    let ep = get(h.ep, "ep")?;
    let pp = get(h.pp, "pp")?;
    let vpp = get(h.vpp, "vpp")?;
    let ga = get(h.ga, "ga")?;
    let world = match (opts.gpus, h.all_gpus) {
        (Some(0), _) => return Err(err(file, 0, "the GPU count given is 0; expected at least 1")),
        (Some(g), Some(a)) if a != g as u64 => {
            notes.push(format!("header says all_gpus {a}; the GPU count given ({g}) is used, as SimAI's -g is"));
            g
        }
        (Some(g), None) => {
            notes.push(format!("header has no `all_gpus`: the GPU count given ({g}) is used"));
            g
        }
        (Some(g), _) => g,
        (None, Some(0)) => return Err(err(file, 1, "header `all_gpus` is 0; expected at least 1")),
        (None, Some(a)) if a > MAX_RANKS as u64 => {
            return Err(err(file, 1, format!("header `all_gpus` is {a}; at most {MAX_RANKS} supported")))
        }
        (None, Some(a)) => a as u32,
        (None, None) => return Err(err(file, 1, "header has no `all_gpus` and no GPU count was given (--gpus)")),
    };
    if world > MAX_RANKS {
        return Err(err(file, 0, format!("{world} GPUs; at most {MAX_RANKS} supported")));
    }
    let mp = tp as u64 * pp as u64;
    if mp > world as u64 {
        return Err(err(file, 1, format!("TP {tp} × PP {pp} = {mp} exceeds the {world} GPUs")));
    }
    if world as u64 % mp != 0 {
        if !opts.simai_compat {
            return Err(err(file, 1, format!("TP {tp} × PP {pp} = {mp} does not divide the {world} GPUs")));
        }
        notes.push(format!(
            "TP×PP = {mp} does not divide {world} GPUs: DP truncated to {} as SimAI does; {} ranks idle",
            world as u64 / mp,
            world as u64 % mp
        ));
    }
    let dp = (world as u64 / mp) as u32;
    let uses_ep = rows
        .iter()
        .flat_map(|r| [r.fwd_comm, r.ig_comm, r.wg_comm])
        .flatten()
        .any(|c| matches!(c.group, GroupKind::Ep | GroupKind::DpEp));
    if (ep > 1 || uses_ep) && dp % ep != 0 {
        if !opts.simai_compat {
            return Err(err(
                file,
                1,
                format!("EP {ep} does not divide DP {dp} (= {world} GPUs / (TP {tp} × PP {pp}))"),
            ));
        }
        if (pp as u64) * (dp as u64) < ep as u64 {
            return Err(err(
                file,
                1,
                format!("EP {ep} exceeds the {} TP groups of the {world} GPUs", pp as u64 * dp as u64),
            ));
        }
        notes.push(format!("EP {ep} does not divide DP {dp}: EP groups taken from consecutive TP groups, DP_EP size ⌊{dp}/{ep}⌋ = {}, as SimAI does", dp / ep));
    }
    Ok(AicbInfo {
        policy: h.policy,
        tp,
        ep,
        pp,
        vpp,
        ga,
        world,
        dp,
        dp_ep: dp / ep,
        pp_comm_bytes: h.pp_comm.unwrap_or(0),
        rows,
    })
}

fn compute_kind(name: &str) -> ComputeKind {
    let n = name.to_ascii_lowercase();
    if n.contains("attention") {
        ComputeKind::Attention
    } else if n.contains("embedding") {
        ComputeKind::Embedding
    } else if n.contains("norm") {
        ComputeKind::Elementwise
    } else if n.contains("optimizer") || n.contains("grad_param") {
        ComputeKind::Optimizer
    } else if n.contains("mlp")
        || n.contains("column")
        || n.contains("row")
        || n.contains("linear")
        || n.contains("moe")
    {
        ComputeKind::Gemm
    } else {
        ComputeKind::Other
    }
}

struct Groups {
    groups: Vec<Group>,
    membership: Vec<Vec<GroupId>>,
}

impl Groups {
    fn add(&mut self, kind: GroupKind, idx: usize, ranks: Vec<u32>) {
        let id = GroupId(self.groups.len() as u32);
        for &r in &ranks {
            self.membership[r as usize].push(id);
        }
        let name = format!("{}{idx}", kind.label().to_ascii_lowercase());
        self.groups.push(Group { kind, tag: 0, name, ranks });
    }
}

fn build(info: &AicbInfo, name: &str, opts: &AicbOptions, notes: &mut Vec<String>) -> Workload {
    let (tp, pp, dp, ep) = (info.tp, info.pp, info.dp, info.ep);
    let used = tp * pp * dp;
    let rank = |t: u32, p: u32, d: u32| t + tp * (p + pp * d);
    let mut g = Groups { groups: Vec::new(), membership: vec![Vec::new(); info.world as usize] };
    for (i, (p, d)) in (0..dp).flat_map(|d| (0..pp).map(move |p| (p, d))).enumerate() {
        g.add(GroupKind::Tp, i, (0..tp).map(|t| rank(t, p, d)).collect());
    }
    for (i, (t, p)) in (0..pp).flat_map(|p| (0..tp).map(move |t| (t, p))).enumerate() {
        g.add(GroupKind::Dp, i, (0..dp).map(|d| rank(t, p, d)).collect());
    }
    if pp > 1 {
        for (i, (t, d)) in (0..dp).flat_map(|d| (0..tp).map(move |t| (t, d))).enumerate() {
            g.add(GroupKind::Pp, i, (0..pp).map(|p| rank(t, p, d)).collect());
        }
    }
    let comms = || info.rows.iter().flat_map(|r| [r.fwd_comm, r.ig_comm, r.wg_comm]).flatten();
    let uses = |k: GroupKind| comms().any(|c| c.group == k);
    let mut drop_dp_ep = false;
    if ep > 1 || uses(GroupKind::Ep) || uses(GroupKind::DpEp) {
        let mut idx = 0;
        if dp % ep == 0 {
            for (t, p) in (0..pp).flat_map(|p| (0..tp).map(move |t| (t, p))) {
                for e in 0..dp / ep {
                    g.add(GroupKind::Ep, idx, (0..ep).map(|l| rank(t, p, e * ep + l)).collect());
                    idx += 1;
                }
            }
        } else {
            // SimAI's EP groups: `ep` consecutive TP groups, one group per TP position.
            for b in 0..(pp * dp) / ep {
                for t in 0..tp {
                    g.add(GroupKind::Ep, idx, (0..ep).map(|l| t + tp * (b * ep + l)).collect());
                    idx += 1;
                }
            }
        }
        let dp_ep = dp / ep;
        if dp_ep == 0 {
            drop_dp_ep = uses(GroupKind::DpEp);
            if drop_dp_ep {
                notes.push(format!(
                    "DP_EP size ⌊{dp}/{ep}⌋ is 0: the DP_EP collectives were left out (SimAI charges them 0)"
                ));
            }
        } else {
            let mut idx = 0;
            for (t, p) in (0..pp).flat_map(|p| (0..tp).map(move |t| (t, p))) {
                for i in 0..ep {
                    g.add(GroupKind::DpEp, idx, (0..dp_ep).map(|m| rank(t, p, i + m * ep)).collect());
                    idx += 1;
                }
            }
        }
    }
    let size_of = |k: GroupKind| -> u32 {
        match k {
            GroupKind::Tp => tp,
            GroupKind::Dp => dp,
            GroupKind::Ep => ep,
            GroupKind::DpEp => info.dp_ep,
            _ => 1,
        }
    };
    let mut tasks = Vec::new();
    let mut uneven = 0usize;
    let push_compute = |tasks: &mut Vec<Task>, row: &AicbRow, ticks: u64, what: &str, phase: Phase| {
        if ticks > 0 {
            let c = Compute {
                name: format!("{} {what}", row.name),
                kind: compute_kind(&row.name),
                flops: 0.0,
                mem_bytes: 0.0,
                time_us: Some(ticks as f64 / 1000.0),
            };
            tasks.push(Task { stream: Stream::Compute, deps: Vec::new(), phase, work: Work::Compute(c) });
        }
    };
    let mut push_comm = |tasks: &mut Vec<Task>, c: Option<AicbComm>, phase: Phase| {
        let Some(c) = c else { return };
        if c.group == GroupKind::DpEp && drop_dp_ep {
            return;
        }
        let n = size_of(c.group).max(1) as u64;
        let kind = c.op.op_kind();
        let count = match kind {
            OpKind::AllGather | OpKind::ReduceScatter => {
                uneven += (c.bytes % n != 0) as usize;
                c.bytes / n
            }
            _ => c.bytes,
        };
        let redop = matches!(kind, OpKind::AllReduce | OpKind::ReduceScatter).then_some(RedOp::Sum);
        let call = CollCall {
            group: GroupSel::of(c.group),
            kind,
            count,
            dtype: DataType::Uint8,
            redop,
            root: 0,
            sync: false,
            tag: 0,
        };
        tasks.push(Task { stream: Stream::Compute, deps: Vec::new(), phase, work: Work::Coll(call) });
    };
    for row in &info.rows {
        push_compute(&mut tasks, row, row.fwd_ticks, "fwd", Phase::Forward);
        push_comm(&mut tasks, row.fwd_comm, Phase::Forward);
    }
    for row in info.rows.iter().rev() {
        push_compute(&mut tasks, row, row.ig_ticks, "ig", Phase::InputGrad);
        push_comm(&mut tasks, row.ig_comm, Phase::InputGrad);
        push_compute(&mut tasks, row, row.wg_ticks, "wg", Phase::WeightGrad);
        push_comm(&mut tasks, row.wg_comm, Phase::WeightGrad);
    }
    tasks.push(Task {
        stream: Stream::Compute,
        deps: Vec::new(),
        phase: Phase::Other,
        work: Work::IterationEnd { iter: 0 },
    });
    if uneven > 0 {
        notes.push(format!(
            "{uneven} all-gather/reduce-scatter sizes are not a multiple of their group size: per-rank counts rounded down"
        ));
    }
    let mut programs = vec![Program { tasks }];
    let mut rank_program = vec![0u32; info.world as usize];
    let mut representative = vec![0u32; info.world as usize];
    if used < info.world {
        programs.push(Program::default());
        for r in used..info.world {
            rank_program[r as usize] = 1;
            representative[r as usize] = r;
        }
    }
    Workload {
        name: name.to_string(),
        origin: Origin::Aicb,
        world: info.world,
        gpus_per_node: opts.gpus_per_node,
        iterations: 1,
        groups: g.groups,
        programs,
        rank_program,
        membership: g.membership,
        representative,
        notes: std::mem::take(notes),
    }
}
