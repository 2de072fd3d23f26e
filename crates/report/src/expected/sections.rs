//! The report's collective-model sections from [`super::Expected`]:
//! expected against measured per communicator × kind × size bucket, and
//! NCCL's logged tuning choices against the model's.

use super::{Expected, OpExpected};
use commlens_analyze::bandwidth::Spread;
use commlens_analyze::stats::{bucket_floor, size_bucket};
use commlens_core::{Algorithm, CollOp, OpKind, OpTable, Protocol};
use commlens_export::report::{ExpectedRow, ExpectedSection, TuningRow, TuningSection};
use std::collections::{BTreeMap, HashMap};

/// Provenance lines of the cluster shown in the report.
const PROVENANCE_LINES: usize = 6;

/// Order key of an operation's communicator: its logical communicator, else
/// its handle (after every logical one).
fn comm_order(t: &OpTable, op: &CollOp) -> usize {
    match t.comms.get(op.comm.ix()) {
        Some(c) => match c.logical {
            Some(l) => l.ix(),
            None => t.logical.len() + op.comm.ix(),
        },
        None => usize::MAX,
    }
}

/// Name of an operation's communicator (a function of [`comm_order`], so it is
/// made once per row, not per operation).
fn comm_name(t: &OpTable, op: &CollOp) -> String {
    match t.comms.get(op.comm.ix()) {
        Some(c) => match c.logical {
            Some(l) => t.logical[l.ix()].name.clone(),
            None => format!("comm {:#x}", c.ptr),
        },
        None => "(unknown communicator)".into(),
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

/// The median of values given with their repeats, exactly as [`median`] of the
/// values listed out: the same quantile rule (`bandwidth::quantile`) on the
/// same order (`f64::total_cmp`), read off cumulative counts.
fn median_counted(mut v: Vec<(f64, u64)>) -> Option<f64> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n: u64 = v.iter().map(|x| x.1).sum();
    let last = n.checked_sub(1)?;
    let at = |k: u64| {
        let mut seen = 0;
        for &(x, c) in &v {
            seen += c;
            if k < seen {
                return x;
            }
        }
        unreachable!("rank {k} below the count {n}")
    };
    let pos = 0.5 * last as f64;
    let (lo, hi) = (pos.floor() as u64, pos.ceil() as u64);
    let (a, b) = (at(lo), at(hi));
    Some(a + (b - a) * (pos - lo as f64))
}

/// Counts of (algorithm, protocol) choices, named by [`choice`] when the row is
/// made; a short list (the enums bound it), searched linearly.
type Choices = Vec<((Option<commlens_core::Algorithm>, Option<commlens_core::Protocol>), u64)>;

fn count_choice(m: &mut Choices, c: (Option<commlens_core::Algorithm>, Option<commlens_core::Protocol>)) {
    match m.iter_mut().find(|x| x.0 == c) {
        Some(x) => x.1 += 1,
        None => m.push((c, 1)),
    }
}

fn named(m: Choices) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((a, p), n) in m {
        *out.entry(choice(a, p)).or_default() += n;
    }
    out
}

#[derive(Default)]
struct Acc {
    name: String,
    ops: u64,
    /// This row's place in the figures map of [`expected_section`].
    id: u32,
    measured: Vec<f64>,
    eff: Vec<f64>,
    logged: Choices,
    model: Choices,
    logged_graphs: u64,
}

/// Expected against measured per communicator × kind × size bucket; `None`
/// when no operation could be modelled.
pub fn expected_section(t: &OpTable, e: &Expected) -> Option<ExpectedSection> {
    let mut groups: BTreeMap<(usize, OpKind, u8), Acc> = BTreeMap::new();
    // (row, bytes, expected time bits, expected busbw bits) → operations, one
    // map for all rows: an operation's figures repeat (the model answers per
    // kind and size), so a row costs its distinct ones, not a value per
    // operation nor a map of its own.
    let mut figures: HashMap<(u32, u64, u64, u64), u64> = HashMap::new();
    let (mut unmodelled, mut timed) = (0u64, 0u64);
    let mut n_groups = 0usize;
    for (d, ops) in t.per_rank.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            let Some(x) = e.get(d, i) else {
                unmodelled += 1;
                continue;
            };
            let a = groups
                .entry((comm_order(t, &op), op.kind, size_bucket(op.bytes)))
                .or_insert_with(|| Acc { name: comm_name(t, &op), id: n_groups as u32, ..Acc::default() });
            if a.id as usize == n_groups {
                n_groups += 1;
            }
            *figures.entry((a.id, op.bytes, x.time_us.to_bits(), x.busbw_gb_s.to_bits())).or_default() += 1;
            add(a, &op, &x, e.comms.get(op.comm.ix()).copied().flatten().is_some_and(|m| m.logged_graphs));
            timed += u64::from(x.measured_busbw_gb_s.is_some());
        }
    }
    if groups.is_empty() {
        return None;
    }
    let mut per_row: Vec<Vec<((u64, u64, u64), u64)>> = vec![Vec::new(); n_groups];
    for ((id, b, time, busbw), n) in figures {
        per_row[id as usize].push(((b, time, busbw), n));
    }
    let rows: Vec<ExpectedRow> = groups
        .into_iter()
        .map(|((_, kind, bucket), a)| (kind, bucket, std::mem::take(&mut per_row[a.id as usize]), a))
        .map(|(kind, bucket, figures, a)| ExpectedRow {
            comm: a.name,
            kind: kind.name().to_string(),
            lo_bytes: bucket_floor(bucket),
            median_bytes: median_counted(figures.iter().map(|(k, n)| (k.0 as f64, *n)).collect()).unwrap_or(0.0) as u64,
            ops: a.ops,
            timed: a.measured.len() as u64,
            expected_time_us: median_counted(figures.iter().map(|(k, n)| (f64::from_bits(k.1), *n)).collect()),
            expected_busbw_gb_s: median_counted(figures.iter().map(|(k, n)| (f64::from_bits(k.2), *n)).collect()),
            measured_busbw_gb_s: median(a.measured),
            efficiency: median(a.eff),
            logged_choice: mix(&named(a.logged)),
            model_choice: mix(&named(a.model)),
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
    if let Some(m) = x.measured_busbw_gb_s {
        a.measured.push(m);
    }
    if let Some(f) = x.efficiency {
        a.eff.push(f);
    }
    if op.algo.is_some() {
        count_choice(&mut a.logged, (op.algo, op.proto));
    }
    count_choice(&mut a.model, (x.algo, x.proto));
    a.logged_graphs += u64::from(logged_graphs);
}

/// Agreement of NCCL's logged choices with the model's; `None` when no
/// operation has a logged algorithm and protocol.
pub fn tuning_section(t: &OpTable, e: &Expected) -> Option<TuningSection> {
    let mut s = TuningSection::default();
    let (mut any, mut outside, mut unmodelled) = (false, 0u64, 0u64);
    // Counted per operation under a key of plain values, (communicator order,
    // kind, bytes, logged algorithm, protocol and channels, the model's) →
    // (communicator, count); its words are written once per row below.
    type Key = (usize, OpKind, u64, Algorithm, Protocol, Option<u32>, Algorithm, Protocol, u32);
    let mut counted: HashMap<Key, (String, u64)> = HashMap::new();
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
            let key = (comm_order(t, &op), op.kind, op.bytes, algo, proto, logged_ch, ma, mp, x.n_channels);
            counted.entry(key).or_insert_with(|| (comm_name(t, &op), 0)).1 += 1;
        }
    }
    if !any {
        return None;
    }
    // (communicator order, kind, bytes, logged, model, differs) → (communicator, count)
    let mut rows: BTreeMap<(usize, OpKind, u64, String, String, String), (String, u64)> = BTreeMap::new();
    for ((order, kind, bytes, algo, proto, logged_ch, ma, mp, n_channels), (name, count)) in counted {
        let mut differs = Vec::new();
        if ma != algo {
            differs.push("algorithm");
        }
        if mp != proto {
            differs.push("protocol");
        }
        if logged_ch.is_some_and(|c| c != n_channels) {
            differs.push("channels");
        }
        let logged = match logged_ch {
            Some(c) => format!("{}/{}, {c} channels", algo.name(), proto.name()),
            None => format!("{}/{}", algo.name(), proto.name()),
        };
        let model = format!("{}/{}, {} channels", ma.name(), mp.name(), n_channels);
        rows.entry((order, kind, bytes, logged, model, differs.join(", "))).or_insert((name, 0)).1 += count;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The counted median is bit for bit the median of the values listed out,
    /// for odd and even counts, repeats, signed zeros, infinities and NaN.
    #[test]
    fn counted_median_is_the_listed_median() {
        let pool = [3.5, -1.0, 0.0, -0.0, 1e9, f64::INFINITY, 2.25, f64::NAN, 7.0, 3.5000001];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let n = 1 + (next() % 12) as usize;
            let counted: Vec<(f64, u64)> = (0..n).map(|_| (pool[(next() % pool.len() as u64) as usize], 1 + next() % 5)).collect();
            let listed: Vec<f64> = counted.iter().flat_map(|&(v, c)| std::iter::repeat_n(v, c as usize)).collect();
            let (a, b) = (median_counted(counted.clone()), median(listed));
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits), "{counted:?}");
        }
        assert_eq!(median_counted(Vec::new()), None);
    }
}
