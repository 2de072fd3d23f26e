//! SimAI 1.6 analytical's collective-time rule and result format, for side-by-side checks.
//!
//! Owns: [`SimaiFlags`] (the `-g -nv -nic -n_p_s -g_p_s` of `SimAI_analytical`), the rule that
//! turns a collective of a group into time ([`coll_time_ns`], [`busbw`]), [`SimaiNetwork`] (the
//! rule as a [`Network`] backend: fixed durations, no sharing, as SimAI's analytical mode is),
//! [`EndToEnd`] (SimAI's `EndToEnd.csv`: summary line and per-layer rows, read and written) and
//! [`predict`] (SimAI's closed-form end-to-end result for an AICB workload, bubble included).
//!
//! The rule, reverse-engineered from SimAI 1.6's outputs (every row of every reference case
//! reproduced) with facts from its public `calbusbw.cc` / `Layer.cc`:
//!
//! - `time_ns = ⌊S / 2³⁰ / (ratio · busbw) · 10⁹ · f⌋` with `S` the whole buffer in bytes, `f =
//!   2(n−1)/n` for all-reduce and `(n−1)/n` for all-gather, reduce-scatter and all-to-all (busbw
//!   in GiB/s, though the flags say GB/s). Broadcast and other collectives take 0 (SimAI 1.6 does
//!   not time them). Groups of one rank take 0.
//! - Messages of 1 < S < 1 MiB take a fixed latency by group size: 2 → 10 µs, 4 → 12, 8 → 15,
//!   16 → 66, 32 → 135, 64 → 200, 128 → 320, any other size 0.
//! - busbw is `calbusbw.cc`'s ring rule on a node shape that depends on the group kind: `G` GPUs
//!   of the group per node, `R` NICs serving them, `N` nodes. Ring (all-reduce, all-gather,
//!   reduce-scatter): `nv` when `N = 1`; `nic·R` when `G = 1`; else `min(nv, nic·R)`, or
//!   `min(nv·G/(G−1), nic·R)` when `nic·R > nv`. All-to-all: `nv` when `N = 1`, else
//!   `nic·R/G · (N·G−1)/((N−1)·G)`.
//!   Shapes: TP (TP ≤ g_p_s): `N = 1`; TP across nodes: `N = TP/g_p_s, G = g_p_s, R = n_p_s`.
//!   EP: `N = 1` when TP·EP ≤ g_p_s, else `N = TP·EP/g_p_s, G = g_p_s/TP, R = n_p_s/TP`.
//!   DP (span TP) and DP_EP (span TP·EP): `N = n` (SimAI passes the group size as the node
//!   count), `G = max(g_p_s/span, 1)`, `R = n_p_s / min(span, g_p_s)`; `N = 1` when the whole job
//!   fits one server.
//! - ratio (measured efficiency tables `inputs/ratio/*.csv` of SimAI, interpolated linearly in
//!   size and divided by the 16 GiB row; below 16 MiB the first row; beyond 16 GiB 1, where SimAI
//!   throws): TP all-gather/reduce-scatter use the NVLink or NIC table at column `TP/g_p_s` nodes;
//!   all-to-all of TP and EP use the all-to-all table; everything else 1.
//!
//! Units: SimAI's ticks are ns; its reports are µs.

use crate::network::{NetOp, NetOpId, Network};
use commlens_core::OpKind;
use commlens_workload::aicb::{AicbComm, AicbInfo, AicbOp};
use commlens_workload::{GroupKind, GroupSel, Workload};

/// `SimAI_analytical`'s network flags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimaiFlags {
    /// `-g`: GPUs of the job.
    pub gpus: u32,
    /// `-nv`: NVLink busbw, GB/s.
    pub nvlink_gb_s: f64,
    /// `-nic`: busbw of one NIC, GB/s.
    pub nic_gb_s: f64,
    /// `-n_p_s`: NICs per server.
    pub nics_per_server: u32,
    /// `-g_p_s`: GPUs per server.
    pub gpus_per_server: u32,
}

impl SimaiFlags {
    /// Reads the flags from a `SimAI_analytical` command line; `None` when `-g` is missing.
    /// Unset network flags take SimAI's defaults (`-nv 360 -nic 48.5 -n_p_s 8 -g_p_s 8`).
    pub fn from_command(cmd: &str) -> Option<SimaiFlags> {
        let toks: Vec<&str> = cmd.split_whitespace().collect();
        let val = |flag: &str| toks.windows(2).find(|w| w[0] == flag).map(|w| w[1]);
        let f = |flag: &str, d: f64| val(flag).and_then(|v| v.parse().ok()).unwrap_or(d);
        Some(SimaiFlags {
            gpus: val("-g")?.parse().ok()?,
            nvlink_gb_s: f("-nv", 360.0),
            nic_gb_s: f("-nic", 48.5),
            nics_per_server: f("-n_p_s", 8.0) as u32,
            gpus_per_server: f("-g_p_s", 8.0) as u32,
        })
    }
}

/// The parallel sizes SimAI's rule needs beyond the group itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimaiShape {
    pub tp: u32,
    pub ep: u32,
}

impl SimaiShape {
    /// TP and EP of a workload: the sizes of rank 0's TP and EP groups (1 when absent).
    pub fn of(w: &Workload) -> SimaiShape {
        let size = |k| w.group_of(0, GroupSel::of(k)).map_or(1, |g| w.group(g).ranks.len() as u32);
        SimaiShape { tp: size(GroupKind::Tp), ep: size(GroupKind::Ep) }
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Columns: size, then 1, 2, 4, 8, 16, 32, 64, 128 nodes, "multi" (SimAI's `inputs/ratio`;
/// empty cells read as 1, as SimAI reads them).
type RatioTable = [[f64; 10]; 11];
#[rustfmt::skip]
const NIC_RATIO: RatioTable = [
    [16777216.0, 0.45, 0.32, 0.24, 0.13, 0.05, 0.044, 0.021, 0.0087, 0.86],
    [33554432.0, 0.55, 0.47, 0.38, 0.24, 0.11, 0.052, 0.042, 0.021225, 0.92],
    [67108864.0, 0.65, 0.5, 0.53, 0.39, 0.21, 0.106, 0.051, 0.04405, 0.94],
    [134217728.0, 0.69, 0.67, 0.67, 0.54, 0.38, 0.205, 0.107, 0.0533, 0.94],
    [268435456.0, 0.73, 0.85, 0.77, 0.69, 0.57, 0.387, 0.209, 0.1027, 0.94],
    [536870912.0, 0.76, 0.89, 0.85, 0.78, 0.73, 0.562, 0.384, 0.1902, 0.95],
    [1073741824.0, 0.77, 0.92, 0.93, 0.9, 0.76, 0.74, 0.563, 0.314575, 0.96],
    [2147483648.0, 0.78, 0.94, 0.94, 0.94, 0.92, 0.758, 0.745, 0.553525, 0.96],
    [4294967296.0, 0.79, 0.95, 0.95, 0.95, 0.95, 0.923, 0.755, 0.740175, 0.96],
    [8589934592.0, 0.8, 0.95, 0.96, 0.96, 0.96, 0.953, 0.914, 0.7648, 0.96],
    [17179869184.0, 0.81, 0.96, 0.96, 0.96, 0.96, 0.957, 0.958, 0.919175, 0.96],
];
#[rustfmt::skip]
const NVLINK_RATIO: RatioTable = [
    [16777216.0, 0.45, 0.55, 0.34, 0.16, 0.08, 1.0, 1.0, 1.0, 0.86],
    [33554432.0, 0.55, 0.68, 0.6, 0.34, 0.16, 1.0, 1.0, 1.0, 0.92],
    [67108864.0, 0.65, 0.74, 0.71, 0.62, 0.33, 1.0, 1.0, 1.0, 0.94],
    [134217728.0, 0.69, 0.8, 0.74, 0.7, 0.65, 1.0, 1.0, 1.0, 0.94],
    [268435456.0, 0.73, 0.84, 0.79, 0.78, 0.72, 1.0, 1.0, 1.0, 0.94],
    [536870912.0, 0.76, 0.86, 0.86, 0.82, 0.75, 1.0, 1.0, 1.0, 0.95],
    [1073741824.0, 0.77, 0.87, 0.87, 0.86, 0.83, 1.0, 1.0, 1.0, 0.96],
    [2147483648.0, 0.78, 0.87, 0.87, 0.87, 0.86, 1.0, 1.0, 1.0, 0.96],
    [4294967296.0, 0.79, 0.88, 0.88, 0.88, 0.87, 1.0, 1.0, 1.0, 0.96],
    [8589934592.0, 0.8, 0.88, 0.88, 0.88, 0.88, 1.0, 1.0, 1.0, 0.96],
    [17179869184.0, 0.81, 0.88, 0.88, 0.88, 0.88, 1.0, 1.0, 1.0, 0.96],
];
#[rustfmt::skip]
const ATA_RATIO: RatioTable = [
    [16777216.0, 0.44, 0.52, 0.67, 0.64, 0.62, 1.0, 1.0, 1.0, 0.86],
    [33554432.0, 0.51, 0.63, 0.68, 0.67, 0.66, 1.0, 1.0, 1.0, 0.92],
    [67108864.0, 0.6, 0.72, 0.83, 0.82, 0.66, 1.0, 1.0, 1.0, 0.94],
    [134217728.0, 0.65, 0.76, 0.9, 0.85, 0.72, 1.0, 1.0, 1.0, 0.94],
    [268435456.0, 0.7, 0.79, 0.92, 0.87, 0.75, 1.0, 1.0, 1.0, 0.94],
    [536870912.0, 0.71, 0.8, 0.94, 0.89, 0.81, 1.0, 1.0, 1.0, 0.95],
    [1073741824.0, 0.74, 0.81, 0.94, 0.92, 0.85, 1.0, 1.0, 1.0, 0.96],
    [2147483648.0, 0.76, 0.81, 0.95, 0.93, 0.88, 1.0, 1.0, 1.0, 0.96],
    [4294967296.0, 0.77, 0.8, 0.95, 0.94, 0.89, 1.0, 1.0, 1.0, 0.96],
    [8589934592.0, 0.78, 0.8, 0.95, 0.94, 0.9, 1.0, 1.0, 1.0, 0.96],
    [17179869184.0, 0.78, 0.8, 0.95, 0.94, 0.9, 1.0, 1.0, 1.0, 0.96],
];

/// The table value for `bytes` at `nodes` (9 = the "multi" column), relative to the last row.
fn ratio(table: &RatioTable, bytes: u64, nodes: u32) -> f64 {
    let col = match nodes {
        1 => 1,
        2 => 2,
        4 => 3,
        8 => 4,
        16 => 5,
        32 => 6,
        64 => 7,
        128 => 8,
        9 => 9,
        _ => 5,
    };
    let last = table[table.len() - 1][col];
    let s = bytes as f64;
    if bytes == 0 {
        return 1.0;
    }
    if s < table[0][0] {
        return table[0][col] / last;
    }
    for w in table.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if s >= a[0] && s <= b[0] {
            return (a[col] + (b[col] - a[col]) * (s - a[0]) / (b[0] - a[0])) / last;
        }
    }
    1.0
}

/// SimAI's fixed time for messages of 1 B < S < 1 MiB, by group size.
fn small_message_ns(nranks: u32) -> u64 {
    match nranks {
        2 => 10_000,
        4 => 12_000,
        8 => 15_000,
        16 => 66_000,
        32 => 135_000,
        64 => 200_000,
        128 => 320_000,
        _ => 0,
    }
}

/// The bandwidth SimAI's rule gives a collective: busbw (GiB/s), the table ratio applied to it,
/// and whether NVLink is the bottleneck. `None` for collectives SimAI does not time.
pub fn busbw(
    flags: &SimaiFlags,
    shape: SimaiShape,
    kind: GroupKind,
    op: OpKind,
    nranks: u32,
    bytes: u64,
) -> Option<(f64, f64, bool)> {
    let ata = match op {
        OpKind::AllReduce | OpKind::AllGather | OpKind::ReduceScatter => false,
        OpKind::AllToAll => true,
        _ => return None,
    };
    let (nv, nic) = (flags.nvlink_gb_s, flags.nic_gb_s);
    let gps = flags.gpus_per_server.max(1);
    let nps = flags.nics_per_server.max(1) as f64;
    let (tp, ep, n) = (shape.tp.max(1), shape.ep.max(1), nranks.max(1));
    // (nodes, GPUs of the group per node, NICs serving them)
    let (nodes, g, r) = match kind {
        GroupKind::Tp if n <= gps => (1, n, nps),
        GroupKind::Tp => (n / gps, gps, nps),
        GroupKind::Ep if tp * n <= gps => (1, n, nps),
        GroupKind::Ep => (tp * n / gps, (gps / tp).max(1), nps / tp.min(gps) as f64),
        _ => {
            let span = if kind == GroupKind::DpEp { tp * ep } else { tp };
            if flags.gpus == gps && span <= gps {
                (1, n, nps)
            } else {
                (n, (gps / span).max(1), nps / span.min(gps) as f64)
            }
        }
    };
    let mut nvlink_bound = false;
    let ring = if nodes <= 1 {
        nv
    } else if g == 1 {
        nic * r
    } else {
        let intra = if nic * r > nv { nv * g as f64 / (g - 1) as f64 } else { nv };
        nvlink_bound = intra < nic * r;
        intra.min(nic * r)
    };
    let bw = if !ata {
        ring
    } else if nodes <= 1 {
        nvlink_bound = true;
        nv
    } else {
        let (nn, gg) = (nodes as f64, g as f64);
        nic * r / gg * (nn * gg - 1.0) / ((nn - 1.0) * gg)
    };
    let k = match (kind, ata) {
        (GroupKind::Tp, false) if op != OpKind::AllReduce => {
            let table = if nvlink_bound { &NVLINK_RATIO } else { &NIC_RATIO };
            ratio(table, bytes, if tp < gps { 1 } else { tp / gps })
        }
        (GroupKind::Tp, true) => ratio(&ATA_RATIO, bytes, if tp <= gps { 1 } else { tp / gps }),
        (GroupKind::Ep, true) if tp * n <= gps => ratio(&ATA_RATIO, bytes, 1),
        (GroupKind::Ep, true) if tp >= gps => ratio(&ATA_RATIO, bytes, 9),
        (GroupKind::Ep, true) => ratio(&ATA_RATIO, bytes, tp * n / gps),
        _ => 1.0,
    };
    Some((bw, k, nvlink_bound))
}

/// The time SimAI 1.6 analytical charges, in ns (ticks): `bytes` is the whole buffer (SimAI's
/// size: gathered output, reduce-scatter input).
pub fn coll_time_ns(
    flags: &SimaiFlags,
    shape: SimaiShape,
    kind: GroupKind,
    op: OpKind,
    nranks: u32,
    bytes: u64,
) -> u64 {
    let Some((bw, k, _)) = busbw(flags, shape, kind, op, nranks, bytes) else { return 0 };
    if bytes > 1 && bytes < 1 << 20 {
        return small_message_ns(nranks);
    }
    if nranks <= 1 || bw <= 0.0 || k <= 0.0 {
        return 0;
    }
    let n = nranks as f64;
    let f = if op == OpKind::AllReduce { 2.0 * (n - 1.0) / n } else { (n - 1.0) / n };
    (bytes as f64 / GIB / (k * bw) * 1e9 * f) as u64
}

/// SimAI's reported algbw and busbw (GiB/s) of `bytes` moved in `time_ns` (`compute_busbw`).
pub fn reported_bw(op: OpKind, nranks: u32, bytes: u64, time_ns: u64) -> (f64, f64) {
    let alg = bytes as f64 / (time_ns as f64 / 1000.0) * 1e6 / GIB;
    let n = nranks as f64;
    let bus = match op {
        OpKind::AllReduce => alg * 2.0 * (n - 1.0) / n,
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll => alg * (n - 1.0) / n,
        _ => 0.0,
    };
    (alg, bus)
}

/// SimAI's rule as a network backend: each operation takes the rule's time from its start;
/// operations never slow each other down. Point-to-point traffic (which SimAI's analytical mode
/// prices in closed form) moves at one NIC's busbw.
#[derive(Debug, Clone)]
pub struct SimaiNetwork {
    pub flags: SimaiFlags,
    pub shape: SimaiShape,
    in_flight: Vec<(f64, NetOpId)>,
}

impl SimaiNetwork {
    pub fn new(flags: SimaiFlags, shape: SimaiShape) -> SimaiNetwork {
        SimaiNetwork { flags, shape, in_flight: Vec::new() }
    }

    pub fn for_workload(w: &Workload, flags: SimaiFlags) -> SimaiNetwork {
        SimaiNetwork::new(flags, SimaiShape::of(w))
    }

    /// Duration of `op` in µs under the rule.
    pub fn duration_us(&self, op: &NetOp) -> f64 {
        let n = op.ranks.len() as u32;
        let ns = match op.kind {
            OpKind::Send | OpKind::Recv | OpKind::SendRecv => {
                (op.bytes as f64 / GIB / self.flags.nic_gb_s * 1e9) as u64
            }
            OpKind::AllGather | OpKind::ReduceScatter => {
                coll_time_ns(&self.flags, self.shape, op.group_kind, op.kind, n, op.bytes.saturating_mul(n as u64))
            }
            k => coll_time_ns(&self.flags, self.shape, op.group_kind, k, n, op.bytes),
        };
        ns as f64 / 1000.0
    }
}

impl Network for SimaiNetwork {
    fn start(&mut self, now_us: f64, op: NetOp) {
        let end = now_us + self.duration_us(&op);
        self.in_flight.push((end, op.id));
    }

    fn next_completion(&self) -> Option<f64> {
        self.in_flight.iter().map(|&(t, _)| t).min_by(f64::total_cmp)
    }

    fn advance(&mut self, to_us: f64) -> Vec<NetOpId> {
        let mut done = Vec::new();
        self.in_flight.retain(|&(t, id)| {
            let finished = t <= to_us;
            if finished {
                done.push((t, id));
            }
            !finished
        });
        done.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        done.into_iter().map(|(_, id)| id).collect()
    }
}

/// One per-layer row of `EndToEnd.csv` (µs; NaN where SimAI printed `-nan`/`inf`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndToEndLayer {
    pub name: String,
    pub fwd_compute: f64,
    pub wg_compute: f64,
    pub ig_compute: f64,
    pub fwd_exposed: f64,
    pub wg_exposed: f64,
    pub ig_exposed: f64,
    pub fwd_total: f64,
    pub fwd_busbw: f64,
    pub wg_total: f64,
    pub wg_busbw: f64,
    pub ig_total: f64,
    pub ig_busbw: f64,
}

/// SimAI's `EndToEnd.csv`: the summary (µs) and the per-layer rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndToEnd {
    pub file_name: String,
    pub exposed_dp: f64,
    pub exposed_dp_ep: f64,
    pub exposed_tp: f64,
    pub exposed_ep: f64,
    pub exposed_pp: f64,
    pub bubble: f64,
    pub compute: f64,
    pub exposed: f64,
    pub total: f64,
    pub layers: Vec<EndToEndLayer>,
}

const SUMMARY_KEYS: &str = "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, \
                            Expose_PP_comm, bubble time, total comp, total exposed comm, Total time";

impl EndToEnd {
    /// Reads an `EndToEnd.csv`; the message names the line and what was expected.
    pub fn parse(text: &str) -> Result<EndToEnd, String> {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("File name"))
            .ok_or("no summary header (`File name, Expose DP comm, …`) found")?;
        let vals = lines.get(at + 1).ok_or(format!("line {}: summary header without values", at + 1))?;
        let f: Vec<&str> = vals.split(',').map(str::trim).collect();
        if f.len() != 10 {
            return Err(format!("line {}: expected 10 summary fields, found {}", at + 2, f.len()));
        }
        let num = |i: usize| -> Result<f64, String> {
            let v = f[i].split(" (").next().unwrap_or("");
            v.trim().parse().map_err(|_| format!("line {}: field {} `{}` is not a number", at + 2, i + 1, f[i]))
        };
        let mut e = EndToEnd {
            file_name: f[0].to_string(),
            exposed_dp: num(1)?,
            exposed_dp_ep: num(2)?,
            exposed_tp: num(3)?,
            exposed_ep: num(4)?,
            exposed_pp: num(5)?,
            bubble: num(6)?,
            compute: num(7)?,
            exposed: num(8)?,
            total: num(9)?,
            layers: Vec::new(),
        };
        for l in lines.iter().filter(|l| !l.starts_with("layer_name") && !l.starts_with("File name")) {
            let c: Vec<&str> = l.split(',').collect();
            if c.len() < 17 || c[0] == "SUM" {
                continue;
            }
            let v = |i: usize| c[i].trim().parse::<f64>().ok().filter(|x| x.is_finite()).unwrap_or(f64::NAN);
            e.layers.push(EndToEndLayer {
                name: c[0].to_string(),
                fwd_compute: v(2),
                wg_compute: v(3),
                ig_compute: v(4),
                fwd_exposed: v(5),
                wg_exposed: v(6),
                ig_exposed: v(7),
                fwd_total: v(8),
                fwd_busbw: v(10),
                wg_total: v(11),
                wg_busbw: v(13),
                ig_total: v(14),
                ig_busbw: v(16),
            });
        }
        Ok(e)
    }

    /// Exposed communication of one group kind (0 for kinds SimAI does not report).
    pub fn exposed_of(&self, kind: GroupKind) -> f64 {
        match kind {
            GroupKind::Dp => self.exposed_dp,
            GroupKind::DpEp => self.exposed_dp_ep,
            GroupKind::Tp => self.exposed_tp,
            GroupKind::Ep => self.exposed_ep,
            GroupKind::Pp => self.exposed_pp,
            _ => 0.0,
        }
    }

    /// The summary as SimAI writes it: the key line and the value line (µs, shares of the total).
    pub fn summary_csv(&self) -> String {
        let pct = |v: f64| if self.total > 0.0 { 100.0 * v / self.total } else { 0.0 };
        let cell = |v: f64| format!("{:.0} ({:.2}%)", v, pct(v));
        let cells = [
            self.exposed_dp,
            self.exposed_dp_ep,
            self.exposed_tp,
            self.exposed_ep,
            self.exposed_pp,
            self.bubble,
            self.compute,
            self.exposed,
        ]
        .map(cell)
        .join(", ");
        format!("{SUMMARY_KEYS}\n{}, {cells}, {:.0}\n", self.file_name, self.total)
    }
}

/// SimAI's pipeline bubble: the pre-bubble time × (PP−1)/(GA·VPP).
pub fn bubble_us(pre_bubble_us: f64, pp: u32, ga: u32, vpp: u32) -> f64 {
    pre_bubble_us * pp.saturating_sub(1) as f64 / (ga.max(1) as f64 * vpp.max(1) as f64)
}

/// SimAI 1.6 analytical's result for an AICB workload, in closed form (what `SimAI_analytical`
/// computes: every collective exposed, bubble by formula, PP exposure 0 as with its default
/// `pp_overlap_ratio` of 1).
pub fn predict(info: &AicbInfo, flags: &SimaiFlags, file_name: &str) -> EndToEnd {
    let shape = SimaiShape { tp: info.tp, ep: info.ep };
    let size = |k: GroupKind| match k {
        GroupKind::Tp => info.tp,
        GroupKind::Ep => info.ep,
        GroupKind::DpEp => info.dp_ep,
        _ => info.dp,
    };
    let time = |c: Option<AicbComm>| -> (f64, f64) {
        let Some(c) = c else { return (0.0, f64::NAN) };
        let (n, kind) = (size(c.group), c.op.op_kind());
        let ns = if c.op == AicbOp::Broadcast { 0 } else { coll_time_ns(flags, shape, c.group, kind, n, c.bytes) };
        (ns as f64 / 1000.0, reported_bw(kind, n, c.bytes, ns).1)
    };
    let mut e = EndToEnd { file_name: file_name.to_string(), ..EndToEnd::default() };
    let mut pre_bubble = 0.0;
    for row in &info.rows {
        let (fwd, fwd_bw) = time(row.fwd_comm);
        let (ig, ig_bw) = time(row.ig_comm);
        let (wg, wg_bw) = time(row.wg_comm);
        let ms = |t: u64| t as f64 / 1000.0;
        let (fc, wc, ic) = (ms(row.fwd_ticks), ms(row.wg_ticks), ms(row.ig_ticks));
        e.compute += fc + wc + ic;
        let is_ep = |c: Option<AicbComm>| c.is_some_and(|c| c.group == GroupKind::Ep);
        *if is_ep(row.fwd_comm) { &mut e.exposed_ep } else { &mut e.exposed_tp } += fwd;
        *if is_ep(row.ig_comm) { &mut e.exposed_ep } else { &mut e.exposed_tp } += ig;
        *if row.wg_comm.is_some_and(|c| c.group == GroupKind::DpEp) {
            &mut e.exposed_dp_ep
        } else {
            &mut e.exposed_dp
        } += wg;
        if row.name != "embedding_layer" {
            pre_bubble += fwd + fc + wc + ic + ig;
        }
        e.layers.push(EndToEndLayer {
            name: row.name.clone(),
            fwd_compute: fc,
            wg_compute: wc,
            ig_compute: ic,
            fwd_exposed: fwd,
            wg_exposed: wg,
            ig_exposed: ig,
            fwd_total: fwd,
            fwd_busbw: fwd_bw,
            wg_total: wg,
            wg_busbw: wg_bw,
            ig_total: ig,
            ig_busbw: ig_bw,
        });
    }
    e.bubble = bubble_us(pre_bubble, info.pp, info.ga, info.vpp);
    e.exposed = e.exposed_dp + e.exposed_dp_ep + e.exposed_tp + e.exposed_ep;
    e.total = e.compute + e.exposed + e.bubble + e.exposed_pp;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(gpus: u32) -> SimaiFlags {
        SimaiFlags { gpus, nvlink_gb_s: 360.0, nic_gb_s: 48.5, nics_per_server: 8, gpus_per_server: 8 }
    }

    #[test]
    fn reference_points() {
        let tp8 = SimaiShape { tp: 8, ep: 1 };
        // TP all-reduce inside a server: 16 MiB at 360 GiB/s × 2·7/8 = 75.955 µs.
        assert_eq!(coll_time_ns(&flags(128), tp8, GroupKind::Tp, OpKind::AllReduce, 8, 16 << 20), 75_954);
        // TP all-gather 20 MiB: ratio 0.475/0.81 of 360 (reported busbw 211.11).
        let (bw, k, _) = busbw(&flags(128), tp8, GroupKind::Tp, OpKind::AllGather, 8, 20_971_520).unwrap();
        assert!((bw * k - 211.11).abs() < 0.01, "{}", bw * k);
        // DP reduce-scatter with TP 8: one NIC (48.5) per ring, 15/16 of 6497239040 B.
        let t = coll_time_ns(&flags(128), tp8, GroupKind::Dp, OpKind::ReduceScatter, 16, 6_497_239_040);
        assert_eq!((t as f64 / 1000.0).round(), 116_966.0);
        // DP all-to-all, TP 1: 48.5 · (8n−1)/((n−1)·8).
        let (bw, _, _) =
            busbw(&flags(128), SimaiShape { tp: 1, ep: 1 }, GroupKind::Dp, OpKind::AllToAll, 128, 1 << 30).unwrap();
        assert!((bw - 48.5 * 1023.0 / 1016.0).abs() < 1e-9);
        // Small messages: fixed latency by group size, 0 for sizes off the table.
        assert_eq!(coll_time_ns(&flags(128), tp8, GroupKind::Dp, OpKind::AllReduce, 128, 4096), 320_000);
        assert_eq!(coll_time_ns(&flags(1024), tp8, GroupKind::Dp, OpKind::AllReduce, 1024, 4096), 0);
        assert_eq!(coll_time_ns(&flags(128), tp8, GroupKind::Tp, OpKind::Broadcast, 8, 1 << 30), 0);
    }

    #[test]
    fn summary_round_trip() {
        let e = EndToEnd {
            file_name: "x".into(),
            exposed_dp: 10.0,
            compute: 30.0,
            exposed: 10.0,
            total: 40.0,
            ..Default::default()
        };
        let back = EndToEnd::parse(&e.summary_csv()).unwrap();
        assert_eq!((back.exposed_dp, back.compute, back.total, back.file_name.as_str()), (10.0, 30.0, 40.0, "x"));
        assert!(EndToEnd::parse("garbage").is_err());
    }
}
