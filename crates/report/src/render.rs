//! Turns analysis results into `commlens-export` tables, and the readers'
//! reports into the summary people read on stderr.

use commlens_analyze::bottleneck::Bottleneck;
use commlens_analyze::stats::StatsReport;
use commlens_core::model::LogicalCommIdx;
use commlens_core::{OpTable, Topology};
use commlens_export::{human_bytes, human_bytes_of, Table};
use commlens_ingest::nccl_log::ReadReport;
use std::fmt::Write;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

pub fn stats_tables(r: &StatsReport) -> Vec<Table> {
    let mut ranks = Table::new("Ranks", &["rank", "host", "pid>", "dev>", "ops>", "bytes>", "collective>", "p2p>", "recovered>"]);
    for row in &r.ranks {
        ranks.row(vec![
            opt(row.rank),
            row.host.clone(),
            row.pid.to_string(),
            opt(row.cuda_dev),
            row.ops.to_string(),
            human_bytes_of(row.bytes, row.ops, row.unknown_size),
            row.collective_ops.to_string(),
            row.p2p_ops.to_string(),
            row.recovered.to_string(),
        ]);
    }
    ranks.note(format!("total: {} operations, {}", r.total_ops, human_bytes_of(r.total_bytes, r.total_ops, r.total_unknown_size)));
    if r.total_unknown_size > 0 {
        ranks.note(format!("{} operations of unknown size (the input does not give it): ? in byte columns", r.total_unknown_size));
    }

    let mut comms = Table::new(
        "Communicators (logical, across ranks)",
        &["communicator", "nranks>", "seen>", "global ranks", "grouped by", "ops>", "bytes>", "operation mix"],
    );
    for c in &r.comms {
        let ranks: Vec<String> = c.global_ranks.iter().map(|g| opt(*g)).collect();
        let mix: Vec<String> = c
            .mix
            .iter()
            .map(|(k, n)| format!("{k} {:.0}%", 100.0 * *n as f64 / c.ops.max(1) as f64))
            .collect();
        comms.row(vec![
            c.name.clone(),
            c.nranks.to_string(),
            c.members_seen.to_string(),
            shorten_list(&ranks),
            format!("{:?}", c.grouping),
            c.ops.to_string(),
            human_bytes_of(c.bytes, c.ops, c.unknown_size),
            mix.join(", "),
        ]);
    }

    let mut ops = Table::new("Operations", &["operation", "ops>", "bytes>", "min>", "mean>", "max>", "algorithm/protocol"]);
    for o in &r.ops {
        let algos: Vec<String> = o
            .algorithms
            .iter()
            .map(|(l, n)| format!("{l} {:.0}%", 100.0 * *n as f64 / o.ops.max(1) as f64))
            .collect();
        ops.row(vec![
            o.kind.to_string(),
            o.ops.to_string(),
            human_bytes_of(o.bytes, o.ops, o.unknown_size),
            human_bytes_of(o.min_bytes, o.ops, o.ops * (o.unknown_size >= o.ops) as u64),
            human_bytes_of(o.mean_bytes as u64, o.ops, o.ops * (o.unknown_size >= o.ops) as u64),
            human_bytes_of(o.max_bytes, o.ops, o.ops * (o.unknown_size >= o.ops) as u64),
            algos.join(", "),
        ]);
    }

    let kinds: Vec<_> = r.ops.iter().map(|o| o.kind).collect();
    let mut headers: Vec<String> = vec!["message size".into()];
    headers.extend(kinds.iter().map(|k| format!("{k}>")));
    headers.push("total>".into());
    headers.push("".into());
    let hdr: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut sizes = Table::new("Message sizes (operations per power-of-two bucket)", &hdr);
    let max_total = r.sizes.iter().map(|s| s.total).max().unwrap_or(1).max(1);
    for s in &r.sizes {
        let label = if s.unknown {
            "unknown".to_string()
        } else if s.lo_bytes == 0 {
            "0 B".to_string()
        } else {
            format!("≥ {}", human_bytes(s.lo_bytes))
        };
        let mut row = vec![label];
        for k in &kinds {
            let n = s.counts.iter().find(|(kk, _)| kk == k).map_or(0, |x| x.1);
            row.push(if n == 0 { ".".into() } else { n.to_string() });
        }
        row.push(s.total.to_string());
        row.push("#".repeat(((s.total * 30).div_ceil(max_total)) as usize));
        sizes.row(row);
    }
    if r.total_ops == 0 {
        // Operation and size tables would be empty headers.
        return vec![ranks, comms];
    }
    vec![ranks, comms, ops, sizes]
}

fn shorten_list(items: &[String]) -> String {
    if items.len() <= 10 {
        items.join(",")
    } else {
        format!("{},…,{} ({} ranks)", items[..6].join(","), items[items.len() - 1], items.len())
    }
}

/// The long-format CSV of `stats`: one row per (rank, communicator, operation).
pub fn stats_csv(t: &OpTable, agg: &commlens_analyze::stats::Aggregate) -> Table {
    let mut tab = Table::new(
        "",
        &[
            "rank", "host", "pid", "cuda_dev", "communicator", "comm_id", "nranks", "operation", "ops", "bytes", "min_bytes",
            "max_bytes", "recovered", "nccl_version", "job_nodes",
        ],
    );
    let nodes = crate::job::Job::of_table(t).nodes.to_string();
    let mut keys: Vec<_> = agg.cells.keys().copied().collect();
    keys.sort_by_key(|(d, c, k)| (t.devices[d.ix()].global_rank, d.0, c.0, *k));
    for key in keys {
        let (d, c, k) = key;
        let cell = agg.cells[&key];
        let dev = &t.devices[d.ix()];
        let p = &t.processes[dev.proc.ix()];
        let m = &t.comms[c.ix()];
        let name = m.logical.map_or_else(String::new, |l| t.logical[l.ix()].name.clone());
        tab.row(vec![
            opt(dev.global_rank),
            p.host.clone(),
            p.pid.to_string(),
            opt(dev.cuda_dev),
            name,
            m.comm_id.map_or_else(String::new, |id| format!("{id:#018x}")),
            opt(m.nranks),
            k.to_string(),
            cell.ops.to_string(),
            // Empty where no operation's size is known (never 0 for unknown).
            if cell.known_ops() > 0 { cell.bytes.to_string() } else { String::new() },
            if cell.known_ops() > 0 { cell.min_bytes.to_string() } else { String::new() },
            if cell.known_ops() > 0 { cell.max_bytes.to_string() } else { String::new() },
            cell.recovered.to_string(),
            p.nccl_version.map_or_else(String::new, |v| v.to_string()),
            nodes.clone(),
        ]);
    }
    tab
}

pub fn topology_tables(t: &Topology) -> Vec<Table> {
    let mut nodes = Table::new(
        &format!("Topology of {} (maxBw {} GB/s, totalBw {} GB/s)", t.host, t.max_bw_gb_s, t.total_bw_gb_s),
        &["node", "bus id", "rank>"],
    );
    for n in &t.nodes {
        nodes.row(vec![
            format!("{}/{}", n.kind.name(), n.id),
            n.bus_id.map_or_else(|| "-".into(), |b| format!("{b:#x}")),
            opt(n.rank),
        ]);
    }
    let mut links = Table::new(&format!("Links of {}", t.host), &["from", "to", "type", "GB/s>"]);
    let name = |i: usize| format!("{}/{}", t.nodes[i].kind.name(), t.nodes[i].id);
    for l in &t.links {
        links.row(vec![name(l.from), name(l.to), l.kind.name().into(), format!("{:.1}", l.bw_gb_s)]);
    }
    let mut out = vec![nodes, links];
    let gpus: Vec<usize> = t.gpus().map(|(i, _)| i).collect();
    if gpus.len() > 1 {
        let mut hdr = vec!["GPU pair bandwidth".to_string()];
        hdr.extend(gpus.iter().map(|g| format!("{}>", t.nodes[*g].id)));
        let h: Vec<&str> = hdr.iter().map(String::as_str).collect();
        let mut m = Table::new(&format!("GPU-to-GPU bottleneck bandwidth on {} (GB/s, link type)", t.host), &h);
        for &a in &gpus {
            let mut row = vec![t.nodes[a].id.clone()];
            for &b in &gpus {
                row.push(match t.gpu_pair_bw(a, b) {
                    _ if a == b => "-".into(),
                    Some((bw, k)) => format!("{bw:.1} {}", k.name()),
                    None => "?".into(),
                });
            }
            m.row(row);
        }
        out.push(m);
    }
    out
}

pub fn bottleneck_table(t: &OpTable, b: &[(LogicalCommIdx, Option<Bottleneck>)]) -> Table {
    let mut tab = Table::new(
        "Communicator bottlenecks (thesis eq. 4.12: slowest link between any two members)",
        &["communicator", "nranks>", "GB/s>", "link", "between", "unknown pairs>"],
    );
    for (l, bn) in b {
        let lc = &t.logical[l.ix()];
        match bn {
            Some(x) => tab.row(vec![
                lc.name.clone(),
                lc.nranks.to_string(),
                format!("{:.1}", x.bw_gb_s),
                x.link.name().into(),
                format!("{} – {}", x.between.0, x.between.1),
                x.unknown_pairs.to_string(),
            ]),
            None => tab.row(vec![
                lc.name.clone(),
                lc.nranks.to_string(),
                "?".into(),
                "-".into(),
                "no topology for these GPUs".into(),
                "-".into(),
            ]),
        }
    }
    tab
}

/// One paragraph per input for stderr; malformed-line samples always, other
/// kinds with `verbose`.
pub fn read_summary(reports: &[ReadReport], skipped_files: &[(std::path::PathBuf, String)], verbose: bool) -> String {
    let mut s = String::new();
    let (mut bytes, mut lines, mut ops, mut rec, mut unrec, mut bad, mut unknown) = (0, 0, 0, 0, 0, 0, 0);
    for r in reports {
        bytes += r.bytes;
        lines += r.lines;
        ops += r.ops;
        rec += r.recovered_ops;
        unrec += r.broken_unrecovered;
        bad += r.malformed.total();
        unknown += r.unknown.total();
        for k in r.malformed.sorted() {
            for (line, text) in &k.samples {
                let _ = writeln!(s, "warning: {}:{line}: {} (line skipped): {text}", r.path, k.kind);
            }
            if k.count > k.samples.len() as u64 {
                let _ = writeln!(s, "warning: {}: {} more lines like that", r.path, k.count - k.samples.len() as u64);
            }
        }
        if verbose {
            let _ = writeln!(
                s,
                "{}: {} lines, {} NCCL segments, {} ops ({} recovered, {} rejoined lines, {} broken unrecoverable), {} tuning lines ({} ops tuned, {} unmatched), {} call lines, {} init, {} channel, {} topology lines in {} blocks, {} non-NCCL lines",
                r.path, r.lines, r.nccl_segments, r.ops, r.recovered_ops, r.rejoined_lines, r.broken_unrecovered,
                r.tuning_lines, r.tuned_ops, r.tuning_unmatched, r.call_lines, r.init_lines, r.channel_lines,
                r.topology_lines, r.topology_blocks, r.non_nccl_lines
            );
            for k in r.unknown.sorted().iter().take(25) {
                let sample = k.samples.first().map_or(String::new(), |(l, t)| format!(" e.g. line {l}: {t}"));
                let _ = writeln!(s, "  not interpreted: {:>7} × {}{sample}", k.count, k.kind);
            }
            for (l, t) in &r.non_nccl_samples {
                let _ = writeln!(s, "  non-NCCL text e.g. line {l}: {t}");
            }
        }
    }
    for (p, why) in skipped_files {
        let _ = writeln!(s, "note: skipped {}: {why}", p.display());
    }
    let _ = write!(
        s,
        "read {} file{} ({}, {} lines): {} operations",
        reports.len(),
        if reports.len() == 1 { "" } else { "s" },
        human_bytes(bytes),
        lines,
        ops
    );
    if rec > 0 {
        let _ = write!(s, " ({rec} recovered from lines cut by concurrent writers)");
    }
    if unrec > 0 {
        let _ = write!(s, "; {unrec} broken operation lines could not be recovered");
    }
    if bad > 0 {
        let _ = write!(s, "; {bad} malformed lines skipped");
    }
    let _ = writeln!(s, "; {unknown} other NCCL lines not interpreted{}", if verbose { "" } else { " (--verbose lists them)" });
    s
}

/// One line per kernel trace read, plus its warnings (all with `verbose`).
pub fn trace_summary(traces: &[commlens_ingest::kineto::KernelTrace], verbose: bool) -> String {
    let mut s = String::new();
    for t in traces {
        // Ranks in order (a node's export lists its processes as it met them), unknown ones last.
        let mut known: Vec<_> = t.ranks.iter().filter_map(|r| r.rank).collect();
        known.sort_unstable();
        let mut ranks: Vec<String> = known.iter().map(|r| r.to_string()).collect();
        ranks.extend(t.ranks.iter().filter(|r| r.rank.is_none()).map(|_| "?".to_string()));
        let world = t.world_size.map_or(String::new(), |w| format!(" of {w}"));
        let _ = writeln!(
            s,
            "{}: {:?} trace, {} {}{}: {} NCCL kernels, {} CPU-side collective calls (record_param_comms/nccl:* ops, wait calls included), {} kernels linked to their call",
            t.path,
            t.source,
            if ranks.len() == 1 { "rank" } else { "ranks" },
            ranks.join(","),
            world,
            t.stats.nccl_kernels,
            t.stats.cpu_collectives,
            t.stats.linked_kernels
        );
        let shown = if verbose { t.warnings.len() } else { t.warnings.len().min(2) };
        for w in &t.warnings[..shown] {
            let _ = writeln!(s, "  warning: {w}");
        }
        if shown < t.warnings.len() {
            let _ = writeln!(s, "  ({} more warnings with --verbose)", t.warnings.len() - shown);
        }
    }
    s
}

/// The anomaly section as text (`report` prints it): the listed anomalies, how many more,
/// what the rule looked at and the late arrivals it left to the straggler analysis.
pub fn anomaly_table(a: &commlens_export::report::AnomalySection) -> Table {
    use commlens_export::report::scale::fmt_ns;
    let mut t = Table::new(
        "Anomalies (operations far from their own history)",
        &["time", "rule", "communicator", "kind", "size>", "ranks", "iter>", "observed>", "expected>", "score>"],
    );
    for r in &a.rows {
        t.row(vec![
            r.time.clone(),
            r.rule.clone(),
            r.comm.clone(),
            r.kind.clone(),
            r.bytes.map_or_else(|| "-".into(), human_bytes),
            r.ranks.clone(),
            opt(r.iteration),
            fmt_ns(r.observed_ns),
            fmt_ns(r.expected_ns),
            format!("{:.1}", r.score),
        ]);
    }
    if a.rows.is_empty() {
        t.note("no anomaly".to_string());
    }
    if a.more > 0 {
        t.note(format!("… and {} more anomalies not listed", a.more));
    }
    t.note(a.intro.clone());
    for n in &a.notes {
        t.note(n.clone());
    }
    t
}
