//! Devices and communicator handles in the reader's state machine: found or
//! added per process, filled from init lines (rank, size, device, commId,
//! phase), and given their ring, tree and connection lines, which a thread
//! prints while it initializes a communicator (held back until the thread names
//! it). Init's tuning lines (search graphs, `threadThresholds`, the
//! latency/bandwidth table that rank 0 prints) go the same way into the
//! communicator's [`TuningInfo`]. See [`super::state`].

use super::init::{self, ChannelLine, InitPhase, TuningInitLine};
use super::state::{LogParser, ThreadState, SAMPLE_CHARS};
use crate::bytes::sample;
use commlens_core::model::{CommMember, Device, DevIdx, ProcIdx};
use commlens_core::tuning::{TuningCell, TuningInfo};
use commlens_core::{Algorithm, CommIdx, Protocol};

/// Bounds on what one communicator keeps of init's tuning lines.
const MAX_GRAPHS: usize = 64;
const MAX_CELLS: usize = 4096;
const MAX_THREAD_ENTRIES: usize = 1024;
/// Bounds on a communicator's connections and tree channels, and on the
/// channel lines a thread holds back.
const MAX_CONNECTIONS: usize = 4096;
const MAX_TREES: usize = 1024;
pub(super) const MAX_BACKLOG: usize = 4096;

/// Columns (algorithm × protocol) of the tuning-table block a thread is printing.
pub(super) struct TableColumns {
    algos: Vec<Algorithm>,
    cols: Vec<(Algorithm, Protocol)>,
}

impl TableColumns {
    /// After an `Algorithm` line: NCCL's three protocols per algorithm until
    /// the `Protocol` line names them.
    fn of_algorithms(algos: Vec<Algorithm>) -> TableColumns {
        let mut c = TableColumns { algos, cols: Vec::new() };
        c.set_protocols(&[Protocol::Ll, Protocol::Ll128, Protocol::Simple]);
        c
    }

    /// The `Protocol` line repeats the protocols for three algorithms even
    /// when the block has fewer (`PAT` alone): one period is the list.
    fn set_protocols(&mut self, p: &[Protocol]) {
        let period = p.iter().skip(1).position(|x| Some(x) == p.first()).map_or(p.len(), |i| i + 1);
        self.cols = self.algos.iter().flat_map(|&a| p[..period].iter().map(move |&q| (a, q))).collect();
    }
}

impl LogParser {
    pub(super) fn device(&mut self, proc: ProcIdx, cuda_dev: Option<u32>) -> DevIdx {
        let key = cuda_dev.unwrap_or(u32::MAX);
        if let Some(&d) = self.procs[proc.ix()].devices.get(&key) {
            return d;
        }
        let d = DevIdx(self.table.devices.len() as u32);
        self.table.devices.push(Device {
            proc,
            cuda_dev,
            nvml_dev: None,
            bus_id: None,
            global_rank: None,
            local_rank: None,
        });
        self.procs[proc.ix()].devices.insert(key, d);
        d
    }

    /// The communicator of handle `ptr` in `proc`, added when new. The two
    /// last answers are remembered (a thread's operations alternate between
    /// few handles, and a handle's index never changes).
    #[inline]
    pub(super) fn comm(&mut self, proc: ProcIdx, ptr: u64) -> CommIdx {
        // Inlined (every operation asks): the two remembered answers first.
        let key = Some((proc.0, ptr));
        if self.recent_comms[0].0 == key {
            return self.recent_comms[0].1;
        }
        if self.recent_comms[1].0 == key {
            let c = self.recent_comms[1].1;
            self.recent_comms.swap(0, 1);
            return c;
        }
        self.comm_lookup(proc, ptr)
    }

    /// [`LogParser::comm`] when the handle is not one of the last two.
    #[inline(never)]
    fn comm_lookup(&mut self, proc: ProcIdx, ptr: u64) -> CommIdx {
        let key = (proc.0, ptr);
        let c = match self.procs[proc.ix()].comms.get(&ptr) {
            Some(&c) => c,
            None => {
                let c = CommIdx(self.table.comms.len() as u32);
                self.table.comms.push(CommMember::new(proc, ptr));
                if let Some(s) = self.spec.as_mut() {
                    s.comms.push(Default::default());
                }
                self.procs[proc.ix()].comms.insert(ptr, c);
                c
            }
        };
        self.recent_comms = [(Some(key), c), self.recent_comms[0]];
        c
    }

    pub(super) fn comm_line(&mut self, proc: ProcIdx, tid: u32, l: &init::CommLine) {
        let c = self.comm(proc, l.comm);
        self.note_init(Some(c));
        self.note_comm_line(c, l.cuda_dev, l.nranks.is_some());
        if let Some(dev) = l.cuda_dev {
            let d = self.device(proc, Some(dev));
            let device = &mut self.table.devices[d.ix()];
            device.nvml_dev = device.nvml_dev.or(l.nvml_dev);
            device.bus_id = device.bus_id.or(l.bus_id);
            self.table.comms[c.ix()].device = Some(d);
        }
        let m = &mut self.table.comms[c.ix()];
        m.rank = l.rank.or(m.rank);
        m.nranks = l.nranks.or(m.nranks);
        m.comm_id = l.comm_id.or(m.comm_id);
        m.split = l.split.or(m.split);
        m.n_nodes = l.n_nodes.or(m.n_nodes);
        m.local_ranks = l.local_ranks.or(m.local_ranks);
        m.local_rank = l.local_rank.or(m.local_rank);
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        thread.init_touched = true;
        if thread.spec.first_comm.is_none() {
            // Where the thread's earlier lines went (the chunk join's question).
            let m = &self.table.comms[c.ix()];
            thread.spec.first_comm = Some(super::chunk_join::FirstComm {
                comm: c,
                fresh: m.rings.is_empty() && m.connections.is_empty() && m.trees.is_empty() && m.tuning.is_none(),
                pre_empty: thread.init_backlog.is_empty() && thread.tuning_backlog.is_none(),
                held: thread.init_backlog.len() as u32,
            });
        }
        if l.phase == Some(InitPhase::Complete) {
            self.table.comms[c.ix()].init_complete = true;
            thread.init_comm = None;
            thread.tuning_columns = None;
            thread.spec.columns_set = true;
        } else {
            thread.init_comm = Some(c);
        }
        let backlog = std::mem::take(&mut thread.init_backlog);
        let m = &mut self.table.comms[c.ix()];
        for ch in backlog {
            attach_channel_line(m, ch);
        }
        if let Some(earlier) = thread.tuning_backlog.take() {
            prepend_tuning(&mut m.tuning, earlier);
        }
    }

    /// A search-graph, `threadThresholds` or tuning-table line of the thread's
    /// init: into its communicator's [`TuningInfo`], or held back until the
    /// thread names one. Table rows take their columns from the block's
    /// `Algorithm`/`Protocol` (or old `Latency/AlgBw`) lines; a row that does
    /// not fit them is malformed.
    pub(super) fn tuning_init_line(&mut self, proc: ProcIdx, tid: u32, line: TuningInitLine, msg: &[u8], line_no: u64) {
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        thread.init_touched = true;
        let target = thread.init_comm;
        self.note_init(target);
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        let comms = &mut self.table.comms;
        // Lines read with columns set before the chunk (the chunk join's question).
        let header = matches!(line, TuningInitLine::Algorithms(_) | TuningInitLine::Columns(_));
        let reads_columns = matches!(line, TuningInitLine::Protocols(_) | TuningInitLine::MaxThreads(_) | TuningInitLine::Row { .. });
        thread.spec.columns_used_unset |= reads_columns && !thread.spec.columns_set;
        thread.spec.columns_set |= header;
        match line {
            TuningInitLine::Algorithms(algos) => thread.tuning_columns = Some(Box::new(TableColumns::of_algorithms(algos))),
            TuningInitLine::Columns(cols) => thread.tuning_columns = Some(Box::new(TableColumns { algos: Vec::new(), cols })),
            TuningInitLine::Protocols(p) => match thread.tuning_columns.as_mut() {
                Some(c) if !c.algos.is_empty() => c.set_protocols(&p),
                _ => return self.report.malformed.add(init::MALFORMED_TABLE, line_no, || sample(msg, SAMPLE_CHARS)),
            },
            TuningInitLine::MaxThreads(v) => {
                let Some(cols) = fits(thread, v.len()) else {
                    return self.report.malformed.add(init::MALFORMED_TABLE, line_no, || sample(msg, SAMPLE_CHARS));
                };
                let entries: Vec<_> = cols.iter().zip(v).map(|(&(a, p), n)| (a, p, n)).collect();
                let t = tuning_target(thread, comms);
                let room = MAX_THREAD_ENTRIES.saturating_sub(t.max_threads.len());
                t.max_threads.extend(entries.into_iter().take(room));
            }
            TuningInitLine::Row { kind, cells } => {
                let Some(cols) = fits(thread, cells.len()) else {
                    return self.report.malformed.add(init::MALFORMED_TABLE, line_no, || sample(msg, SAMPLE_CHARS));
                };
                let row: Vec<TuningCell> = cols
                    .iter()
                    .zip(cells)
                    .map(|(&(algo, proto), (latency_us, bw_gb_s))| TuningCell { kind, algo, proto, latency_us, bw_gb_s })
                    .collect();
                let t = tuning_target(thread, comms);
                let room = MAX_CELLS.saturating_sub(t.table.len());
                t.table.extend(row.into_iter().take(room));
            }
            TuningInitLine::Graph(mut g) => {
                g.line = line_no;
                let t = tuning_target(thread, comms);
                if t.graphs.len() < MAX_GRAPHS {
                    t.graphs.push(g);
                }
            }
            TuningInitLine::ThreadThresholds(v) => tuning_target(thread, comms).thread_thresholds = v,
        }
        self.report.tuning_init_lines += 1;
    }

    pub(super) fn channel_line(&mut self, proc: ProcIdx, tid: u32, ch: ChannelLine) {
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        thread.init_touched = true;
        let target = thread.init_comm;
        self.note_init(target);
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        match thread.init_comm {
            Some(c) => attach_channel_line(&mut self.table.comms[c.ix()], ch),
            None if thread.init_backlog.len() < MAX_BACKLOG => thread.init_backlog.push(ch),
            None => {}
        }
    }
}

/// The columns of the thread's table block, when a line of `n` cells fits them.
fn fits(thread: &ThreadState, n: usize) -> Option<&[(Algorithm, Protocol)]> {
    thread.tuning_columns.as_ref().filter(|c| c.cols.len() == n).map(|c| &c.cols[..])
}

/// Where a thread's init tuning line goes: its communicator, else its backlog.
fn tuning_target<'a>(thread: &'a mut ThreadState, comms: &'a mut [CommMember]) -> &'a mut TuningInfo {
    match thread.init_comm {
        Some(c) => comms[c.ix()].tuning.get_or_insert_with(Default::default),
        None => thread.tuning_backlog.get_or_insert_with(Default::default),
    }
}

/// Puts what a thread printed before it named the communicator ahead of what
/// the communicator already holds (print order).
pub(super) fn prepend_tuning(slot: &mut Option<Box<TuningInfo>>, earlier: Box<TuningInfo>) {
    let Some(later) = slot.as_mut() else {
        *slot = Some(earlier);
        return;
    };
    let later = std::mem::replace(&mut **later, *earlier);
    let t = slot.as_mut().expect("just set");
    t.graphs.extend(later.graphs);
    t.graphs.truncate(MAX_GRAPHS);
    if !later.thread_thresholds.is_empty() {
        t.thread_thresholds = later.thread_thresholds;
    }
    t.table.extend(later.table);
    t.table.truncate(MAX_CELLS);
    t.max_threads.extend(later.max_threads);
    t.max_threads.truncate(MAX_THREAD_ENTRIES);
}

/// Puts the channel lines a thread printed before it named the communicator
/// (`earlier`) ahead of what `m` holds, as if attached first.
pub(super) fn prepend_channel_lines(m: &mut CommMember, earlier: Vec<ChannelLine>) {
    if earlier.is_empty() {
        return;
    }
    let mut base = CommMember::new(m.proc, m.ptr);
    for ch in earlier {
        attach_channel_line(&mut base, ch);
    }
    append_channels(&mut base, m);
    m.rings = base.rings;
    m.connections = base.connections;
    m.trees = base.trees;
}

/// Moves the channel data of `later` after what `m` holds, as if its lines
/// were attached after `m`'s: later ring orders win, connections follow, a
/// tree channel keeps its first line.
pub(super) fn append_channels(m: &mut CommMember, later: &mut CommMember) {
    let rings = std::mem::take(&mut later.rings);
    if m.rings.len() < rings.len() {
        m.rings.resize(rings.len(), Vec::new());
    }
    // A ring order is never empty: an empty slot was never set.
    for (c, ranks) in rings.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        m.rings[c] = ranks;
    }
    m.connections.extend(std::mem::take(&mut later.connections));
    m.connections.truncate(MAX_CONNECTIONS);
    for tc in std::mem::take(&mut later.trees) {
        if !m.trees.iter().any(|x| x.channel == tc.channel) && m.trees.len() < MAX_TREES {
            m.trees.push(tc);
        }
    }
}

pub(super) fn attach_channel_line(m: &mut CommMember, ch: ChannelLine) {
    match ch {
        ChannelLine::RingOrder { channel, ranks } => {
            let c = channel as usize;
            if c < 1024 {
                if m.rings.len() <= c {
                    m.rings.resize(c + 1, Vec::new());
                }
                m.rings[c] = ranks;
            }
        }
        ChannelLine::Connection(conn) => {
            if m.connections.len() < MAX_CONNECTIONS {
                m.connections.push(conn)
            }
        }
        ChannelLine::Trees(t) => {
            for tc in t {
                if !m.trees.iter().any(|x| x.channel == tc.channel) && m.trees.len() < MAX_TREES {
                    m.trees.push(tc);
                }
            }
        }
        ChannelLine::RingNeighbors => {}
    }
}
