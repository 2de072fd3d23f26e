//! Text output: line prefixes, per-process files and the interleaved `combined.log`.
//!
//! Owns the rendering of `[<epoch>.<usec> ]<host>:<pid>:<tid> [<dev>] NCCL INFO <msg>` (and
//! `<host>:<pid>:<tid> NCCL CALL <msg>`, which has no device field), the file names
//! (`nccl_debug_<host>_<pid>.log`, the thesis's `NCCL_DEBUG_FILE=nccl_debug_%h_%p.log`), the
//! merge of all processes by time as torchrun's shared stdout would show them, and the
//! corruption of that merge by concurrent writers: an op line cut at a byte offset, the next
//! line of another process written right after the cut, the rest of the cut line lost (as in
//! `sugarlxn-...-2.28.9.log`). Cuts fall before ` stream 0x`, so a cut op line never looks
//! complete.

use crate::layout::Layout;
use crate::rng::SplitMix64;
use crate::sim::{Line, LineKind};
use crate::truth::{BrokenLine, CombinedTruth};

/// File name of a process's log.
pub(crate) fn file_name(host: &str, pid: u32) -> String {
    format!("nccl_debug_{host}_{pid}.log")
}

/// One rendered line, without the newline.
pub(crate) fn render(line: &Line, host: &str, pid: u32, dev: usize, timestamps: bool) -> String {
    let mut s = String::with_capacity(line.text.len() + 64);
    if timestamps {
        s.push_str(&format!(
            "{}.{:06} ",
            line.t / 1_000_000,
            line.t % 1_000_000
        ));
    }
    match line.kind {
        LineKind::Call => s.push_str(&format!(
            "{host}:{pid}:{} NCCL CALL {}",
            line.tid, line.text
        )),
        _ => s.push_str(&format!(
            "{host}:{pid}:{} [{dev}] NCCL INFO {}",
            line.tid, line.text
        )),
    }
    s
}

/// Contents of one process's file and its line count.
pub(crate) fn render_file(
    lines: &[Line],
    layout: &Layout,
    rank: usize,
    timestamps: bool,
) -> String {
    let p = &layout.procs[rank];
    let mut out = String::new();
    for l in lines {
        out.push_str(&render(l, &p.host, p.pid, p.dev, timestamps));
        out.push('\n');
    }
    out
}

/// Appends each rank's lines to its file as the simulation hands them over ([`crate::sim::Flush`]):
/// the first batch of a rank creates (truncates) its file, later ones append, so only one
/// batch of lines is in memory at a time. The first I/O error is kept and stops further writes.
pub(crate) struct FileStreamer<'a> {
    pub dir: &'a std::path::Path,
    pub layout: &'a Layout,
    pub timestamps: bool,
    /// Whether rank `r`'s file was created yet.
    pub started: Vec<bool>,
    pub bytes: u64,
    pub lines: u64,
    pub error: Option<std::io::Error>,
    buf: String,
}

impl<'a> FileStreamer<'a> {
    pub fn new(dir: &'a std::path::Path, layout: &'a Layout, timestamps: bool) -> Self {
        FileStreamer {
            dir,
            layout,
            timestamps,
            started: vec![false; layout.procs.len()],
            bytes: 0,
            lines: 0,
            error: None,
            buf: String::new(),
        }
    }

    /// Writes `lines` of rank `r` and empties the list.
    pub fn flush(&mut self, r: usize, lines: &mut Vec<Line>) {
        use std::io::Write;
        if self.error.is_none() {
            let p = &self.layout.procs[r];
            self.buf.clear();
            for l in lines.iter() {
                self.buf.push_str(&render(l, &p.host, p.pid, p.dev, self.timestamps));
                self.buf.push('\n');
            }
            let path = self.dir.join(file_name(&p.host, p.pid));
            let first = !self.started[r];
            let res = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(first)
                .append(!first)
                .open(&path)
                .and_then(|mut f| f.write_all(self.buf.as_bytes()));
            match res {
                Ok(()) => {
                    self.started[r] = true;
                    self.bytes += self.buf.len() as u64;
                    self.lines += lines.len() as u64;
                }
                Err(e) => self.error = Some(e),
            }
        }
        lines.clear();
    }
}

/// `combined.log`: all processes merged by time (ties by rank), with `broken` op lines cut.
pub(crate) fn render_combined(
    lines: &[Vec<Line>],
    layout: &Layout,
    timestamps: bool,
    broken: usize,
    rng: &mut SplitMix64,
) -> (String, CombinedTruth) {
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (r, ls) in lines.iter().enumerate() {
        order.extend(ls.iter().enumerate().map(|(i, l)| (l.t, r, i)));
    }
    order.sort_unstable();
    let texts: Vec<String> = order
        .iter()
        .map(|&(_, r, i)| {
            let p = &layout.procs[r];
            render(&lines[r][i], &p.host, p.pid, p.dev, timestamps)
        })
        .collect();
    let is_op = |k: usize| {
        let (_, r, i) = order[k];
        lines[r][i].kind == LineKind::Op
    };
    let total_ops = (0..order.len()).filter(|&k| is_op(k)).count();

    // Victims: op lines followed (within a few lines) by a line of another process.
    let mut candidates: Vec<usize> = (0..order.len())
        .filter(|&k| is_op(k) && order[k + 1..].iter().take(16).any(|o| o.1 != order[k].1))
        .collect();
    let want = broken.min(candidates.len());
    for i in 0..want {
        let j = i + rng.below((candidates.len() - i) as u64) as usize;
        candidates.swap(i, j);
    }
    let mut victims: Vec<usize> = candidates[..want].to_vec();
    victims.sort_unstable();
    let mut is_victim = vec![false; order.len()];
    for &v in &victims {
        is_victim[v] = true;
    }

    let mut consumed = vec![false; order.len()];
    let mut out = String::new();
    let mut n_lines = 0usize;
    let mut records = Vec::new();
    for k in 0..order.len() {
        if consumed[k] {
            continue;
        }
        let text = &texts[k];
        let intruder = if is_victim[k] {
            (k + 1..order.len())
                .find(|&j| !consumed[j] && !is_victim[j] && order[j].1 != order[k].1)
        } else {
            None
        };
        match intruder {
            Some(j) => {
                let limit = text.find(" stream 0x").unwrap_or(text.len());
                let lo = (text.len() / 5).min(limit.saturating_sub(1)).max(1);
                let cut = rng.range(lo as u64, (limit.saturating_sub(1)).max(lo) as u64) as usize;
                out.push_str(&text[..cut]);
                out.push_str(&texts[j]);
                consumed[j] = true;
                records.push(BrokenLine {
                    line: n_lines,
                    cut_at: cut,
                    victim_rank: order[k].1,
                    intruder_rank: order[j].1,
                    original: text.clone(),
                });
            }
            None => out.push_str(text),
        }
        out.push('\n');
        n_lines += 1;
    }
    let truth = CombinedTruth {
        file: "combined.log".to_string(),
        lines: n_lines,
        intact_op_lines: total_ops - records.len(),
        broken: records,
    };
    (out, truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_forms() {
        let l = Line {
            t: 1_766_081_276_802_766,
            tid: 12,
            kind: LineKind::Info,
            text: "x y".into(),
        };
        assert_eq!(
            render(&l, "node00", 10, 2, true),
            "1766081276.802766 node00:10:12 [2] NCCL INFO x y"
        );
        assert_eq!(
            render(&l, "node00", 10, 2, false),
            "node00:10:12 [2] NCCL INFO x y"
        );
        let c = Line {
            kind: LineKind::Call,
            text: "ncclGroupEnd()".into(),
            ..l
        };
        assert_eq!(
            render(&c, "h", 1, 0, false),
            "h:1:12 NCCL CALL ncclGroupEnd()"
        );
        assert_eq!(file_name("node01", 4242), "nccl_debug_node01_4242.log");
    }
}
