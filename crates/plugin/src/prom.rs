//! The metrics in the Prometheus text exposition format (version 0.0.4): one
//! `# HELP` and `# TYPE` line per family, then its samples.
//!
//! Labels: `job` and `host` on every series; `comm` (the communicator id as
//! `commlens stats` prints it, `0x` and 16 hex digits) and `rank` (the rank in
//! that communicator) on per-rank series; `kind` (NCCL's function name) on
//! per-operation-kind series; `pid` on the process's own series, on
//! `commlens_comm_local_ranks` and on folded series, so that the files of the
//! processes of one host, which node_exporter merges, never hold the same
//! series twice (a rank of a communicator lives in one process). Cardinality is
//! bounded: at most `COMMLENS_PLUGIN_PROM_MAX_COMMS` communicators have series of
//! their own (the first ones registered); the handles of the others are summed
//! into `comm="other", rank="other"` (counters, histograms and in-flight
//! figures only), and at most 12 kinds exist per handle (the 12th is
//! `kind="other"`). Metric names, their units and what they count are listed in
//! the plugin's README.

use crate::config::config;
use crate::metrics::{bucket_le_seconds, HandleView, KindAcc, Writer, BUCKETS, FINITE_BUCKETS, OTHER_FUNC};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// A label value with `\`, `"` and newlines escaped.
pub fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: Go's spelling of the special floats.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, ty: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {ty}");
    }

    /// `labels`: already rendered `k="v",…` (without braces); `extra` appended.
    fn sample(&mut self, name: &str, labels: &str, extra: &[(&str, &str)], v: f64) {
        self.text.push_str(name);
        self.text.push('{');
        self.text.push_str(labels);
        for (k, val) in extra {
            let _ = write!(self.text, ",{k}=\"{}\"", escape(val));
        }
        let _ = writeln!(self.text, "}} {}", value(v));
    }
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape(v));
    }
    s
}

/// One `(comm, rank)` label pair: one handle, or every folded handle.
struct Series<'a> {
    labels: String,
    comm_label: String,
    folded: bool,
    views: Vec<&'a HandleView>,
    /// Function id → summed accumulators.
    kinds: BTreeMap<u32, KindAcc>,
}

fn merge(into: &mut KindAcc, k: &KindAcc) {
    into.ops += k.ops;
    into.bytes = into.bytes.wrapping_add(k.bytes);
    into.timed += k.timed;
    into.dur_ns = into.dur_ns.wrapping_add(k.dur_ns);
    for (a, b) in into.hist.iter_mut().zip(&k.hist) {
        *a += b;
    }
}

/// The series of every handle; folded handles carry `pid` so that the files of
/// several processes of one host (node_exporter merges them) never repeat a series.
fn series<'a>(base: &str, views: &'a [HandleView], max_comms: usize, pid: u32) -> Vec<Series<'a>> {
    let mut order: Vec<u64> = Vec::new();
    let mut out: Vec<Series<'a>> = Vec::new();
    let mut other: Option<Series<'a>> = None;
    for v in views {
        if !order.contains(&v.comm_hash) {
            order.push(v.comm_hash);
        }
        let own = order.iter().position(|h| *h == v.comm_hash).expect("pushed") < max_comms;
        let s = if own {
            let comm = format!("{:#018x}", v.comm_hash);
            let rank = v.rank.to_string();
            out.push(Series {
                labels: format!("{base},{}", labels(&[("comm", &comm), ("rank", &rank)])),
                comm_label: comm,
                folded: false,
                views: Vec::new(),
                kinds: BTreeMap::new(),
            });
            out.last_mut().expect("pushed")
        } else {
            other.get_or_insert_with(|| Series {
                labels: format!("{base},comm=\"other\",rank=\"other\",pid=\"{pid}\""),
                comm_label: "other".into(),
                folded: true,
                views: Vec::new(),
                kinds: BTreeMap::new(),
            })
        };
        s.views.push(v);
        for k in v.kinds.iter().filter(|k| k.ops > 0) {
            let e = s.kinds.entry(k.func).or_insert(KindAcc {
                ops: 0,
                bytes: 0,
                timed: 0,
                dur_ns: 0,
                hist: [0; BUCKETS],
                ..*k
            });
            merge(e, k);
        }
    }
    out.extend(other);
    out
}

/// Renders every family. `func_name` resolves interned function ids; `now_real_ns`
/// is the epoch time of this refresh.
pub fn render(w: &Writer, views: &[HandleView], func_name: &dyn Fn(u32) -> String, now_real_ns: u64) -> String {
    let cfg = config();
    let mut o = Out { text: String::with_capacity(16 << 10) };
    let base = labels(&[("job", &w.job), ("host", &w.host)]);
    let ss = series(&base, views, cfg.prom_max_comms, w.pid);
    let kind_name = |f: u32| match f {
        OTHER_FUNC => "other".to_string(),
        0 => "unknown".to_string(),
        f => Some(func_name(f)).filter(|n| !n.is_empty()).unwrap_or_else(|| "unknown".into()),
    };

    o.family("commlens_ops_total", "counter", "NCCL operations completed, per communicator, rank and kind.");
    for s in &ss {
        for (f, k) in &s.kinds {
            o.sample("commlens_ops_total", &s.labels, &[("kind", &kind_name(*f))], k.ops as f64);
        }
    }
    o.family("commlens_bytes_total", "counter", "Payload bytes (count x datatype size) of the completed operations.");
    for s in &ss {
        for (f, k) in &s.kinds {
            o.sample("commlens_bytes_total", &s.labels, &[("kind", &kind_name(*f))], k.bytes as f64);
        }
    }
    o.family(
        "commlens_op_duration_seconds",
        "histogram",
        "Kernel time of completed operations (GPU timers, else the proxy's CPU view).",
    );
    for s in &ss {
        for (f, k) in &s.kinds {
            let kind = kind_name(*f);
            let mut cum = 0u64;
            for (i, n) in k.hist.iter().enumerate() {
                cum += n;
                let le = if i == FINITE_BUCKETS { "+Inf".to_string() } else { value(bucket_le_seconds(i)) };
                o.sample("commlens_op_duration_seconds_bucket", &s.labels, &[("kind", &kind), ("le", &le)], cum as f64);
            }
            o.sample("commlens_op_duration_seconds_sum", &s.labels, &[("kind", &kind)], k.dur_ns as f64 * 1e-9);
            o.sample("commlens_op_duration_seconds_count", &s.labels, &[("kind", &kind)], k.timed as f64);
        }
    }
    for (name, bus, help) in [
        (
            "commlens_algbw_bytes_per_second",
            false,
            "Algorithm bandwidth (nccl-tests convention): the last operation, and the mean and minimum over the last COMMLENS_PLUGIN_METRICS_WINDOW operations.",
        ),
        (
            "commlens_busbw_bytes_per_second",
            true,
            "Bus bandwidth (nccl-tests convention): the last operation, and the mean and minimum over the last COMMLENS_PLUGIN_METRICS_WINDOW operations.",
        ),
    ] {
        o.family(name, "gauge", help);
        for s in ss.iter().filter(|s| !s.folded) {
            let v = s.views[0];
            for f in s.kinds.keys() {
                let Some((last, mean, min)) = w.rolling(v.idx, *f).and_then(|r| r.stats(bus)) else { continue };
                let kind = kind_name(*f);
                for (stat, x) in [("last", last), ("window_mean", mean), ("window_min", min)] {
                    o.sample(name, &s.labels, &[("kind", &kind), ("stat", stat)], x);
                }
            }
        }
    }
    o.family("commlens_inflight_ops", "gauge", "Operations enqueued and not finished (pending or running).");
    for s in &ss {
        o.sample("commlens_inflight_ops", &s.labels, &[], s.views.iter().map(|v| v.open).sum::<u64>() as f64);
    }
    o.family("commlens_inflight_oldest_age_seconds", "gauge", "Age of the oldest operation in flight (0: none).");
    let mono = crate::sys::mono_ns();
    for s in &ss {
        let oldest = s.views.iter().filter_map(|v| v.oldest_enqueue).min();
        let age = oldest.map_or(0.0, |t| mono.saturating_sub(t) as f64 * 1e-9);
        o.sample("commlens_inflight_oldest_age_seconds", &s.labels, &[], age);
    }
    o.family(
        "commlens_hang_overdue_ops",
        "gauge",
        "Hang watchdog: operations in flight for longer than COMMLENS_PLUGIN_HANG_TIMEOUT_S.",
    );
    for s in &ss {
        o.sample("commlens_hang_overdue_ops", &s.labels, &[], s.views.iter().map(|v| v.overdue).sum::<u64>() as f64);
    }
    o.family("commlens_comm_info", "gauge", "One per communicator handle: its size, CUDA device and name.");
    for s in ss.iter().filter(|s| !s.folded) {
        let v = s.views[0];
        let dev = v.dev.map_or_else(|| "unknown".into(), |d| d.to_string());
        let name: String = v.name.chars().take(64).collect();
        let nranks = v.nranks.to_string();
        o.sample("commlens_comm_info", &s.labels, &[("nranks", &nranks), ("dev", &dev), ("name", &name)], 1.0);
    }
    slow_rank_families(&mut o, w, &base, &ss);
    process_families(&mut o, w, views, &base, now_real_ns);
    o.text
}

/// Reads one figure of the slow-rank rule's state of a handle.
type MemberField = fn(&crate::slow_rank::MemberState) -> Option<f64>;

fn slow_rank_families(o: &mut Out, w: &Writer, base: &str, ss: &[Series]) {
    let d = w.detector();
    o.family(
        "commlens_comm_local_ranks",
        "gauge",
        "Ranks of the communicator this process hosts (the slow-rank rule compares them).",
    );
    let mut seen = Vec::new();
    for s in ss.iter().filter(|s| !s.folded) {
        if !seen.contains(&s.comm_label) {
            // Per process: the processes of one host often host ranks of the same communicator.
            let l = format!("{base},comm=\"{}\",pid=\"{}\"", s.comm_label, w.pid);
            o.sample("commlens_comm_local_ranks", &l, &[], d.local_ranks(s.views[0].comm_hash) as f64);
            seen.push(s.comm_label.clone());
        }
    }
    let st = |s: &Series| d.member(s.views[0].idx);
    #[rustfmt::skip]
    let families: [(&str, &str, &str, MemberField); 6] = [
        ("commlens_rank_busbw_window_bytes_per_second", "gauge",
         "Slow-rank rule: the rank's busbw over its last full window (bus bytes over effective kernel time).",
         |m| m.busbw),
        ("commlens_rank_busbw_ratio", "gauge",
         "Slow-rank rule: window busbw over the median of the communicator's other ranks in this process.",
         |m| m.ratio),
        ("commlens_rank_low_windows", "gauge",
         "Slow-rank rule: consecutive windows below COMMLENS_PLUGIN_SLOW_FRACTION of the median.",
         |m| Some(m.low_run as f64)),
        ("commlens_rank_slow", "gauge",
         "Slow-rank rule: 1 while the rank is in a slow episode.",
         |m| Some(m.slow as u8 as f64)),
        ("commlens_rank_slow_episodes_total", "counter",
         "Slow-rank rule: slow episodes started.",
         |m| Some(m.episodes as f64)),
        ("commlens_rank_windows_total", "counter",
         "Slow-rank rule: windows judged.",
         |m| Some(m.windows as f64)),
    ];
    for (name, ty, help, get) in families {
        o.family(name, ty, help);
        for s in ss.iter().filter(|s| !s.folded) {
            if let Some(v) = st(s).and_then(get) {
                o.sample(name, &s.labels, &[], v);
            }
        }
    }
}

fn process_families(o: &mut Out, w: &Writer, views: &[HandleView], base: &str, now_real_ns: u64) {
    let cfg = config();
    let pid = w.pid.to_string();
    let p = format!("{base},pid=\"{pid}\"");
    o.family("commlens_hang_timeout_seconds", "gauge", "Hang watchdog: COMMLENS_PLUGIN_HANG_TIMEOUT_S (0: off).");
    o.sample("commlens_hang_timeout_seconds", &p, &[], cfg.hang_timeout_ns as f64 * 1e-9);
    o.family("commlens_hang_dumps_total", "counter", "Hang watchdog: in-flight dumps written, by trigger.");
    use crate::metrics::{DUMPS_REQUEST, DUMPS_SIGNAL, DUMPS_TIMEOUT, LAST_DUMP_NS};
    for (reason, c) in [("timeout", &DUMPS_TIMEOUT), ("signal", &DUMPS_SIGNAL), ("request", &DUMPS_REQUEST)] {
        o.sample("commlens_hang_dumps_total", &p, &[("reason", reason)], c.load(Ordering::Relaxed) as f64);
    }
    o.family(
        "commlens_hang_last_dump_timestamp_seconds",
        "gauge",
        "Hang watchdog: time of the last in-flight dump (0: none).",
    );
    o.sample("commlens_hang_last_dump_timestamp_seconds", &p, &[], LAST_DUMP_NS.load(Ordering::Relaxed) as f64 * 1e-9);
    let folded = {
        let mut hashes: Vec<u64> = Vec::new();
        views
            .iter()
            .filter(|v| {
                if !hashes.contains(&v.comm_hash) {
                    hashes.push(v.comm_hash);
                }
                hashes.iter().position(|h| *h == v.comm_hash).expect("pushed") >= cfg.prom_max_comms
            })
            .count()
    };
    o.family(
        "commlens_comms_folded",
        "gauge",
        "Communicator handles beyond COMMLENS_PLUGIN_PROM_MAX_COMMS, summed into comm=\"other\".",
    );
    o.sample("commlens_comms_folded", &p, &[], folded as f64);
    o.family(
        "commlens_metrics_samples_lost_total",
        "counter",
        "Completed operations the metrics writer did not see in time (rolling windows only; counters are exact).",
    );
    o.sample("commlens_metrics_samples_lost_total", &p, &[], views.iter().map(|v| v.lost_samples).sum::<u64>() as f64);
    o.family("commlens_metrics_writes_total", "counter", "Metrics refreshes by this process.");
    o.sample("commlens_metrics_writes_total", &p, &[], (w.writes + 1) as f64);
    o.family(
        "commlens_metrics_last_write_timestamp_seconds",
        "gauge",
        "Time of this refresh (staleness: time() minus this).",
    );
    o.sample("commlens_metrics_last_write_timestamp_seconds", &p, &[], now_real_ns as f64 * 1e-9);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::KIND_SLOTS;

    fn view(idx: u32, comm_hash: u64, rank: i32, ops: u64) -> HandleView {
        let mut kinds =
            [KindAcc { func: 0, p2p: false, ops: 0, bytes: 0, timed: 0, dur_ns: 0, hist: [0; BUCKETS] }; KIND_SLOTS];
        kinds[0] = KindAcc { func: 7, ops, bytes: ops * 10, timed: ops, dur_ns: ops * 1000, ..kinds[0] };
        kinds[0].hist[0] = ops;
        #[rustfmt::skip]
        let v = HandleView {
            idx, comm_hash, rank, nranks: 2, dev: Some(rank), name: "c".into(), kinds, samples: Vec::new(),
            lost_samples: 0, open: 1, oldest_enqueue: Some(5), overdue: 0,
        };
        v
    }

    #[test]
    fn communicators_beyond_the_cap_are_folded_into_other() {
        let views = [view(1, 0xA, 0, 3), view(2, 0xA, 1, 4), view(3, 0xB, 0, 5), view(4, 0xC, 1, 6)];
        let ss = series("job=\"j\"", &views, 1, 77);
        assert_eq!(ss.len(), 3, "two handles of the first communicator, then one folded series");
        assert_eq!(ss[0].labels, "job=\"j\",comm=\"0x000000000000000a\",rank=\"0\"");
        let other = &ss[2];
        assert!(other.folded && other.labels.ends_with("comm=\"other\",rank=\"other\",pid=\"77\""));
        assert_eq!(other.views.len(), 2);
        let k = other.kinds[&7];
        assert_eq!((k.ops, k.bytes, k.timed, k.hist[0]), (11, 110, 11, 11), "counters of folded handles are summed");
        assert_eq!(series("", &views, 32, 77).len(), 4, "under the cap every handle has its own series");
    }

    #[test]
    fn escapes_and_special_values() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!((value(f64::INFINITY), value(f64::NAN), value(0.25)), ("+Inf".into(), "NaN".into(), "0.25".into()));
        assert_eq!(labels(&[("job", "j\"1"), ("host", "h")]), "job=\"j\\\"1\",host=\"h\"");
    }
}
