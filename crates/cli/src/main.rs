//! `commlens`: the command-line front end. Parses arguments and hands each
//! subcommand to its module in [`cmd`]; all real work lives in the library
//! crates (ingest → core → analyze → report → export; `commlens-report`
//! assembles what the sinks show).

mod cmd;
mod heap;
mod help;
mod load;
mod outputs;
mod progress;
mod parquet_out;
mod spool;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "commlens", version, about = "Make the NCCL communication of distributed training visible.", max_term_width = 80)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print text tables at full width (by default they fit 80 columns, long text cut with …).
    #[arg(long, global = true)]
    wide: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Counts and bytes per rank, per communicator and per operation, and the
    /// message-size distribution, from NCCL_DEBUG=INFO logs or any other input.
    #[command(after_help = help::STATS)]
    Stats {
        /// Log files or folders (searched recursively); gzip is read transparently.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Also list the kinds of lines that were not interpreted, with samples.
        #[arg(short, long)]
        verbose: bool,
        /// nccl-tests outputs: print every run's per-size rows (by default only up to 4 runs; more are summarised).
        #[arg(long)]
        sizes: bool,
    },
    /// The topology NCCL printed (log dump) or wrote as XML (NCCL_TOPO_DUMP_FILE): nodes, links
    /// and, per communicator, the bottleneck link.
    #[command(after_help = help::TOPO)]
    Topo {
        /// Logs with NCCL's topology dump (NCCL_DEBUG_SUBSYS=GRAPH), topology XML files, or folders.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Also list every path NCCL logged between GPUs and NICs.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Writes the operations of any input as Chrome (trace.json) and Perfetto
    /// (trace.pftrace) traces: one process per rank, one track per stream.
    #[command(after_help = help::TRACE)]
    Trace {
        /// Any input with times: fused Parquet, kernel traces, plugin output, logs with timestamps.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output folder.
        #[arg(short, long)]
        out: PathBuf,
    },
    /// Merges per-rank in-flight dumps (from the commlens plugin) and names the
    /// first stalled collective, the ranks that never entered it, and a verdict.
    #[command(after_help = help::HANG)]
    Hang {
        /// Dump files or folders.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// An operation running for less than this (milliseconds) on every member counts as still running.
        #[arg(long, default_value_t = 10_000)]
        still_running_ms: u64,
    },
    /// Joins NCCL logs (what each operation is) with kernel traces (when it
    /// ran on the GPU): writes fused.parquet, trace.json, trace.pftrace and
    /// summary.json, and prints matches, confidence and unmatched counts.
    #[command(group(clap::ArgGroup::new("kernel_traces").required(true).args(["nsys", "kineto"])), after_help = help::FUSE)]
    Fuse {
        /// NCCL_DEBUG=INFO logs (files or folders).
        #[arg(long = "nccl-log", required = true, num_args = 1..)]
        nccl_log: Vec<PathBuf>,
        /// Nsight Systems SQLite exports (`nsys export --type sqlite`), one or more per node.
        #[arg(long, num_args = 1.., conflicts_with = "kineto")]
        nsys: Vec<PathBuf>,
        /// PyTorch profiler (Kineto) traces, .json or .json.gz, one per rank.
        #[arg(long, num_args = 1..)]
        kineto: Vec<PathBuf>,
        /// Output folder.
        #[arg(short, long)]
        out: PathBuf,
        /// How the hosts' clocks are put on one timeline: one offset per
        /// host (its GPUs share a clock), per rank, or off.
        #[arg(long, value_enum, default_value_t = cmd::fuse::ClockSyncMode::Host)]
        clock_sync: cmd::fuse::ClockSyncMode,
        /// Also print the alignment's per-rank scores and unmatched operations.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Compares two runs (operation mix, volumes, bus bandwidth per
    /// parallelism and message size, iteration time, stragglers); exits 1
    /// when a figure regressed beyond the threshold.
    #[command(after_help = help::DIFF)]
    Diff {
        /// Baseline run (files or a folder of any input kind).
        a: PathBuf,
        /// New run.
        b: PathBuf,
        /// Relative change, in percent, that counts as a regression.
        #[arg(long, default_value_t = 5.0)]
        threshold: f64,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Also list the figures that did not change.
        #[arg(long)]
        all: bool,
    },
    /// Writes one self-contained HTML report (charts of the operation mix,
    /// volumes, message sizes, bandwidth, iterations, stragglers, overlap and
    /// the volume model) from any inputs.
    #[command(after_help = help::REPORT)]
    Report {
        /// Any inputs: logs, kernel traces, plugin output, fused or simulated Parquet, nccl-tests outputs.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output HTML file.
        #[arg(short, long, default_value = "report.html")]
        out: PathBuf,
        /// Model and parallel configuration (`key = value` lines) for the
        /// theoretical-versus-observed volume table.
        #[arg(long)]
        model: Option<PathBuf>,
        /// nccl-tests outputs (all_reduce_perf, …) from the same machines:
        /// drawn as curves, and every operation compared with the curve of
        /// its kind at its size.
        #[arg(long, num_args = 1..)]
        baseline: Vec<PathBuf>,
        /// Title of the page (default: from the inputs).
        #[arg(long)]
        title: Option<String>,
    },
    /// Theoretical per-rank communication volumes of a model and parallel
    /// configuration (Borzyk's LLM-communication thesis, eqs. 5.2–5.6) and, with
    /// inputs, the observed volumes and their ratio (its Table 5.1).
    #[command(after_help = help::MODEL)]
    Model {
        /// `key = value` lines: layers, hidden, seq_len, vocab, micro_batch,
        /// global_batch or num_microbatches, iterations, tp, pp, dp, ep, …
        config: PathBuf,
        /// Runs to compare with the theory (any input kind).
        inputs: Vec<PathBuf>,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Writes the canonical table of any inputs as Parquet (one row per
    /// operation; schema in crates/parquet/SCHEMA.md).
    #[command(after_help = help::EXPORT)]
    Export {
        /// Any inputs commlens reads.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output Parquet file (`--parquet` is the older name); with
        /// --partition, the dataset's folder.
        #[arg(short = 'o', long = "out", visible_alias = "parquet", value_name = "FILE", required = true)]
        parquet: PathBuf,
        /// Write a Hive-partitioned dataset into the folder: one shard per
        /// `host` or global `rank` (`DIR/host=NAME/part-RUN.parquet`); one run
        /// per node may write into the same folder at the same time.
        #[arg(long, value_name = "host|rank")]
        partition: Option<String>,
    },
    /// Cluster descriptions for the collective model: `list` the presets, or
    /// `show` a preset, a TOML file, or the cluster a run ran on (from its
    /// topology dump or XML, init and network lines, nccl-tests headers).
    #[command(after_help = help::CLUSTER)]
    Cluster {
        #[command(subcommand)]
        action: cmd::cluster::ClusterCmd,
    },
    /// Simulates a training job on a cluster: a Megatron model.conf, an
    /// AICB/SimAI workload file, Chakra execution traces, or a measured run
    /// to replay; writes the run as a table of Simulated rows
    /// (`simulated.parquet`, read by every command), a summary in SimAI's
    /// terms, per-link utilisation and traces.
    #[command(after_help = help::SIMULATE)]
    Simulate {
        /// The workload: model.conf, AICB .txt, Chakra .et/folder/prefix/PyTorch ET (.json, .tgz), or a run's files.
        #[arg(required = true)]
        workload: Vec<PathBuf>,
        /// Which front end reads WORKLOAD (default: told by its content).
        #[arg(long, value_enum, default_value_t = cmd::simulate::WorkloadKind::Auto)]
        kind: cmd::simulate::WorkloadKind,
        /// A preset (`commlens cluster list`), a TOML file or a run; default dgx-h100, with as many nodes as the job needs.
        #[arg(long)]
        cluster: Option<PathBuf>,
        /// NICs per node and speed, e.g. 8x400g.
        #[arg(long)]
        nic: Option<String>,
        /// GPUs of the job (AICB files: SimAI's -g).
        #[arg(long)]
        gpus: Option<u32>,
        /// Network model.
        #[arg(long, value_enum, default_value_t = cmd::simulate::Mode::Analytical)]
        mode: cmd::simulate::Mode,
        /// What-if: network bandwidth multiplied by this factor.
        #[arg(long, default_value_t = 1.0)]
        scale_network: f64,
        /// Measured Kineto/nsys traces whose kernel times replace the roofline.
        #[arg(long)]
        kernels: Vec<PathBuf>,
        /// Kineto traces of the same job as a Chakra workload: its compute times.
        #[arg(long)]
        kineto: Vec<PathBuf>,
        /// The trace set to simulate when a Chakra input holds several (e.g. small_chakra).
        #[arg(long)]
        trace_set: Option<String>,
        /// SimAI's -nv (NVLink busbw, GB/s): use SimAI 1.6 analytical's busbw rule.
        #[arg(long)]
        simai_nv: Option<f64>,
        /// SimAI's -nic (busbw of one NIC, GB/s).
        #[arg(long)]
        simai_nic: Option<f64>,
        /// SimAI's -n_p_s (NICs per server).
        #[arg(long, default_value_t = 8)]
        simai_nics_per_server: u32,
        /// Give every rank its representative's rows (small jobs only).
        #[arg(long)]
        expand: bool,
        /// What-if sweep on every core: `nic=8x100g,8x200g,8x400g`, `scale-network=1,2,4` or
        /// `cluster=dgx-h100,hgx-h20`; one output folder per value under --out, and a table
        /// of iteration times and gains.
        #[arg(long)]
        sweep: Option<String>,
        /// Output folder (simulated.parquet, summary.json, EndToEnd.csv, links.csv, traces).
        #[arg(short, long)]
        out: PathBuf,
        /// Summary on standard output: text, or JSON (`--json` is the older name).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        #[arg(long, hide = true)]
        json: bool,
    },
    /// The main job on a built-in example: generates a 4-rank Megatron-like
    /// run (TP=2, PP=2) as NCCL logs, nsys exports and Kineto traces, runs
    /// stats and topo, fuses logs with kernels and writes the report.
    #[command(after_help = help::DEMO)]
    Demo {
        /// Where to write the generated run, its fusion and report (default: a temporary folder).
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// The best parallel layouts of a model on a cluster: every Megatron, DeepSpeed ZeRO, AxoNN
    /// 4D and TED layout filtered by memory, ranked by AxoNN's model, the top re-ranked by the
    /// simulator; memory per GPU, MFU, communication per parallelism and the bottleneck.
    #[command(after_help = help::PLAN)]
    Plan(cmd::plan::PlanArgs),
    /// Follows the commlens plugin's files while the job runs: per communicator
    /// busbw (recent and since the start) and calls per second, the slowest
    /// ranks, the oldest operation in flight and hang dumps, refreshed in place
    /// (q or Ctrl-C quits) or printed as snapshots when piped.
    #[command(after_help = help::WATCH)]
    Watch(cmd::watch::WatchArgs),
    /// What NCCL should reach on a cluster: an nccl-tests style table (time,
    /// algbw, busbw, algorithm, protocol, channels) from NCCL's tuner bounded
    /// by the cluster's links; or measured against predicted (`--against`).
    #[command(after_help = help::PREDICT)]
    Predict {
        /// all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv.
        collective: Option<String>,
        /// A preset (`commlens cluster list`); default dgx-h100.
        #[arg(long)]
        cluster: Option<String>,
        /// NICs per node and speed, e.g. 8x400g.
        #[arg(long)]
        nic: Option<String>,
        /// Nodes of the communicator.
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// GPUs per node taking part (default: all of the preset's).
        #[arg(long)]
        gpus_per_node: Option<u32>,
        /// Smallest size (nccl-tests -b; K/M/G suffixes).
        #[arg(short = 'b', long = "minbytes", default_value = "8")]
        min_bytes: String,
        /// Largest size (nccl-tests -e).
        #[arg(short = 'e', long = "maxbytes", default_value = "8G")]
        max_bytes: String,
        /// Size multiplier between rows (nccl-tests -f).
        #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
        factor: u64,
        /// An nccl-tests output (or log with result tables): measured against predicted per row.
        #[arg(long)]
        against: Option<PathBuf>,
        /// NCCL release whose tuning tables to use (default 2.27.7).
        #[arg(long)]
        nccl_version: Option<String>,
        /// Force NCCL's algorithm (ring, tree, nvls, … as NCCL_ALGO), or time an
        /// alternative against NCCL's choice: ring-ab, rd, rabenseifner, pccl,
        /// ncclx-bruck, ncclx-rd, ncclx-a2a-ll, zero-copy, copy.
        #[arg(long)]
        algo: Option<String>,
        /// Output: an aligned table, CSV (numbers in base units) or JSON.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    commlens_parquet::quiet_guarded_panics();
    let cli = Cli::parse();
    // After parsing: `--help`, `--version` and usage errors start no threads.
    heap::install_pool();
    if cli.wide {
        commlens_export::table::set_text_width(None);
    }
    // Before anything is read or written: no output may be an input (the
    // paths as given: a stream's temporary copy is no input of the user's).
    if let Some((inputs, outs)) = command_paths(&cli.command) {
        if let Err(e) = outputs::check_outputs(&inputs.concat(), &outs) {
            return finish(Err(e.into()));
        }
        // `/dev/zero` as an input (or a config) would be read forever.
        if let Err(e) = spool::refuse_devices(&inputs.concat()) {
            return finish(Err(e.into()));
        }
    }
    // Stream inputs (`-`, pipes) become files for the command's duration.
    let mut streams = Vec::new();
    let command = match spool_streams(cli.command, &mut streams) {
        Ok(c) => c,
        Err(e) => return finish(Err(e)),
    };
    // Input paths passed over because they lead to files or folders already read.
    for group in command_paths(&command).map(|(g, _)| g).unwrap_or_default() {
        if !group.is_empty() {
            outputs::note_links(&group);
        }
    }
    let result = match command {
        Command::Stats { inputs, format, verbose, sizes } => cmd::stats::run(&inputs, format, verbose, sizes),
        Command::Topo { inputs, format, verbose } => cmd::topo::run(&inputs, format, verbose),
        Command::Trace { inputs, out } => cmd::trace::run(&inputs, &out),
        Command::Hang { inputs, format, still_running_ms } => cmd::hang::run(&inputs, format, still_running_ms),
        Command::Fuse { nccl_log, nsys, kineto, out, clock_sync, verbose } => {
            let (kind, traces) = if nsys.is_empty() {
                (cmd::fuse::TraceKind::Kineto, kineto)
            } else {
                (cmd::fuse::TraceKind::Nsys, nsys)
            };
            cmd::fuse::run(&nccl_log, kind, &traces, &out, clock_sync, verbose)
        }
        Command::Diff { a, b, threshold, format, all } => {
            return match cmd::diff::run(&a, &b, threshold, format, all) {
                Ok(true) => stdout_flushed(ExitCode::from(1)),
                Ok(false) => stdout_flushed(ExitCode::SUCCESS),
                Err(e) => finish(Err(e)),
            }
        }
        Command::Report { inputs, out, model, baseline, title } => cmd::report::run(&cmd::report::ReportArgs {
            inputs: &inputs,
            out: &out,
            model: model.as_deref(),
            baselines: &baseline,
            title: title.as_deref(),
        }),
        Command::Model { config, inputs, format } => cmd::model::run(&config, &inputs, format),
        Command::Export { inputs, parquet, partition } => cmd::export::run(&inputs, &parquet, partition.as_deref()),
        Command::Demo { out } => cmd::demo::run(out),
        Command::Simulate {
            workload,
            kind,
            cluster,
            nic,
            gpus,
            mode,
            scale_network,
            kernels,
            kineto,
            trace_set,
            simai_nv,
            simai_nic,
            simai_nics_per_server,
            expand,
            sweep,
            out,
            format,
            json,
        } => cmd::simulate::run(&cmd::simulate::SimulateArgs {
            workload: &workload,
            kind,
            cluster: cluster.as_deref(),
            nic: nic.as_deref(),
            gpus,
            mode,
            scale_network,
            kernels: &kernels,
            kineto: &kineto,
            trace_set: trace_set.as_deref(),
            simai_nv,
            simai_nic,
            simai_nics_per_server,
            expand,
            out: &out,
            json: json || format == Format::Json,
            sweep: sweep.as_deref(),
            quiet: false,
        }),
        Command::Cluster { action } => cmd::cluster::run(action),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Watch(args) => cmd::watch::run(&args),
        Command::Predict {
            collective,
            cluster,
            nic,
            nodes,
            gpus_per_node,
            min_bytes,
            max_bytes,
            factor,
            against,
            nccl_version,
            algo,
            format,
        } => cmd::predict::run(&cmd::predict::PredictArgs {
            collective: collective.as_deref(),
            cluster: cluster.as_deref(),
            nic: nic.as_deref(),
            nodes,
            gpus_per_node,
            min_bytes: &min_bytes,
            max_bytes: &max_bytes,
            factor,
            against: against.as_deref(),
            nccl_version: nccl_version.as_deref(),
            algo: algo.as_deref(),
            format,
        }),
    };
    finish(result)
}

/// The command's inputs, in groups read together (a link or a path named
/// twice is noted within a group), and its outputs; `None` for the commands
/// that read no user file.
fn command_paths(c: &Command) -> Option<(Vec<Vec<PathBuf>>, Vec<&std::path::Path>)> {
    Some(match c {
        Command::Stats { inputs, .. } | Command::Topo { inputs, .. } | Command::Hang { inputs, .. } => {
            (vec![inputs.clone()], vec![])
        }
        Command::Trace { inputs, out } => (vec![inputs.clone()], vec![out]),
        Command::Fuse { nccl_log, nsys, kineto, out, .. } => (vec![nccl_log.clone(), nsys.clone(), kineto.clone()], vec![out]),
        Command::Diff { a, b, .. } => (vec![vec![a.clone()], vec![b.clone()]], vec![]),
        Command::Report { inputs, out, model, baseline, .. } => {
            (vec![inputs.clone(), baseline.clone(), model.iter().cloned().collect()], vec![out])
        }
        Command::Model { config, inputs, .. } => (vec![inputs.clone(), vec![config.clone()]], vec![]),
        Command::Export { inputs, parquet, .. } => (vec![inputs.clone()], vec![parquet]),
        Command::Simulate { workload, kernels, kineto, out, .. } => {
            (vec![workload.clone(), kernels.clone(), kineto.clone()], vec![out])
        }
        Command::Plan(args) => {
            let (inputs, outs) = args.paths();
            (vec![inputs], outs)
        }
        Command::Demo { .. } | Command::Cluster { .. } | Command::Predict { .. } | Command::Watch(_) => return None,
    })
}

/// The command with every stream among its inputs replaced by a copy in a
/// file (see `spool`); the copies live as long as `guards`.
fn spool_streams(command: Command, guards: &mut Vec<spool::Spooled>) -> Result<Command, Box<dyn std::error::Error>> {
    let mut files = |v: Vec<PathBuf>| -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
        let (v, guard) = spool::spool(&v)?;
        guards.push(guard);
        Ok(v)
    };
    Ok(match command {
        Command::Stats { inputs, format, verbose, sizes } => Command::Stats { inputs: files(inputs)?, format, verbose, sizes },
        Command::Topo { inputs, format, verbose } => Command::Topo { inputs: files(inputs)?, format, verbose },
        Command::Trace { inputs, out } => Command::Trace { inputs: files(inputs)?, out },
        Command::Hang { inputs, format, still_running_ms } => {
            Command::Hang { inputs: files(inputs)?, format, still_running_ms }
        }
        Command::Fuse { nccl_log, nsys, kineto, out, clock_sync, verbose } => Command::Fuse {
            nccl_log: files(nccl_log)?,
            nsys: files(nsys)?,
            kineto: files(kineto)?,
            out,
            clock_sync,
            verbose,
        },
        Command::Diff { a, b, threshold, format, all } => {
            let (a, b) = (files(vec![a])?.remove(0), files(vec![b])?.remove(0));
            Command::Diff { a, b, threshold, format, all }
        }
        Command::Report { inputs, out, model, baseline, title } => {
            Command::Report { inputs: files(inputs)?, out, model, baseline: files(baseline)?, title }
        }
        Command::Model { config, inputs, format } => Command::Model { config, inputs: files(inputs)?, format },
        Command::Export { inputs, parquet, partition } => Command::Export { inputs: files(inputs)?, parquet, partition },
        c @ (Command::Simulate { .. } | Command::Demo { .. } | Command::Predict { .. } | Command::Cluster { .. } | Command::Plan(_) | Command::Watch(_)) => c,
    })
}

fn finish(result: cmd::CmdResult) -> ExitCode {
    match result {
        Ok(()) => stdout_flushed(ExitCode::SUCCESS),
        Err(e) => {
            // Each line at most an excerpt of any input it quotes.
            let msg = describe_error(e.as_ref());
            let lines: Vec<_> = msg.split('\n').map(commlens_ingest::bytes::cap_excerpts).collect();
            eprintln!("error: {}", lines.join("\n"));
            stdout_flushed(ExitCode::from(2))
        }
    }
}

/// `code`, once what is still buffered for standard output is written: a
/// write error there (`> /dev/full`) is an error exit, a closed pipe is not.
fn stdout_flushed(code: ExitCode) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().flush() {
        Ok(()) => code,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            ExitCode::from(2)
        }
    }
}

/// The message of an error; when no input was read because every file was
/// refused, what each file was refused for.
fn describe_error(e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<commlens_ingest::IngestError>() {
        Some(commlens_ingest::IngestError::NoInputs { paths }) => {
            let mut s = e.to_string();
            s.push_str(&load::why_no_inputs(paths));
            s
        }
        _ => e.to_string(),
    }
}

/// `commlens stats big.log | head`: when the reader of our stdout goes away,
/// `println!` panics with a broken pipe; stop quietly instead, as a Unix
/// filter does (Rust ignores SIGPIPE, so the write error is what we see).
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            // A closed pipe (`| head`) ends quietly; any other write error
            // (`> /dev/full`, a full disk) is an error: the output is incomplete.
            if why.contains("Broken pipe") {
                std::process::exit(0);
            }
            eprintln!("error: writing to standard output: {why}");
            std::process::exit(2);
        }
        default(info);
    }));
}
