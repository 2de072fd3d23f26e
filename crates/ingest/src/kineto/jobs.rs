//! Which kernel traces belong to one job, and the message sizes a job's
//! network annotations imply.
//!
//! * **Jobs** ([`group_jobs`]): per-process trace files of one job run at the
//!   same time, so their capture spans (each file's own clock plus its
//!   session start, Kineto `baseTimeNanoseconds` / nsys
//!   `TARGET_INFO_SESSION_START_TIME`) overlap. Traces whose spans do not
//!   overlap, or that state different world sizes, are different jobs.
//!   Traces without a base time cannot be placed and join the first job.
//! * **Sizes from network bytes** ([`ring_sizes`]): a ring AllReduce of `S`
//!   bytes over `n` ranks makes every rank send (and receive) `2(n−1)/n × S`
//!   bytes to (from) its ring neighbours. When the `nccl_nvtx` fork's marks
//!   give each rank's network bytes per kernel, `S = bytes × n / (2(n−1))`.
//!   This holds only when every channel of the rank's ring crosses the
//!   network, so a size is taken only when every rank of the job that moved
//!   network bytes during the `i`-th AllReduce implies the same `S`, a
//!   whole number of elements; otherwise it stays unknown.

use super::trace::KernelTrace;
use commlens_core::OpKind;

/// One job: indices into the traces, and its capture span in epoch ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub traces: Vec<usize>,
    pub start_ns: Option<i64>,
}

/// Epoch-ns span of a trace's NCCL kernels and CPU collectives; `None`
/// without a base time or events.
fn span(t: &KernelTrace) -> Option<(i64, i64)> {
    if t.base_time_ns == 0 {
        return None;
    }
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    for r in &t.ranks {
        for k in &r.kernels {
            lo = lo.min(k.start_ns);
            hi = hi.max(k.end_ns);
        }
        for c in &r.cpu_ops {
            lo = lo.min(c.ts_ns);
            hi = hi.max(c.ts_ns + c.dur_ns);
        }
    }
    (lo <= hi).then(|| (t.base_time_ns.saturating_add(lo), t.base_time_ns.saturating_add(hi)))
}

/// Groups traces into jobs (see the module doc), in order of first trace.
pub fn group_jobs(traces: &[KernelTrace]) -> Vec<Job> {
    let spans: Vec<Option<(i64, i64)>> = traces.iter().map(span).collect();
    // Sweep the placed traces in start order: an overlap joins the group.
    let mut order: Vec<usize> = (0..traces.len()).filter(|&i| spans[i].is_some()).collect();
    order.sort_by_key(|&i| spans[i].map(|s| s.0));
    let mut group = vec![usize::MAX; traces.len()];
    let mut groups: Vec<(i64, i64, Option<u32>)> = Vec::new();
    for &i in &order {
        let (lo, hi) = spans[i].expect("placed");
        let ws = traces[i].world_size;
        let joined = groups
            .iter()
            .position(|&(glo, ghi, gws)| lo <= ghi && glo <= hi && (ws.is_none() || gws.is_none() || ws == gws));
        match joined {
            Some(g) => {
                let e = &mut groups[g];
                e.1 = e.1.max(hi);
                e.2 = e.2.or(ws);
                group[i] = g;
            }
            None => {
                groups.push((lo, hi, ws));
                group[i] = groups.len() - 1;
            }
        }
    }
    // Unplaced traces join the first group (or make one).
    let mut jobs: Vec<Job> = Vec::new();
    let mut index_of: Vec<Option<usize>> = vec![None; groups.len().max(1)];
    for (i, &g) in group.iter().enumerate() {
        let g = if g == usize::MAX { 0 } else { g };
        let j = *index_of[g].get_or_insert_with(|| {
            jobs.push(Job { traces: Vec::new(), start_ns: groups.get(g).map(|e| e.0) });
            jobs.len() - 1
        });
        jobs[j].traces.push(i);
    }
    jobs
}

/// The warning for a set of traces that holds several jobs: every job named
/// by its files and start time.
pub fn jobs_warning(traces: &[KernelTrace], jobs: &[Job]) -> Option<String> {
    if jobs.len() < 2 {
        return None;
    }
    let mut w = format!(
        "these {} trace files are {} separate jobs (their capture times do not overlap or their world sizes differ); \
         they are kept apart (each has its own ranks and communicators) but share the tables below:",
        traces.len(),
        jobs.len()
    );
    for (n, j) in jobs.iter().enumerate() {
        let ranks: usize = j.traces.iter().map(|&i| traces[i].ranks.len()).sum();
        let when = j.start_ns.map_or("time unknown".to_string(), utc);
        let files: Vec<&str> = j.traces.iter().map(|&i| file_name(&traces[i].path)).collect();
        w.push_str(&format!("\n  job {}: {ranks} rank(s), started {when}: {}", n + 1, files.join(", ")));
    }
    Some(w)
}

fn file_name(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

/// `YYYY-MM-DD HH:MM:SS UTC` of epoch nanoseconds (proleptic Gregorian).
pub(crate) fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date, counting in 400-year eras from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Message sizes (bytes) of the `i`-th ring AllReduce kernel of a job, per
/// the module doc: `sizes[i]` is `Some` when every rank with network bytes
/// agrees. `n` is the job's world size; `elem` the element size.
pub(crate) fn ring_sizes(traces: &[&KernelTrace], n: u32) -> Vec<Option<u64>> {
    if n < 2 {
        return Vec::new();
    }
    let n = n as u64;
    let mut agreed: Vec<Option<Option<u64>>> = Vec::new();
    for t in traces {
        for r in &t.ranks {
            let ring_ar = r.kernels.iter().filter(|k| {
                k.parsed.kind == Some(OpKind::AllReduce)
                    && k.parsed.algo == Some(commlens_core::Algorithm::Ring)
                    && k.cpu_op.is_none()
            });
            for (i, k) in ring_ar.enumerate() {
                let Some(net) = k.net else { continue };
                let moved = net.sent.max(net.received);
                if i >= agreed.len() {
                    agreed.resize(i + 1, None);
                }
                if moved == 0 {
                    continue;
                }
                let elem = k.parsed.dtype.and_then(|d| d.size_bytes()).unwrap_or(1);
                let num = moved.saturating_mul(n);
                let den = 2 * (n - 1);
                let est = (num % den == 0 && (num / den) % elem == 0).then_some(num / den);
                agreed[i] = Some(match agreed[i] {
                    None => est,
                    Some(prev) if prev == est => prev,
                    Some(_) => None,
                });
            }
        }
    }
    agreed.into_iter().map(|a| a.flatten()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2024-09-10T00:03:45Z (the DistributedSysLab capture's session start).
        assert_eq!(utc(1_725_926_625_822_664_173), "2024-09-10 00:03:45 UTC");
        assert_eq!(utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
    }
}
