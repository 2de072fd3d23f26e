//! What each input file is: [`sniff`] tells the operation reader a file needs
//! from its first bytes ([`InputFormat`]); [`classify`] adds what no operation
//! reader takes (nccl-tests results, topology XML, archives), so that a folder
//! can hold anything and each file is read by its own kind or passed over with
//! the reason.

use crate::error::IngestError;
pub use commlens_archive::unpack::{archive_kind, ArchiveKind};
use std::path::Path;

/// Which side of an operation a format sees ([`InputFormat::side`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// `NCCL_DEBUG` logs.
    Log,
    /// Kernel traces (Kineto, nsys).
    Kernels,
    /// Profiler plugins (commlens', NVIDIA's Inspector and example plugin).
    Plugin,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Log => "NCCL debug logs",
            Side::Kernels => "kernel traces",
            Side::Plugin => "profiler-plugin outputs",
        }
    }
}

/// What a file holds, judged by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// `NCCL_DEBUG` text (the default for anything that is not recognised below).
    NcclLog,
    /// PyTorch profiler Chrome-trace JSON (plain or gzip).
    Kineto,
    /// Nsight Systems SQLite export.
    NsysSqlite,
    /// Output of the commlens profiler plugin (`commlens-plugin v1 …`).
    PluginOutput,
    /// NCCL Inspector JSON lines (NVIDIA's Inspector profiler plugin).
    Inspector,
    /// Chrome-trace dump of NVIDIA's example profiler plugin.
    ExamplePlugin,
}

impl InputFormat {
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::NcclLog => "NCCL debug log",
            InputFormat::Kineto => "Kineto trace",
            InputFormat::NsysSqlite => "nsys SQLite export",
            InputFormat::PluginOutput => "commlens plugin output",
            InputFormat::Inspector => "NCCL Inspector output",
            InputFormat::ExamplePlugin => "NCCL example-plugin trace",
        }
    }

    /// Which side of an operation the format sees: NCCL's own log lines,
    /// the GPU kernels of a profiler trace, or a profiler plugin's records.
    /// Tables of one side merge (when their processes differ); tables of two
    /// sides describe the same operations twice and are joined only by `fuse`.
    pub fn side(self) -> Side {
        match self {
            InputFormat::NcclLog => Side::Log,
            InputFormat::Kineto | InputFormat::NsysSqlite => Side::Kernels,
            InputFormat::PluginOutput | InputFormat::Inspector | InputFormat::ExamplePlugin => Side::Plugin,
        }
    }
}

/// Bytes of a file's beginning that [`sniff`] judges it by.
pub(crate) const SNIFF_BYTES: usize = 64 << 10;

/// Looks at the first bytes (decompressed when gzip) of a file.
pub fn sniff(path: &Path) -> Result<InputFormat, IngestError> {
    use std::io::Read;
    let io = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let mut src = crate::lines::open_maybe_gz(path).map_err(io)?;
    let mut head = vec![0u8; SNIFF_BYTES];
    let mut n = 0;
    while n < head.len() {
        match src.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A corrupt gzip stream: let the reader report it properly.
            Err(_) => break,
        }
    }
    Ok(format_of(path, &head[..n]))
}

/// [`sniff`]'s verdict on the first [`SNIFF_BYTES`] (or fewer) of a file.
fn format_of(path: &Path, head: &[u8]) -> InputFormat {
    if crate::plugin_out::is_plugin_output(head) {
        return InputFormat::PluginOutput;
    }
    if head.starts_with(b"SQLite format 3\0") {
        return InputFormat::NsysSqlite;
    }
    let text = crate::bytes::trim_ascii(head);
    if text.starts_with(b"{")
        && [&b"\"traceEvents\""[..], b"\"schemaVersion\"", b"\"deviceProperties\""]
            .iter()
            .any(|k| memchr::memmem::find(text, k).is_some())
    {
        return InputFormat::Kineto;
    }
    // JSON objects or an array of them: NVIDIA's plugin outputs.
    if text.starts_with(b"{") || text.starts_with(b"[") {
        match crate::json_util::sniff_format(path) {
            Ok(Some(crate::json_util::PluginFormat::Inspector)) => return InputFormat::Inspector,
            Ok(Some(crate::json_util::PluginFormat::ExamplePlugin)) => return InputFormat::ExamplePlugin,
            _ => {}
        }
    }
    InputFormat::NcclLog
}

/// What [`classify`] found a file to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Read by the operation reader of this format (text that is nothing
    /// else is `NcclLog`: the log reader says whether it is one).
    Ops(InputFormat),
    /// nccl-tests results; with `nccl_lines` NCCL's debug lines share the
    /// file (run with `NCCL_DEBUG=INFO`), which the log reader then reads too.
    Benchmark { nccl_lines: bool },
    /// NCCL's topology XML (`NCCL_TOPO_DUMP_FILE`): read by `commlens topo`.
    TopoXml,
    /// A tar, tar.gz or zip archive: read when named on the command line
    /// (unpacked, [`crate::inputs::unpack_archives`]).
    Archive(ArchiveKind),
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Ops(f) => f.name(),
            FileKind::Benchmark { .. } => "nccl-tests output",
            FileKind::TopoXml => "NCCL topology XML",
            FileKind::Archive(a) => a.name(),
        }
    }
}

/// What `path` is (see [`FileKind`]), from its first bytes (nccl-tests
/// outputs: as far as their preamble goes, [`crate::nccl_tests::sniff_file`]).
pub fn classify(path: &Path) -> Result<FileKind, IngestError> {
    let io = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let f = sniff(path)?;
    if f != InputFormat::NcclLog {
        return Ok(FileKind::Ops(f));
    }
    if let Some(a) = archive_kind(path).map_err(io)? {
        return Ok(FileKind::Archive(a));
    }
    if crate::topo_xml::is_topo_xml(path)? {
        return Ok(FileKind::TopoXml);
    }
    let b = crate::nccl_tests::sniff_file(path).map_err(io)?;
    Ok(if b.tables { FileKind::Benchmark { nccl_lines: b.nccl_lines } } else { FileKind::Ops(InputFormat::NcclLog) })
}

/// [`classify`] of a file that is not gzip, from its first bytes `head`
/// (all of it when `whole`) with `file` positioned right after them: what
/// `classify` reads four times, read once. Reads further only where
/// `classify` would: a JSON file's first objects, and the lines of an
/// nccl-tests preamble (or of a line crossing [`SNIFF_BYTES`]) past `head`.
pub(crate) fn classify_plain(path: &Path, head: &[u8], whole: bool, file: &mut std::fs::File) -> Result<FileKind, IngestError> {
    let io = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let first = &head[..head.len().min(SNIFF_BYTES)];
    let f = format_of(path, first);
    if f != InputFormat::NcclLog {
        return Ok(FileKind::Ops(f));
    }
    if let Some(a) = commlens_archive::unpack::plain_archive_kind(head) {
        return Ok(FileKind::Archive(a));
    }
    if crate::topo_xml::looks_like_topo_xml(first) {
        return Ok(FileKind::TopoXml);
    }
    // nccl-tests' sniffer on the whole lines of `head`, then on the rest of the file if it must.
    let mut b = crate::nccl_tests::BenchSniffer::default();
    let mut rest = head;
    let mut done = false;
    while let Some(i) = memchr::memchr(b'\n', rest) {
        done = b.line(crate::lines::strip_cr(&rest[..i]));
        rest = &rest[i + 1..];
        if done {
            break;
        }
    }
    if !done {
        if whole {
            if !rest.is_empty() {
                b.line(crate::lines::strip_cr(rest));
            }
        } else {
            use std::io::Read;
            b.read_rest(std::io::Cursor::new(rest).chain(file)).map_err(io)?;
        }
    }
    let b = b.out;
    Ok(if b.tables { FileKind::Benchmark { nccl_lines: b.nccl_lines } } else { FileKind::Ops(InputFormat::NcclLog) })
}
