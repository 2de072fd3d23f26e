//! `commlens simulate --sweep KEY=V1,V2,…`: one what-if per value, run side by side on every
//! core, and one table comparing them (SimAI's design studies: NIC speed, network scale,
//! cluster).
//!
//! Owns parsing the sweep, running the variants (the workload is read once and shared; each
//! variant builds its own cluster and network and writes its usual outputs into
//! `OUT/KEY-VALUE/`) and the comparison (`OUT/sweep.csv` and the table on standard output).
//! Why variants rather than a parallel event loop: one simulated run is a sequence of
//! dependent events; the questions users ask of a simulator are sweeps, and those are
//! independent (`shared/reference/simulation.md` §9: spend cores on sweeps). A parallel event
//! loop would first need ties ordered by (time, rank, task) instead of insertion order (to keep
//! results byte-identical), logical processes per component of communicator membership, a
//! network sharded by link component, and windows of lookahead equal to the smallest collective
//! latency.

use super::simulate::{checked_workload, run_on, SimulateArgs};
use super::CmdResult;
use commlens_sim::engine::Summary;
use commlens_workload::GroupKind;
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// `--nic`: NICs per node and speed (`8x200g`).
    Nic,
    /// `--scale-network`: bandwidth factor.
    ScaleNetwork,
    /// `--cluster`: a preset, a TOML file or a run.
    Cluster,
}

impl Key {
    fn name(self) -> &'static str {
        match self {
            Key::Nic => "nic",
            Key::ScaleNetwork => "scale-network",
            Key::Cluster => "cluster",
        }
    }
}

/// `KEY=V1,V2,…` parsed; values keep their order (the first is the baseline of the gains).
fn parse(spec: &str) -> Result<(Key, Vec<String>), String> {
    let expected = "expected KEY=V1,V2,... with KEY one of nic, scale-network, cluster (e.g. nic=8x200g,8x400g)";
    let (k, vs) = spec.split_once('=').ok_or_else(|| format!("--sweep {spec}: {expected}"))?;
    let key = match k.trim() {
        "nic" => Key::Nic,
        "scale-network" | "scale_network" => Key::ScaleNetwork,
        "cluster" => Key::Cluster,
        other => return Err(format!("--sweep {spec}: unknown key {other:?}; {expected}")),
    };
    let values: Vec<String> = vs.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    if values.len() < 2 {
        return Err(format!("--sweep {spec}: give at least two values to compare"));
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(format!("--sweep {spec}: {v} is given twice"));
        }
        if key == Key::ScaleNetwork && !v.parse::<f64>().is_ok_and(|f| f.is_finite() && f > 0.0) {
            return Err(format!("--sweep {spec}: {v:?} is not a positive factor"));
        }
    }
    Ok((key, values))
}

/// A variant's folder name: `KEY-VALUE`, with what a file name should not hold replaced.
fn folder(key: Key, value: &str) -> String {
    let v: String = value.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    format!("{}-{v}", key.name())
}

/// One variant's result.
struct Row {
    value: String,
    dir: PathBuf,
    summary: Summary,
}

pub fn run(a: &SimulateArgs<'_>, spec: &str) -> CmdResult {
    let (key, values) = parse(spec)?;
    let given = match key {
        Key::Nic => a.nic.is_some(),
        Key::ScaleNetwork => a.scale_network != 1.0,
        Key::Cluster => a.cluster.is_some(),
    };
    if given {
        return Err(format!("--sweep {}=…: do not also give --{}", key.name(), key.name()).into());
    }
    let w = checked_workload(a)?;
    std::fs::create_dir_all(a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let dirs: Vec<PathBuf> = values.iter().map(|v| a.out.join(folder(key, v))).collect();
    let cluster_paths: Vec<PathBuf> = values.iter().map(PathBuf::from).collect();
    eprintln!("simulating {} variants of {} ({}) on {} threads", values.len(), w.name, key.name(), rayon::current_num_threads());
    let results: Vec<Result<Summary, String>> = (0..values.len())
        .into_par_iter()
        .map(|i| {
            let v = &values[i];
            let mut va = SimulateArgs { out: &dirs[i], sweep: None, quiet: true, json: false, ..*a };
            match key {
                Key::Nic => va.nic = Some(v),
                Key::ScaleNetwork => va.scale_network = v.parse().expect("checked in parse"),
                Key::Cluster => va.cluster = Some(&cluster_paths[i]),
            }
            run_on(&va, &w).map_err(|e| format!("{}={v}: {e}", key.name()))
        })
        .collect();
    let mut rows = Vec::with_capacity(values.len());
    for ((value, dir), r) in values.into_iter().zip(dirs).zip(results) {
        rows.push(Row { value, dir, summary: r? });
    }
    let csv_path = a.out.join("sweep.csv");
    crate::outputs::write_atomic(&csv_path, |p| std::fs::write(p, csv(key, &rows)))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json(key, &rows))?);
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    write!(o, "{}", table(key, &w.name, &rows))?;
    writeln!(o, "wrote {} and one folder per variant ({}, ...)", csv_path.display(), rows[0].dir.display())?;
    Ok(())
}

/// Throughput gain of `s` over the baseline `base`, percent (iteration time `base / s − 1`).
fn gain(base: &Summary, s: &Summary) -> f64 {
    (base.mean_iteration_us / s.mean_iteration_us - 1.0) * 100.0
}

/// The comparison: per value, iteration time, compute, exposed communication (DP, TP, PP,
/// EP), bubble, and the gain over the first value and over the previous one.
fn table(key: Key, workload: &str, rows: &[Row]) -> String {
    let mut t = commlens_export::Table::new(
        &format!("{workload}: what-if sweep of {}", key.name()),
        &[key.name(), "iteration ms>", "compute ms>", "exposed comm ms>", "DP>", "TP>", "PP>", "EP>", "bubble ms>", "vs first>", "vs previous>"],
    );
    let ms = |us: f64| format!("{:.1}", us / 1e3);
    for (i, r) in rows.iter().enumerate() {
        let s = &r.summary;
        t.row(vec![
            r.value.clone(),
            ms(s.mean_iteration_us),
            ms(s.compute_us),
            ms(s.exposed_comm_us),
            ms(s.exposed(GroupKind::Dp)),
            ms(s.exposed(GroupKind::Tp)),
            ms(s.exposed(GroupKind::Pp)),
            ms(s.exposed(GroupKind::Ep)),
            ms(s.bubble_us),
            if i == 0 { "-".into() } else { format!("{:+.1}%", gain(&rows[0].summary, s)) },
            if i == 0 { "-".into() } else { format!("{:+.1}%", gain(&rows[i - 1].summary, s)) },
        ]);
    }
    t.to_text()
}

fn csv(key: Key, rows: &[Row]) -> String {
    let mut out = format!("{},iteration_us,compute_us,exposed_comm_us,exposed_dp_us,exposed_tp_us,exposed_pp_us,exposed_ep_us,bubble_us,gain_vs_first_pct,folder\n", key.name());
    for r in rows {
        let s = &r.summary;
        out.push_str(&format!(
            "{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{}\n",
            r.value,
            s.mean_iteration_us,
            s.compute_us,
            s.exposed_comm_us,
            s.exposed(GroupKind::Dp),
            s.exposed(GroupKind::Tp),
            s.exposed(GroupKind::Pp),
            s.exposed(GroupKind::Ep),
            s.bubble_us,
            gain(&rows[0].summary, s),
            file_name(&r.dir)
        ));
    }
    out
}

fn json(key: Key, rows: &[Row]) -> serde_json::Value {
    let variants: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "value": r.value,
                "folder": r.dir,
                "gain_vs_first_pct": gain(&rows[0].summary, &r.summary),
                "summary": r.summary,
            })
        })
        .collect();
    serde_json::json!({ "sweep": key.name(), "variants": variants })
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_and_rejects_what_cannot_run() {
        assert_eq!(parse("nic=8x200g,8x400g").unwrap(), (Key::Nic, vec!["8x200g".to_string(), "8x400g".to_string()]));
        assert_eq!(parse("scale-network=1, 2,4").unwrap().1, ["1", "2", "4"]);
        assert_eq!(parse("cluster=dgx-h100,hgx-h20").unwrap().0, Key::Cluster);
        for (bad, says) in [
            ("nic", "expected KEY="),
            ("gpus=1,2", "unknown key"),
            ("nic=8x400g", "at least two"),
            ("nic=8x400g,8x400g", "given twice"),
            ("scale-network=1,0", "not a positive factor"),
            ("scale-network=1,x", "not a positive factor"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn folders_are_file_names() {
        assert_eq!(folder(Key::Nic, "8x400g"), "nic-8x400g");
        assert_eq!(folder(Key::Cluster, "conf/my cluster.toml"), "cluster-conf_my_cluster.toml");
        assert_eq!(folder(Key::ScaleNetwork, "0.5"), "scale-network-0.5");
    }
}
