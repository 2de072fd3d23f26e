//! What the collective model (`commlens_model`) expects of every operation
//! of a table, on its own communicator.
//!
//! The run's cluster is built once ([`run_cluster`]: the table's facts plus
//! the hardware lines of the inputs' logs, as `commlens cluster show` does).
//! Each communicator handle gets one [`Predictor`] (NCCL's logged search
//! graphs when its init printed them, else the emulated search), built on
//! first use and shared by all its operations; each operation is predicted at
//! its kind and its nccl-tests size (`bandwidth::algo_bytes`: the whole
//! buffer), Send/Recv as `SendRecv` of their bytes. Operations of single-rank
//! communicators, or of handles whose size is unknown, get nothing.
//!
//! With a GPU span, the measured bus bandwidth is `commlens_analyze::bandwidth`'s
//! (nccl-tests convention, the same `S` and bus factor as the model's), and
//! the efficiency against the model is measured busbw ÷ expected busbw.

mod sections;

pub use sections::{expected_section, tuning_section};

use commlens_analyze::bandwidth::{algo_bytes, BandwidthReport, BusConvention, OpRef};
use commlens_core::model::DevIdx;
use commlens_core::{Algorithm, CommIdx, OpKind, OpTable, Protocol};
use commlens_ingest::inputs::{sniff, InputFormat};
use commlens_ingest::lines::LineSource;
use commlens_ingest::lines_mapped::FileLines;
use commlens_ingest::noted::NotedLines;
use commlens_ingest::topo_xml::{is_topo_xml, read_topo_xml};
use commlens_model::from_run::{cluster_from_facts, facts_from_table, RunFacts};
use commlens_model::predict::{Prediction, DEFAULT_VERSION};
use commlens_model::presets::preset;
use commlens_model::tuner::NcclEnv;
use commlens_model::{Cluster, Predictor};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The model of one communicator handle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommModel {
    pub nranks: u32,
    pub nnodes: u32,
    /// The tuner ran on NCCL's own logged search graphs (else: emulated search).
    pub logged_graphs: bool,
}

/// The model's figures for one operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpExpected {
    /// nccl-tests size the model was asked about.
    pub size_bytes: u64,
    pub time_us: f64,
    pub busbw_gb_s: f64,
    /// The model's tuner choice (`None` outside the tuner: point-to-point, AllToAll).
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub n_channels: u32,
    /// From `commlens_analyze::bandwidth` when the operation has a GPU span.
    pub measured_busbw_gb_s: Option<f64>,
    /// measured ÷ expected bus bandwidth.
    pub efficiency: Option<f64>,
}

/// Expected figures of a whole table. Nothing is stored per operation: each handle
/// points at its shared predictor's cache of predictions by (kind, size), filled for
/// every operation by [`Expected::compute`], and [`Expected::get`] puts an operation's
/// figures together from it and the bandwidth report.
pub struct Expected<'a> {
    pub cluster: Cluster,
    /// Per communicator handle that has operations and more than one rank.
    pub comms: Vec<Option<CommModel>>,
    table: &'a OpTable,
    /// Measured bus bandwidth of the operations that have one, sorted (from the
    /// bandwidth report: the timed operations only).
    measured: Vec<(OpRef, f64)>,
    /// Per handle: index into `models` (`None`: not modelled).
    slots: Vec<Option<usize>>,
    /// Per shared predictor: its rank count and its predictions by (kind, nccl-tests size).
    models: Vec<(u32, HashMap<(OpKind, u64), Prediction>)>,
}


/// What a handle's predictor depends on: its logical communicator (whose members' logged
/// graphs it merges), declared ranks and nodes, and NCCL version. Handles with the same key
/// share one predictor and its cache, so a 100,000-member communicator builds one, not one
/// per member.
type ModelKey = (commlens_core::LogicalCommIdx, Option<u32>, Option<u32>, commlens_core::NcclVersion);

/// The kind and nccl-tests size the model is asked about for an operation.
pub fn model_query(kind: OpKind, bytes: u64, nranks: u32) -> (OpKind, u64) {
    match kind {
        OpKind::Send | OpKind::Recv | OpKind::SendRecv => (OpKind::SendRecv, bytes),
        k => (k, algo_bytes(k, bytes, nranks, BusConvention::NcclTests)),
    }
}

impl<'a> Expected<'a> {
    /// Predicts every operation of `t` on `cluster`; `bw` gives the measured side.
    ///
    /// Two passes, so that one predictor at a time is alive (each holds a copy of the
    /// cluster and its tuning table; a 100,000-rank job has tens of thousands of logical
    /// communicators): the first pass gives every handle with operations its shared model
    /// (the first handle of a key, in operation order, builds it) and collects the
    /// distinct (kind, bytes) each model is asked about; the second builds each model's
    /// predictor, fills its cache and drops it.
    pub fn compute(t: &'a OpTable, cluster: Cluster, bw: &BandwidthReport) -> Expected<'a> {
        const UNTRIED: u32 = u32::MAX;
        let mut model_of: Vec<u32> = vec![UNTRIED; t.comms.len()];
        let mut builders: Vec<CommIdx> = Vec::new();
        let mut asked: Vec<HashSet<(OpKind, u64)>> = Vec::new();
        let mut by_key: HashMap<ModelKey, u32> = HashMap::new();
        for op in t.ops() {
            let c = op.comm.ix();
            let Some(slot) = model_of.get_mut(c) else { continue };
            if *slot == UNTRIED {
                let mut new_model = || {
                    builders.push(op.comm);
                    asked.push(HashSet::new());
                    (builders.len() - 1) as u32
                };
                *slot = match model_key(t, op.comm) {
                    Some(key) => *by_key.entry(key).or_insert_with(new_model),
                    None => new_model(),
                };
            }
            asked[*slot as usize].insert((op.kind, op.bytes));
        }
        drop(by_key);
        let env = NcclEnv::default();
        let mut made: Vec<Option<(usize, CommModel)>> = Vec::with_capacity(builders.len());
        let mut models: Vec<(u32, HashMap<(OpKind, u64), Prediction>)> = Vec::new();
        for (builder, asked) in builders.into_iter().zip(asked) {
            made.push(predictor(&cluster, t, builder, &env).map(|(p, m)| {
                let mut cache = HashMap::new();
                for (kind, bytes) in asked {
                    let query = model_query(kind, bytes, p.nranks);
                    cache.entry(query).or_insert_with(|| p.predict(query.0, query.1));
                }
                models.push((p.nranks, cache));
                (models.len() - 1, m)
            }));
        }
        let mut comms = vec![None; t.comms.len()];
        let mut slots = vec![None; t.comms.len()];
        for (c, &m) in model_of.iter().enumerate() {
            if let Some(Some((k, model))) = made.get(m as usize) {
                comms[c] = Some(*model);
                slots[c] = Some(*k);
            }
        }
        let measured = bw.ops.iter().filter_map(|o| o.m.busbw_gb_s.map(|b| (o.op, b))).collect();
        Expected { cluster, comms, table: t, measured, slots, models }
    }

    /// The figures of `table.per_rank[d].op(i)`.
    pub fn get(&self, d: usize, i: usize) -> Option<OpExpected> {
        let op = self.table.per_rank.get(d)?.get(i)?;
        let m = (*self.slots.get(op.comm.ix())?)?;
        let (nranks, cache) = &self.models[m];
        let query = model_query(op.kind, op.bytes, *nranks);
        let (pred, size) = (cache.get(&query)?, query.1);
        let at = OpRef { dev: DevIdx(d as u32), index: i as u32 };
        let measured = self.measured.binary_search_by_key(&at, |m| m.0).ok().map(|k| self.measured[k].1);
        let efficiency = match measured {
            Some(m) if pred.busbw_gb_s > 0.0 && pred.busbw_gb_s.is_finite() => Some(m / pred.busbw_gb_s),
            _ => None,
        };
        Some(OpExpected {
            size_bytes: size,
            time_us: pred.time_us,
            busbw_gb_s: pred.busbw_gb_s,
            algo: pred.algo,
            proto: pred.proto,
            n_channels: pred.n_channels,
            measured_busbw_gb_s: measured,
            efficiency,
        })
    }

    /// The figures of every modelled operation, rank after rank.
    pub fn all(&self) -> impl Iterator<Item = OpExpected> + '_ {
        self.table
            .per_rank
            .iter()
            .enumerate()
            .flat_map(move |(d, ops)| (0..ops.len()).filter_map(move |i| self.get(d, i)))
    }
}

/// The key of a handle's shared predictor; `None` (a predictor of its own) outside a
/// logical communicator.
fn model_key(t: &OpTable, comm: CommIdx) -> Option<ModelKey> {
    let c = t.comms.get(comm.ix())?;
    let version = t.processes.get(c.proc.ix()).and_then(|p| p.nccl_version).unwrap_or(DEFAULT_VERSION);
    Some((c.logical?, c.nranks, c.n_nodes, version))
}

/// A predictor for a handle of more than one rank, and what it ran on.
fn predictor(cluster: &Cluster, t: &OpTable, comm: CommIdx, env: &NcclEnv) -> Option<(Predictor, CommModel)> {
    let c = t.comms.get(comm.ix())?;
    let version = t.processes.get(c.proc.ix()).and_then(|p| p.nccl_version).unwrap_or(DEFAULT_VERSION);
    let logged = commlens_model::tuner::logged::logged_graphs(t, comm).is_some();
    let p = Predictor::for_comm(cluster, t, comm, version, env.clone())?;
    if p.nranks <= 1 {
        return None;
    }
    let m = CommModel { nranks: p.nranks, nnodes: p.nnodes, logged_graphs: logged };
    Some((p, m))
}

/// The cluster a run ran on: the table's facts (hosts, GPUs per host,
/// topologies, transport) and what the inputs' NCCL logs and nccl-tests
/// outputs say line by line (GPU names, NICs, network, CPU), and topology XML
/// files among the inputs; the preset of its GPU (else `dgx-a100`) for the
/// rest, with provenance. Inputs that cannot be read again (pipes) or are not
/// text logs (traces, Parquet) add nothing beyond the table.
pub fn run_cluster(inputs: &[PathBuf], t: &OpTable) -> Cluster {
    run_cluster_noted(inputs, t, None)
}

/// [`run_cluster`], taking the lines of the logs the loader noted while it
/// read them (`commlens_ingest::noted`) instead of reading those files again;
/// files it did not note are read here as before. The facts are the same.
pub fn run_cluster_noted(inputs: &[PathBuf], t: &OpTable, noted: Option<&NotedLines>) -> Cluster {
    let mut facts = RunFacts::default();
    for input in inputs {
        let Ok(files) = commlens_ingest::expand_inputs(std::slice::from_ref(input)) else { continue };
        for (p, _) in files {
            let label = label(&p);
            // A noted file is a text log (no topology XML, no Parquet): the loader read it as one.
            if let Some(lines) = noted.and_then(|n| n.of(&p)) {
                for raw in lines {
                    note_line(raw, &label, &mut facts);
                }
                continue;
            }
            if is_topo_xml(&p).unwrap_or(false) {
                if let (Ok(topo), Ok(body)) = (read_topo_xml(&p), std::fs::read_to_string(&p)) {
                    facts.note_topo_xml(&body, &label);
                    facts.topologies.push(topo);
                }
            } else if is_text_log(&p) {
                scan_lines(&p, &label, &mut facts);
            }
        }
    }
    facts.merge(facts_from_table(t));
    let mut c = cluster_from_facts(&facts, None).unwrap_or_else(|e| {
        let mut c = preset("dgx-a100").expect("the dgx-a100 preset exists");
        c.provenance = vec![format!("preset dgx-a100: no cluster from the run ({e})")];
        c
    });
    c.name = match inputs {
        [] => "from the run's table".to_string(),
        [one] => format!("from {}", label(one)),
        many => format!("from {} inputs", many.len()),
    };
    c
}

fn label(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// An NCCL log or nccl-tests output (not a trace, plugin file or Parquet table).
fn is_text_log(p: &Path) -> bool {
    let parquet = p.extension().is_some_and(|x| x.eq_ignore_ascii_case("parquet"))
        || std::fs::File::open(p).and_then(|mut f| {
            let mut m = [0u8; 4];
            std::io::Read::read_exact(&mut f, &mut m).map(|_| &m == b"PAR1")
        }).unwrap_or(false);
    !parquet && matches!(sniff(p), Ok(InputFormat::NcclLog))
}

/// Feeds every line of a file (plain or gzip) to [`RunFacts::note_log_line`];
/// a read error ends the file quietly (the loader reported it already).
fn scan_lines(path: &Path, label: &str, facts: &mut RunFacts) {
    let Ok(mut lines) = FileLines::open(path, 1 << 20, true) else { return };
    let info = memchr::memmem::Finder::new(b"NCCL INFO ");
    while let Ok(Some(raw)) = lines.next_line() {
        if may_note(&info, raw) {
            note_line(raw, label, facts);
        }
    }
}

fn note_line(raw: &[u8], label: &str, facts: &mut RunFacts) {
    match std::str::from_utf8(raw) {
        Ok(s) => facts.note_log_line(s, label),
        Err(_) => facts.note_log_line(&String::from_utf8_lossy(raw), label),
    }
}

/// Whether [`RunFacts::note_log_line`] could take anything from a line: lines
/// without an NCCL INFO prefix (it reads rank lines there), and NCCL INFO
/// messages that start as the hardware lines it reads do (`Using network`,
/// `NET/…`, `CPU/…`). Operation and tuning lines, nearly all of a large log,
/// are passed over without decoding them.
fn may_note(info: &memchr::memmem::Finder<'_>, raw: &[u8]) -> bool {
    match info.find(raw) {
        None => true,
        Some(at) => matches!(raw.get(at + b"NCCL INFO ".len()), Some(b'U' | b'N' | b'C')),
    }
}
