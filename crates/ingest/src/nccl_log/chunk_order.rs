//! The in-order side of the parallel reader ([`super::chunked`]): chunks
//! parsed on their own are joined one after the other, in file order, into
//! the true parser: folded ([`LogParser::absorb`]) when the join can do it
//! exactly, else read again line by line by the true parser. At the end the
//! true parser finishes and gives the file's table and report.

use super::chunked::{ChunkedRead, Job, Parsed};
use super::LogParser;
use crate::error::IngestError;
use crate::nccl_tests::TableScan;
use crate::lines_mapped::{MappedLines, DEFAULT_WINDOW};
use commlens_core::CollOp;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where a worker leaves a finished chunk's parse (or its error) for the join.
pub(super) type ChunkSlot<S> = Mutex<Option<Result<Parsed<S>, IngestError>>>;

/// The join's state: the true parser (the first chunk's) and what the
/// chunks joined so far gave.
pub(super) struct Joiner<S> {
    truth: Option<LogParser>,
    parts: Vec<(S, Option<super::ChunkMaps>)>,
    /// Folds what the join's own parser emits (released queues, re-read chunks).
    state: S,
    per_dev: Vec<Vec<CollOp>>,
    lines: u64,
    overlong: u64,
    replayed: usize,
    reasons: Vec<(&'static str, usize)>,
    first_nccl: Option<u64>,
    first_line: Option<String>,
    error: Option<IngestError>,
    /// The next chunk to join.
    next: usize,
    /// The file's nccl-tests tables, when read too: fed each chunk's kept lines in order.
    bench: Option<TableScan>,
}

impl<S> Joiner<S> {
    pub(super) fn new(state: S, bench: Option<TableScan>) -> Self {
        Joiner {
            truth: None,
            parts: Vec::new(),
            state,
            per_dev: Vec::new(),
            lines: 0,
            overlong: 0,
            replayed: 0,
            reasons: Vec::new(),
            first_nccl: None,
            first_line: None,
            error: None,
            next: 0,
            bench,
        }
    }

    /// Joins the chunks waiting in `slots` from the next one on, while they
    /// are there; `joined` is told how far it got, `stop` of an error.
    /// Returns how many it joined.
    pub(super) fn join_ready<M, F>(
        &mut self,
        job: &Job<M, F>,
        slots: &[ChunkSlot<S>],
        joined: &AtomicUsize,
        stop: &AtomicBool,
    ) -> usize
    where
        M: Fn() -> S,
        F: Fn(&mut S, &CollOp),
    {
        let from = self.next;
        while self.error.is_none() && self.next < slots.len() {
            let Some(parsed) = slots[self.next].lock().expect("slot").take() else {
                break;
            };
            if let Err(e) = parsed.and_then(|p| self.join_one(job, p)) {
                self.error = Some(e);
                stop.store(true, Ordering::SeqCst);
                break;
            }
            self.next += 1;
            joined.store(self.next, Ordering::SeqCst);
        }
        self.next - from
    }

    fn join_one<M, F>(&mut self, job: &Job<M, F>, p: Parsed<S>) -> Result<(), IngestError>
    where
        M: Fn() -> S,
        F: Fn(&mut S, &CollOp),
    {
        let offset = self.lines;
        if let Some(b) = self.bench.as_mut() {
            let mut kept = p.bench;
            kept.replay(b, offset);
            kept.clear();
            job.spare_bench.lock().expect("spare").push(kept);
        }
        self.lines += p.lines;
        self.overlong += p.overlong;
        let (state, per_dev, keep) = (&mut self.state, &mut self.per_dev, job.keep_ops);
        let mut sink = |op: CollOp| {
            (job.per_op)(state, &op);
            if keep {
                store(per_dev, op);
            }
        };
        let Some(t) = self.truth.as_mut() else {
            self.first_line = p.first_line;
            self.first_nccl = p.first_nccl;
            // Parsed as the sequential reader parses (no speculation): its
            // state is the true one as it is (its threads' `ThreadSpec`
            // records are never read on the true side).
            self.truth = Some(p.parser);
            p.ops.into_iter().for_each(|op| store(per_dev, op));
            self.parts.push((p.state, None));
            return Ok(());
        };
        let mut spares = Vec::new();
        let folded = t.absorb(p.parser, offset, &mut sink, &mut spares);
        if !spares.is_empty() {
            let mut pool = job.spare_queues.lock().expect("spare queues");
            let room = super::chunk_join::MAX_SPARE_QUEUES.saturating_sub(pool.len());
            pool.extend(spares.into_iter().take(room));
        }
        match folded {
            Ok(maps) => {
                self.first_nccl = self.first_nccl.or(p.first_nccl.map(|l| l + offset));
                p.ops.into_iter().for_each(|op| store(per_dev, maps.op(op)));
                self.parts.push((p.state, Some(maps)));
            }
            Err(why) => {
                // Read again, line by line, after everything before it.
                self.replayed += 1;
                if super::chunk_trace::enabled() {
                    eprintln!("chunk trace: chunk {} read again by the join: {why}", self.next);
                }
                match self.reasons.iter_mut().find(|r| r.0 == why) {
                    Some(r) => r.1 += 1,
                    None => self.reasons.push((why, 1)),
                }
                let io_err = |e| IngestError::Io {
                    path: job.path.to_path_buf(),
                    source: e,
                };
                let (start, end) = job.ranges[self.next];
                let src = match &job.shared {
                    Some(m) => MappedLines::open_shared(job.path, m, job.opts.max_line, DEFAULT_WINDOW, start, end),
                    None => MappedLines::open_range(job.path, job.opts.max_line, DEFAULT_WINDOW, start, end),
                };
                if let Some(mut src) = src.map_err(io_err)? {
                    let mut no = offset;
                    while let Some(line) = src.next_line().map_err(io_err)? {
                        // Every line handed out counts one (overlong pieces too).
                        no += 1;
                        let before = t.report.nccl_segments;
                        t.feed_line(line, no, &mut sink);
                        if self.first_nccl.is_none() && t.report.nccl_segments > before {
                            self.first_nccl = Some(no);
                        }
                    }
                }
                self.parts.push(((job.make)(), None));
            }
        }
        Ok(())
    }

    /// Ends the file: the true parser's end of input, the report's totals,
    /// the checks a sequential read makes (an NCCL log at all).
    pub(super) fn finish<M, F>(mut self, job: &Job<M, F>) -> Result<ChunkedRead<S>, IngestError>
    where
        M: Fn() -> S,
        F: Fn(&mut S, &CollOp),
    {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let path = job.path;
        let mut parser = self.truth.take().expect("at least two chunks");
        let (state, per_dev, keep) = (&mut self.state, &mut self.per_dev, job.keep_ops);
        parser.finish(&mut |op: CollOp| {
            (job.per_op)(state, &op);
            if keep {
                store(per_dev, op);
            }
        });
        self.parts.push((self.state, None));
        let not_nccl = |lines| IngestError::NotNcclLog {
            path: path.to_path_buf(),
            lines,
            first_line: self.first_line.clone(),
        };
        let sniff = job.opts.sniff_lines;
        if self.lines >= sniff && self.first_nccl.is_none_or(|l| l > sniff) {
            return Err(not_nccl(sniff));
        }
        let (mut table, mut report) = parser.into_table_report();
        report.path = path.display().to_string();
        report.bytes = job.ranges.last().map_or(0, |r| r.1);
        report.lines = self.lines;
        report.overlong_lines = self.overlong;
        if report.nccl_segments == 0 {
            return Err(not_nccl(self.lines));
        }
        if let (Some(scan), Some(b)) = (self.bench.take(), &job.opts.bench_tables) {
            b.put(path, scan);
        }
        table.sources.push(report.path.clone());
        if keep {
            let mut per_dev = self.per_dev;
            per_dev.resize_with(table.devices.len().max(per_dev.len()), Vec::new);
            for ops in &mut per_dev {
                // Chunks and the join emit in their own order; the file's is by line.
                ops.sort_by_key(|op| op.line);
            }
            table.per_rank = per_dev.into_iter().map(commlens_core::RankOps::from).collect();
        }
        Ok(ChunkedRead {
            table,
            report,
            parts: self.parts,
            chunks: job.ranges.len(),
            replayed: self.replayed,
            reasons: self.reasons,
        })
    }
}

fn store(per_dev: &mut Vec<Vec<CollOp>>, op: CollOp) {
    let d = op.dev.ix();
    if per_dev.len() <= d {
        per_dev.resize_with(d + 1, Vec::new);
    }
    per_dev[d].push(op);
}
