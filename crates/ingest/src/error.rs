//! Errors of the readers. Every error names the file, and the line where one applies.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum IngestError {
    Io { path: PathBuf, source: std::io::Error },
    /// The file has no line with an NCCL prefix.
    NotNcclLog { path: PathBuf, lines: u64, first_line: Option<String> },
    /// The file looks binary (NUL bytes in its first block).
    Binary { path: PathBuf },
    /// No input files were found under the given paths.
    NoInputs { paths: Vec<PathBuf> },
    /// A structured input (JSON dump, trace) does not follow its format.
    Format { path: PathBuf, line: Option<u64>, what: String },
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IngestError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            IngestError::NotNcclLog { path, lines, first_line } => {
                write!(
                    f,
                    "{}: not an NCCL debug log: none of its {lines} lines has the \
                     `host:pid:tid [dev] NCCL INFO …` prefix that NCCL_DEBUG=INFO writes",
                    path.display()
                )?;
                if let Some(l) = first_line {
                    write!(f, " (line 1: {l:?})")?;
                }
                plugin_hint(f, path)
            }
            IngestError::Binary { path } => {
                write!(f, "{}: binary data (NUL bytes at the start), expected an NCCL debug log (text)", path.display())?;
                plugin_hint(f, path)
            }
            IngestError::Format { path, line, what } => {
                // What a reader says may quote the input: never more than an excerpt of it.
                let what = crate::bytes::cap_excerpts(what);
                match line {
                    Some(l) => write!(f, "{}:{l}: {what}", path.display()),
                    None => write!(f, "{}: {what}", path.display()),
                }
            }
            IngestError::NoInputs { paths } => {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(f, "no input files found in: {}", shown.join(", "))
            }
        }
    }
}

/// A `.clp` file read as a log: its header is damaged, say so.
fn plugin_hint(f: &mut fmt::Formatter<'_>, path: &std::path::Path) -> fmt::Result {
    if path.extension().is_some_and(|x| x.eq_ignore_ascii_case("clp")) {
        write!(
            f,
            "; as a commlens plugin file (.clp) it is corrupt: it does not start with the `{} v1` header line",
            crate::plugin_out::MAGIC
        )?;
    }
    Ok(())
}

impl std::error::Error for IngestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IngestError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
