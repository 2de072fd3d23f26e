//! Devices and communicator handles in the reader's state machine: found or
//! added per process, filled from init lines (rank, size, device, commId,
//! phase), and given their ring, tree and connection lines, which a thread
//! prints while it initializes a communicator (held back until the thread names
//! it). See [`super::state`].

use super::init::{self, ChannelLine, InitPhase};
use super::state::LogParser;
use commlens_core::model::{CommMember, Device, DevIdx, ProcIdx};
use commlens_core::CommIdx;

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
    pub(super) fn comm(&mut self, proc: ProcIdx, ptr: u64) -> CommIdx {
        let key = (proc.0, ptr);
        if let Some(&(_, c)) = self.recent_comms.iter().find(|(k, _)| *k == Some(key)) {
            return c;
        }
        let c = match self.procs[proc.ix()].comms.get(&ptr) {
            Some(&c) => c,
            None => {
                let c = CommIdx(self.table.comms.len() as u32);
                self.table.comms.push(CommMember::new(proc, ptr));
                self.procs[proc.ix()].comms.insert(ptr, c);
                c
            }
        };
        self.recent_comms = [(Some(key), c), self.recent_comms[0]];
        c
    }

    pub(super) fn comm_line(&mut self, proc: ProcIdx, tid: u32, l: &init::CommLine) {
        let c = self.comm(proc, l.comm);
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
        m.n_nodes = l.n_nodes.or(m.n_nodes);
        m.local_ranks = l.local_ranks.or(m.local_ranks);
        m.local_rank = l.local_rank.or(m.local_rank);
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        if l.phase == Some(InitPhase::Complete) {
            self.table.comms[c.ix()].init_complete = true;
            let backlog = std::mem::take(&mut thread.init_backlog);
            thread.init_comm = None;
            for ch in backlog {
                attach_channel_line(&mut self.table.comms[c.ix()], ch);
            }
        } else {
            thread.init_comm = Some(c);
            let backlog = std::mem::take(&mut thread.init_backlog);
            for ch in backlog {
                attach_channel_line(&mut self.table.comms[c.ix()], ch);
            }
        }
    }

    pub(super) fn channel_line(&mut self, proc: ProcIdx, tid: u32, ch: ChannelLine) {
        let thread = self.procs[proc.ix()].threads.entry(tid).or_default();
        match thread.init_comm {
            Some(c) => attach_channel_line(&mut self.table.comms[c.ix()], ch),
            None if thread.init_backlog.len() < 4096 => thread.init_backlog.push(ch),
            None => {}
        }
    }
}

fn attach_channel_line(m: &mut CommMember, ch: ChannelLine) {
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
            if m.connections.len() < 4096 {
                m.connections.push(conn)
            }
        }
        ChannelLine::Trees(t) => {
            for tc in t {
                if !m.trees.iter().any(|x| x.channel == tc.channel) && m.trees.len() < 1024 {
                    m.trees.push(tc);
                }
            }
        }
        ChannelLine::RingNeighbors => {}
    }
}
