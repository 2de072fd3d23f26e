//! The followed job: the plugin files of one folder (new ones picked up each
//! tick), what each has contributed since it started (operations, bytes and a
//! bus-bandwidth histogram per communicator handle and kind) and the operations
//! that finished in the recent window. One [`Job::tick`] polls every file for
//! its new bytes and derives a [`Snapshot`]: the recent operations are put in
//! an assembled table (the files' processes, devices and communicators as
//! `trace_to_table` gives them) and handed to `analyze::bandwidth` and
//! `analyze::straggler`, so the figures are those of `report`; the since-start
//! totals are summed over each logical communicator's handles.
//!
//! Memory is bounded by the window (operations kept at most
//! [`MAX_RECENT`] per file) and by the number of handles and kinds, not by the
//! job's length: the since-start medians come from log-spaced histograms
//! ([`BIN_RATIO`] wide, so within 0.05 % of the exact median).

use super::view::{CommView, DumpView, InFlightView, KindView, RankView, Snapshot};
use commlens_analyze::bandwidth::{self, BandwidthOptions, BusConvention};
use commlens_analyze::straggler::{analyze_stragglers, StragglerConfig};
use commlens_core::model::{CommIdx, LogicalCommIdx};
use commlens_core::{OpKind, OpTable};
use commlens_ingest::plugin_follow::{FinishedOp, Follower, Progress};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Recent operations kept per file at most (the oldest go first).
pub const MAX_RECENT: usize = 200_000;
/// Width of a busbw histogram bin: values within a factor of this share a bin.
const BIN_RATIO: f64 = 1.001;
/// Folder levels searched below the watched folder.
const MAX_DEPTH: usize = 3;

/// Since-start totals of one kind on one handle.
#[derive(Default, Clone)]
struct KindTotals {
    ops: u64,
    bytes: u64,
    unknown_size: u64,
    /// log(busbw)/log(BIN_RATIO), rounded → operations.
    busbw_bins: BTreeMap<i32, u64>,
}

impl KindTotals {
    fn add(&mut self, o: &KindTotals) {
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.unknown_size += o.unknown_size;
        for (b, n) in &o.busbw_bins {
            *self.busbw_bins.entry(*b).or_default() += n;
        }
    }

    /// The median as `bandwidth::Spread` takes it (mean of the middle two for an even count).
    fn median_busbw(&self) -> Option<f64> {
        let n: u64 = self.busbw_bins.values().sum();
        let value = |rank: u64| {
            let mut seen = 0;
            for (b, c) in &self.busbw_bins {
                seen += c;
                if seen > rank {
                    return BIN_RATIO.powi(*b);
                }
            }
            unreachable!("rank < total")
        };
        (n > 0).then(|| (value((n - 1) / 2) + value(n / 2)) / 2.0)
    }
}

/// One followed file.
struct Tracked {
    f: Follower,
    failed: bool,
    /// Since-start totals by handle position and kind.
    totals: Vec<BTreeMap<OpKind, KindTotals>>,
    recent: VecDeque<FinishedOp>,
    first_ns: Option<i64>,
}

impl Tracked {
    fn new(path: &Path) -> Tracked {
        Tracked {
            f: Follower::new(path),
            failed: false,
            totals: Vec::new(),
            recent: VecDeque::new(),
            first_ns: None,
        }
    }

    fn account(&mut self, done: Vec<FinishedOp>) {
        for d in done {
            let o = &d.op;
            let ci = o.comm.ix();
            if self.totals.len() <= ci {
                self.totals.resize_with(ci + 1, BTreeMap::new);
            }
            let n = self.f.comms().get(ci).map_or(1, |c| c.nranks.max(1) as u32);
            let k = self.totals[ci].entry(o.kind).or_default();
            k.ops += 1;
            match o.size() {
                Some(b) => k.bytes += b,
                None => k.unknown_size += 1,
            }
            if let (Some(span), Some(bytes)) = (o.gpu, o.size()) {
                let m = bandwidth::metrics(
                    o.kind,
                    bytes,
                    n,
                    o.algo,
                    span.end_ns - span.start_ns,
                    None,
                    BusConvention::NcclTests,
                );
                if let Some(bw) = m.busbw_gb_s.filter(|v| *v > 0.0) {
                    *k.busbw_bins
                        .entry((bw.ln() / BIN_RATIO.ln()).round() as i32)
                        .or_default() += 1;
                }
            }
            let start = o.cpu_ts_ns.unwrap_or(d.done_ns);
            self.first_ns = Some(self.first_ns.map_or(start, |f| f.min(start)));
            if self.recent.len() == MAX_RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(d);
        }
    }
}

pub struct Job {
    dir: PathBuf,
    window_ns: i64,
    files: Vec<Tracked>,
    /// Paths already followed, or looked at and found to be no plugin file.
    seen: HashSet<PathBuf>,
    dumps: Vec<PathBuf>,
    errors: Vec<String>,
    tick: u64,
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn looks_like_plugin_file(p: &Path) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && commlens_ingest::plugin_out::is_plugin_output(&head)
}

impl Job {
    pub fn new(dir: &Path, window_s: f64) -> Job {
        #[rustfmt::skip]
        let j = Job { dir: dir.to_path_buf(), window_ns: (window_s * 1e9) as i64, files: Vec::new(), seen: HashSet::new(),
            dumps: Vec::new(), errors: Vec::new(), tick: 0 };
        j
    }

    /// Files that could not be read (each named with its error).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// New plugin files and the hang dumps present. `.clp` files are followed
    /// from their first byte; other names are sniffed once, when they have 16 bytes.
    fn scan(&mut self, notes: &mut Vec<String>) -> Result<(), String> {
        let mut stack = vec![(self.dir.clone(), 0)];
        self.dumps.clear();
        let mut added = false;
        while let Some((d, depth)) = stack.pop() {
            let entries = match std::fs::read_dir(&d) {
                Ok(e) => e,
                Err(e) if d == self.dir => return Err(format!("{}: {e}", d.display())),
                Err(_) => continue,
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path();
                let Ok(ft) = e.file_type() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                if ft.is_dir() {
                    if depth + 1 < MAX_DEPTH {
                        stack.push((p, depth + 1));
                    }
                } else if name.starts_with("commlens-hang-") && name.ends_with(".json") {
                    self.dumps.push(p);
                } else if !self.seen.contains(&p) {
                    if name.ends_with(".clp") || looks_like_plugin_file(&p) {
                        notes.push(format!("following {}", p.display()));
                        self.files.push(Tracked::new(&p));
                        added = true;
                        self.seen.insert(p);
                    } else if std::fs::metadata(&p).is_ok_and(|m| m.len() >= 16) {
                        self.seen.insert(p);
                    }
                }
            }
        }
        if added {
            // Merge order as `load_plugin_outputs` (sorted paths): the same names and global ranks.
            self.files.sort_by(|a, b| a.f.path().cmp(b.f.path()));
        }
        self.dumps.sort();
        Ok(())
    }

    pub fn tick(&mut self) -> Snapshot {
        let began = std::time::Instant::now();
        let mut snap = self.tick_inner();
        snap.tick_ms = began.elapsed().as_secs_f64() * 1e3;
        snap
    }

    fn tick_inner(&mut self) -> Snapshot {
        self.tick += 1;
        let mut snap = Snapshot::new(self.tick, &self.dir, self.window_ns as f64 / 1e9);
        if let Err(e) = self.scan(&mut snap.notes) {
            snap.waiting = Some(format!("waiting for the folder: {e}"));
            return snap;
        }
        for t in self.files.iter_mut().filter(|t| !t.failed) {
            match t.f.poll() {
                Ok(Progress::Read { bytes }) => snap.new_bytes += bytes,
                Ok(Progress::Restarted { why, bytes }) => {
                    snap.notes.push(format!(
                        "{}: {why}; read again from its start",
                        t.f.path().display()
                    ));
                    snap.new_bytes += bytes;
                    (t.totals, t.recent, t.first_ns) = (Vec::new(), VecDeque::new(), None);
                }
                Ok(Progress::Gone) => snap.notes.push(format!(
                    "{}: removed (what was read stays)",
                    t.f.path().display()
                )),
                Ok(Progress::Unchanged) => {}
                Err(e) => {
                    t.failed = true;
                    self.errors.push(e.to_string());
                }
            }
            let done = t.f.take_finished();
            t.account(done);
        }
        snap.errors = self.errors.clone();
        snap.files = self.files.len();
        snap.bytes_read = self.files.iter().map(|t| t.f.bytes_read()).sum();
        snap.pending_bytes = self.files.iter().map(|t| t.f.pending_bytes()).sum();
        if self.files.iter().all(|t| t.f.header().is_none()) {
            snap.waiting = Some(format!(
                "no commlens plugin file (.clp) in {} yet",
                self.dir.display()
            ));
            return snap;
        }
        self.fill(&mut snap);
        snap
    }

    fn fill(&mut self, snap: &mut Snapshot) {
        let now = now_ns();
        let job_now = self.files.iter().filter_map(|t| t.f.last_ns()).max();
        if let Some(j) = job_now {
            let cut = j - self.window_ns;
            for t in &mut self.files {
                while t.recent.front().is_some_and(|d| d.done_ns < cut) {
                    t.recent.pop_front();
                }
            }
        }
        snap.last_activity_s = job_now.map(|j| (now - j) as f64 / 1e9);
        snap.files_ended = self.files.iter().filter(|t| t.f.ended()).count();
        // A file that failed ends nothing, but does not keep the view waiting either.
        snap.job_ended = snap.files > 0 && self.files.iter().all(|t| t.failed || t.f.ended());
        snap.dropped = self.files.iter().map(|t| t.f.counts().dropped).sum();
        let (table, owner) = self.recent_table();
        snap.ranks = table.devices.len();
        let start = self.files.iter().filter_map(|t| t.first_ns).min();
        let span_s = match (job_now, start) {
            (Some(j), Some(s)) => ((j - s) as f64 / 1e9).clamp(1e-3, self.window_ns as f64 / 1e9),
            _ => self.window_ns as f64 / 1e9,
        };
        self.comm_views(snap, &table, &owner, span_s);
        snap.slow_ranks = slow_ranks(table.clone());
        self.in_flight(snap, &table, &owner, now);
        snap.hang_dumps = self
            .dumps
            .iter()
            .map(|p| DumpView {
                file: p
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                age_s: std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .map(|d| d.as_secs_f64()),
            })
            .collect();
    }

    /// The assembled table of every file's handles with the recent operations,
    /// and for each merged handle its (file, handle position).
    fn recent_table(&mut self) -> (OpTable, HashMap<CommIdx, (usize, usize)>) {
        let mut parts = Vec::new();
        let mut which = Vec::new();
        for (fi, t) in self.files.iter_mut().enumerate() {
            let Some(sk) = t.f.skeleton() else { continue };
            let mut part = sk.clone();
            for d in &t.recent {
                let Some(dev) = part.comms.get(d.op.comm.ix()).and_then(|c| c.device) else {
                    continue;
                };
                let mut op = d.op.clone();
                op.dev = dev;
                if let Some(k) = d.coll_ordinal {
                    // Instances are matched on this (the same on every member), see `straggler`.
                    op.comm_seq = k;
                }
                part.per_rank[dev.ix()].push(op);
            }
            parts.push(part);
            which.push(fi);
        }
        let (mut table, remaps) = commlens_ingest::merge::merge_tables(parts);
        for ops in &mut table.per_rank {
            ops.sort_by_key(|o| o.line);
        }
        commlens_core::assemble::assemble(&mut table);
        let mut owner = HashMap::new();
        for (r, fi) in remaps.iter().zip(which) {
            for (ci, m) in r.comm.iter().enumerate() {
                owner.insert(*m, (fi, ci));
            }
        }
        (table, owner)
    }

    fn comm_views(
        &self,
        snap: &mut Snapshot,
        t: &OpTable,
        owner: &HashMap<CommIdx, (usize, usize)>,
        span_s: f64,
    ) {
        let bw = bandwidth::analyze(t, &BandwidthOptions::default());
        let recent: HashMap<(Option<LogicalCommIdx>, OpKind), (u64, Option<f64>)> = bw
            .comms
            .iter()
            .map(|r| ((r.comm, r.kind), (r.ops, r.busbw.map(|s| s.median))))
            .collect();
        // Recent operations per (logical communicator, kind), timed or not.
        let mut recent_ops: HashMap<(LogicalCommIdx, OpKind), u64> = HashMap::new();
        for op in t.ops() {
            if let Some(l) = t.comms[op.comm.ix()].logical {
                *recent_ops.entry((l, op.kind)).or_default() += 1;
            }
        }
        for (li, l) in t.logical.iter().enumerate() {
            let li = LogicalCommIdx(li as u32);
            let mut kinds: BTreeMap<OpKind, KindTotals> = BTreeMap::new();
            for m in &l.members {
                let Some(&(fi, ci)) = owner.get(m) else {
                    continue;
                };
                for (k, tot) in self.files[fi].totals.get(ci).into_iter().flatten() {
                    kinds.entry(*k).or_default().add(tot);
                }
            }
            let mut v = CommView {
                name: l.name.clone(),
                comm_id: l.comm_id.map(|c| format!("{c:#018x}")),
                nranks: l.nranks,
                members_seen: l.members.len(),
                ..CommView::default()
            };
            let members = l.members.len().max(1) as f64;
            for (kind, tot) in kinds {
                let now_ops = recent_ops.get(&(li, kind)).copied().unwrap_or(0);
                v.ops += tot.ops;
                v.bytes += tot.bytes;
                v.unknown_size += tot.unknown_size;
                v.calls_per_s += now_ops as f64 / members / span_s;
                v.kinds.push(KindView {
                    kind: kind.name().to_string(),
                    ops: tot.ops,
                    bytes: tot.bytes,
                    recent_ops: now_ops,
                    busbw_recent_gb_s: recent.get(&(Some(li), kind)).and_then(|r| r.1),
                    busbw_gb_s: tot.median_busbw(),
                });
            }
            snap.ops += v.ops;
            if v.ops > 0 {
                snap.comms.push(v);
            }
        }
    }

    fn in_flight(
        &self,
        snap: &mut Snapshot,
        t: &OpTable,
        owner: &HashMap<CommIdx, (usize, usize)>,
        now: i64,
    ) {
        let handle: HashMap<(usize, usize), CommIdx> =
            owner.iter().map(|(c, i)| (*i, *c)).collect();
        let mut oldest: Option<(i64, usize, commlens_ingest::plugin_follow::InFlightOp)> = None;
        for (fi, f) in self.files.iter().enumerate() {
            for o in f.f.in_flight() {
                snap.in_flight += 1;
                if oldest.as_ref().is_none_or(|x| o.start_ns < x.0) {
                    oldest = Some((o.start_ns, fi, o));
                }
            }
        }
        snap.oldest_in_flight = oldest.map(|(start, fi, o)| {
            let c = handle
                .get(&(fi, o.comm as usize - 1))
                .map(|c| &t.comms[c.ix()]);
            let dev = c.and_then(|c| c.device).map(|d| &t.devices[d.ix()]);
            let proc = dev.map(|d| &t.processes[d.proc.ix()]);
            InFlightView {
                kind: o
                    .kind
                    .map_or_else(|| "?".to_string(), |k| k.name().to_string()),
                comm: c.and_then(|c| c.logical).map_or_else(
                    || format!("#{}", o.comm),
                    |l| t.logical[l.ix()].name.clone(),
                ),
                rank: dev.and_then(|d| d.global_rank),
                comm_rank: c.and_then(|c| c.rank),
                host: proc.map_or_else(String::new, |p| p.host.clone()),
                pid: proc.map_or(0, |p| p.pid),
                seq: o.seq,
                nccl_seq: o.nccl_seq,
                age_s: (now - start) as f64 / 1e9,
                running: o.running,
                channels_done: o.channels_done,
                channels: o.channels,
                file: self.files[fi].f.path().display().to_string(),
            }
        });
    }
}

/// The ranks that look slowest over the recent collectives: flagged slow
/// windows first, then the lowest busbw against their peers, then the ranks
/// most often last to arrive (`analyze::straggler` on the window).
fn slow_ranks(mut t: OpTable) -> Vec<RankView> {
    for ops in &mut t.per_rank {
        ops.retain(|o| !o.kind.is_p2p());
    }
    let cfg = StragglerConfig {
        window: 4,
        worst: 0,
        ..StragglerConfig::default()
    };
    let r = analyze_stragglers(&t, &cfg);
    let mut rows: Vec<RankView> = r
        .ranks
        .iter()
        .map(|s| {
            let worst = r
                .slow
                .iter()
                .filter(|w| w.dev == s.dev)
                .min_by(|a, b| a.min_ratio.total_cmp(&b.min_ratio));
            let d = &t.devices[s.dev.ix()];
            let p = &t.processes[d.proc.ix()];
            RankView {
                rank: s.global_rank,
                host: p.host.clone(),
                pid: p.pid,
                cuda_dev: d.cuda_dev,
                instances: s.instances,
                last_share: s.last_share,
                mean_lateness_ns: s.mean_lateness_ns,
                mean_wait_ns: s.mean_wait_ns,
                busbw_ratio: worst.map(|w| w.min_ratio),
                comm: worst.map(|w| t.logical[w.comm.ix()].name.clone()),
                flagged: worst.is_some_and(|w| w.flagged),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.flagged
            .cmp(&a.flagged)
            .then(
                a.busbw_ratio
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&b.busbw_ratio.unwrap_or(f64::INFINITY)),
            )
            .then(b.last_share.total_cmp(&a.last_share))
            .then(b.mean_lateness_ns.total_cmp(&a.mean_lateness_ns))
    });
    rows
}
