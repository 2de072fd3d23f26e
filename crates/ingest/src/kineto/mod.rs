//! Reader of PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped,
//! into a [`KernelTrace`], and the kernel-trace model both GPU-trace readers share.
//!
//! What it keeps, per file (one rank):
//! * GPU kernels of category `kernel` whose name is an NCCL kernel
//!   ([`crate::kernel_name`]), with stream, correlation id, External id,
//!   grid/block, shared memory, registers and any collective metadata
//!   Kineto attached to the kernel itself;
//! * CPU-side collectives: `record_param_comms` ops (`Collective name`,
//!   `In/Out msg nelems`, `dtype`, `Group size`, `Process Group Name/Ranks`,
//!   `Rank`, `Seq`, `External id`) with the `nccl:*` op nested in them, and
//!   `nccl:*` ops that stand alone (older traces: counts from `Input Dims`);
//! * every other GPU activity (kernels, `gpu_memcpy`, `gpu_memset`) as a
//!   24-byte [`ComputeKernel`] with an interned, classified name and the lag
//!   from its launch call, for overlap and kernel-breakdown analyses;
//! * the links between the two ([`link`]), `ProfilerStep#N` ranges,
//!   `distributedInfo` (rank, world size, NCCL version, process groups),
//!   `deviceProperties` (GPU names) and `baseTimeNanoseconds`.
//!
//! The file is streamed ([`stream`]): the `traceEvents` array is never held
//! in memory. A file that ends early (a run killed while writing, or the
//! Chrome format's optional closing bracket) keeps what was read and says so
//! in [`KernelTrace::warnings`]. A malformed event (not an object; `name`,
//! `cat` or `ph` not a string; `args` not an object, `null` included; or,
//! for an event that would be kept, `ts` missing, negative or not a time,
//! `dur` negative or not a time) is skipped and counted by reason in
//! [`TraceStats::skipped`], the first named by its index in `traceEvents`
//! and its name, in the first warning; the rest is kept. No NCCL kernel at all is an error
//! ([`TraceError::NoNcclKernels`]) unless [`TraceOptions::allow_no_kernels`].
//!
//! Modules: [`trace`] (the shared model), [`stream`] (serde pass), [`gpu`]
//! (non-NCCL GPU activity records), [`values`]
//! (lenient values, PyTorch vocabulary), [`link`] (CPU op ↔ kernel links),
//! [`jobs`] (which traces are one job; sizes from network annotations),
//! [`table`] (conversion into the canonical `OpTable`).

mod gpu;
pub mod jobs;
mod link;
mod stream;
pub mod table;
pub mod trace;
pub mod values;

#[cfg(test)]
mod tests;

pub use table::{to_op_table, ConvertNotes};
pub use trace::*;

use serde::de::DeserializeSeed;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

const BUF: usize = 256 * 1024;

/// Reads one Kineto trace file (`.json` or `.json.gz`; gzip is detected by
/// its magic bytes, not the name).
pub fn load_kineto(path: &Path) -> Result<KernelTrace, TraceError> {
    load_kineto_with(path, &TraceOptions::default())
}

pub fn load_kineto_with(path: &Path, opts: &TraceOptions) -> Result<KernelTrace, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::Io { path: path.into(), source: e })?;
    read_kineto(file, &path.display().to_string(), opts)
}

/// Reads a Kineto trace from any reader (plain or gzip), naming it `label`
/// in errors and in [`KernelTrace::path`].
pub fn read_kineto<R: Read>(reader: R, label: &str, opts: &TraceOptions) -> Result<KernelTrace, TraceError> {
    let mut buffered = BufReader::with_capacity(BUF, reader);
    let head = buffered.fill_buf().map_err(|e| TraceError::Io { path: label.into(), source: e })?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let gz = BufReader::with_capacity(BUF, flate2::read::MultiGzDecoder::new(buffered));
        read_json(gz, label, opts)
    } else {
        read_json(buffered, label, opts)
    }
}

fn read_json<R: Read>(reader: R, label: &str, opts: &TraceOptions) -> Result<KernelTrace, TraceError> {
    let mut collector = stream::Collector::default();
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut warnings = Vec::new();
    let result = stream::TopSeed(&mut collector).deserialize(&mut de).and_then(|()| de.end());
    if let Err(e) = result {
        let truncated = e.is_eof() || e.io_error_kind() == Some(std::io::ErrorKind::UnexpectedEof);
        if e.is_io() && !truncated {
            let source = std::io::Error::new(e.io_error_kind().unwrap_or(std::io::ErrorKind::Other), e.to_string());
            return Err(TraceError::Io { path: label.into(), source });
        }
        if !truncated || collector.events == 0 {
            return Err(TraceError::Json {
                path: label.into(),
                line: e.line(),
                column: e.column(),
                msg: e.to_string(),
            });
        }
        warnings.push(format!(
            "the file ends early (line {}, column {}) after {} events: kept what was read",
            e.line(),
            e.column(),
            collector.events
        ));
    }
    if !collector.saw_trace_events {
        return Err(TraceError::NotATrace {
            path: label.into(),
            reason: "a JSON document without a traceEvents array".to_string(),
        });
    }
    let mut trace = link::finish(collector, label, opts)?;
    warnings.append(&mut trace.warnings);
    trace.warnings = warnings;
    Ok(trace)
}
