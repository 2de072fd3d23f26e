//! The report's collective-model sections from [`super::Expected`]:
//! expected against measured per communicator × kind × size bucket, and
//! NCCL's logged tuning choices against the model's.

use super::{Expected, OpExpected};
use commlens_analyze::bandwidth::Spread;
use commlens_analyze::stats::{bucket_floor, size_bucket};
use commlens_core::{CollOp, OpKind, OpTable};
use commlens_export::report::{ExpectedRow, ExpectedSection, TuningRow, TuningSection};
use std::collections::BTreeMap;

/// Provenance lines of the cluster shown in the report.
const PROVENANCE_LINES: usize = 6;

/// Order key and name of an operation's communicator: its logical
/// communicator, else its handle.
fn comm_of(t: &OpTable, op: &CollOp) -> (usize, String) {
    match t.comms.get(op.comm.ix()) {
        Some(c) => match c.logical {
            Some(l) => (l.ix(), t.logical[l.ix()].name.clone()),
            None => (t.logical.len() + op.comm.ix(), format!("comm {:#x}", c.ptr)),
        },
        None => (usize::MAX, "(unknown communicator)".into()),
    }
}

fn choice(algo: Option<commlens_core::Algorithm>, proto: Option<commlens_core::Protocol>) -> String {
    match (algo, proto) {
        (Some(a), Some(p)) => format!("{}/{}", a.name(), p.name()),
        (Some(a), None) => a.name().to_string(),
        _ => "p2p".into(),
    }
}

/// `RING/SIMPLE 75%, RING/LL 25%` (largest first, three at most).
fn mix(m: &BTreeMap<String, u64>) -> String {
    let total: u64 = m.values().sum();
    if total == 0 {
        return String::new();
    }
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> =
        v.iter().take(3).map(|(k, n)| format!("{k} {:.0}%", 100.0 * **n as f64 / total as f64)).collect();
    if v.len() > 3 {
        parts.push(format!("+{} more", v.len() - 3));
    }
    parts.join(", ")
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    Spread::of(&mut v).map(|s| s.median)
}

#[derive(Default)]
struct Acc {
    name: String,
    ops: u64,
    bytes: Vec<f64>,
    time: Vec<f64>,
    expected: Vec<f64>,
    measured: Vec<f64>,
    eff: Vec<f64>,
    logged: BTreeMap<String, u64>,
    model: BTreeMap<String, u64>,
    logged_graphs: u64,
}

/// Expected against measured per communicator × kind × size bucket; `None`
/// when no operation could be modelled.
pub fn expected_section(t: &OpTable, e: &Expected) -> Option<ExpectedSection> {
    let mut groups: BTreeMap<(usize, OpKind, u8), Acc> = BTreeMap::new();
    let (mut unmodelled, mut timed) = (0u64, 0u64);
    for (d, ops) in t.per_rank.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            let Some(x) = e.get(d, i) else {
                unmodelled += 1;
                continue;
            };
            let (order, name) = comm_of(t, op);
            let a = groups.entry((order, op.kind, size_bucket(op.bytes))).or_default();
            a.name = name;
            add(a, op, &x, e.comms.get(op.comm.ix()).copied().flatten().is_some_and(|m| m.logged_graphs));
            timed += u64::from(x.measured_busbw_gb_s.is_some());
        }
    }
    if groups.is_empty() {
        return None;
    }
    let rows: Vec<ExpectedRow> = groups
        .into_iter()
        .map(|((_, kind, bucket), a)| ExpectedRow {
            comm: a.name,
            kind: kind.name().to_string(),
            lo_bytes: bucket_floor(bucket),
            median_bytes: median(a.bytes).unwrap_or(0.0) as u64,
            ops: a.ops,
            timed: a.measured.len() as u64,
            expected_time_us: median(a.time),
            expected_busbw_gb_s: median(a.expected),
            measured_busbw_gb_s: median(a.measured),
            efficiency: median(a.eff),
            logged_choice: mix(&a.logged),
            model_choice: mix(&a.model),
            tuner_input: match a.logged_graphs {
                0 => "emulated search",
                n if n == a.ops => "logged graphs",
                _ => "logged graphs and emulated search",
            }
            .into(),
        })
        .collect();
    let handles: Vec<bool> = e.comms.iter().flatten().map(|m| m.logged_graphs).collect();
    let logged = handles.iter().filter(|x| **x).count();
    let tuner_input = match (logged, handles.len()) {
        (0, n) => format!("emulated topology search on the cluster for all {n} communicator handles (no `Pattern …` search graphs in the inputs)"),
        (l, n) if l == n => format!("NCCL's logged search graphs for all {n} communicator handles"),
        (l, n) => format!("NCCL's logged search graphs for {l} of {n} communicator handles, emulated search for the rest"),
    };
    let mut notes = vec![
        "Sizes are bytes as logged (count × datatype size); the model is asked at nccl-tests' size (the whole buffer: × ranks for AllGather, ReduceScatter and AllToAll), so expected and measured bus bandwidth share one convention.".to_string(),
        "Send/Recv are modelled as grouped point-to-point transfers (SendRecv) of their bytes; AllToAll and point-to-point run outside NCCL's tuner. NCCL's environment (NCCL_ALGO, NCCL_PROTO, …) is taken as default.".to_string(),
    ];
    if timed == 0 {
        notes.push("No operation has a GPU span: fuse the logs with a Kineto or Nsight Systems trace (`commlens fuse`), or use plugin output, to compare measured with expected.".into());
    }
    if unmodelled > 0 {
        notes.push(format!("{unmodelled} operations on single-rank communicators or communicators of unknown size are not modelled"));
    }
    let mut provenance: Vec<String> = e.cluster.provenance.iter().take(PROVENANCE_LINES).cloned().collect();
    if e.cluster.provenance.len() > PROVENANCE_LINES {
        provenance.push(format!(
            "… {} more facts (`commlens cluster show` lists them all)",
            e.cluster.provenance.len() - PROVENANCE_LINES
        ));
    }
    Some(ExpectedSection { cluster: e.cluster.name.clone(), provenance, tuner_input, rows, notes })
}

fn add(a: &mut Acc, op: &CollOp, x: &OpExpected, logged_graphs: bool) {
    a.ops += 1;
    a.bytes.push(op.bytes as f64);
    a.time.push(x.time_us);
    a.expected.push(x.busbw_gb_s);
    if let Some(m) = x.measured_busbw_gb_s {
        a.measured.push(m);
    }
    if let Some(f) = x.efficiency {
        a.eff.push(f);
    }
    if op.algo.is_some() {
        *a.logged.entry(choice(op.algo, op.proto)).or_default() += 1;
    }
    *a.model.entry(choice(x.algo, x.proto)).or_default() += 1;
    a.logged_graphs += u64::from(logged_graphs);
}

/// Agreement of NCCL's logged choices with the model's; `None` when no
/// operation has a logged algorithm and protocol.
pub fn tuning_section(t: &OpTable, e: &Expected) -> Option<TuningSection> {
    let mut s = TuningSection::default();
    let (mut any, mut outside, mut unmodelled) = (false, 0u64, 0u64);
    // (communicator order, kind, bytes, logged, model, differs) → (communicator, count)
    type Key = (usize, OpKind, u64, String, String, String);
    let mut rows: BTreeMap<Key, (String, u64)> = BTreeMap::new();
    for (d, ops) in t.per_rank.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            let (Some(algo), Some(proto)) = (op.algo, op.proto) else { continue };
            any = true;
            let Some(x) = e.get(d, i) else {
                unmodelled += 1;
                continue;
            };
            let (Some(ma), Some(mp)) = (x.algo, x.proto) else {
                outside += 1;
                continue;
            };
            s.compared += 1;
            let same = ma == algo && mp == proto;
            s.agree += u64::from(same);
            let logged_ch = op.channels.map(|(lo, hi)| u32::from(hi.saturating_sub(lo)) + 1);
            let ch_same = logged_ch.map(|c| c == x.n_channels);
            if let Some(ok) = ch_same {
                s.channels_compared += 1;
                s.channels_agree += u64::from(ok);
            }
            if same && ch_same != Some(false) {
                continue;
            }
            let mut differs = Vec::new();
            if ma != algo {
                differs.push("algorithm");
            }
            if mp != proto {
                differs.push("protocol");
            }
            if ch_same == Some(false) {
                differs.push("channels");
            }
            let logged = match logged_ch {
                Some(c) => format!("{}/{}, {c} channels", algo.name(), proto.name()),
                None => format!("{}/{}", algo.name(), proto.name()),
            };
            let model = format!("{}/{}, {} channels", ma.name(), mp.name(), x.n_channels);
            let (order, name) = comm_of(t, op);
            let r = rows.entry((order, op.kind, op.bytes, logged, model, differs.join(", "))).or_insert((name, 0));
            r.1 += 1;
        }
    }
    if !any {
        return None;
    }
    s.rows = rows
        .into_iter()
        .map(|((_, kind, bytes, logged, model, differs), (comm, count))| TuningRow {
            comm,
            kind: kind.name().to_string(),
            bytes,
            logged,
            model,
            differs,
            count,
        })
        .collect();
    s.notes.push("One `Bytes -> Algo` line (printed by rank 0 of a communicator) names the choice of every queued operation of its thread with the same kind and size, so a process driving several GPUs counts each of them.".into());
    if outside > 0 {
        s.notes.push(format!("{outside} logged choices of operations outside NCCL's tuner in the model (point-to-point, AllToAll) are not compared"));
    }
    if unmodelled > 0 {
        s.notes.push(format!("{unmodelled} logged choices on communicators without a model (single rank, unknown size) are not compared"));
    }
    Some(s)
}
