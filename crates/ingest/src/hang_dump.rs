//! Reader of in-flight dumps (`commlens-hang` JSON, one file per rank) into
//! [`commlens_core::inflight::RankInflight`]. The schema is documented in
//! `docs/hang-dump.md`; a file of another format or version is an error that
//! names it.

use crate::error::IngestError;
use crate::inputs::expand_inputs;
use commlens_core::inflight::{RankInflight, HANG_DUMP_FORMAT, HANG_DUMP_VERSION};
use std::path::{Path, PathBuf};

/// Reads one dump file.
pub fn read_dump(path: &Path) -> Result<RankInflight, IngestError> {
    let bad = |what: String| IngestError::Format { path: path.to_path_buf(), line: None, what };
    let text = std::fs::read_to_string(path).map_err(|e| IngestError::Io { path: path.to_path_buf(), source: e })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| IngestError::Format {
        path: path.to_path_buf(),
        line: Some(e.line() as u64),
        what: format!("expected a commlens-hang JSON object: {e}"),
    })?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(HANG_DUMP_FORMAT) => {}
        other => return Err(bad(format!("expected \"format\": \"{HANG_DUMP_FORMAT}\", found {other:?}"))),
    }
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == HANG_DUMP_VERSION as u64 => {}
        other => return Err(bad(format!("unsupported dump version {other:?}, this commlens reads {HANG_DUMP_VERSION}"))),
    }
    serde_json::from_value(value).map_err(|e| bad(format!("malformed dump: {e}")))
}

/// Reads every dump under the given files or folders. Files in folders that
/// are not dumps (other JSON, logs) are skipped and returned with the reason.
pub fn read_dumps(paths: &[PathBuf]) -> Result<(Vec<RankInflight>, Vec<(PathBuf, String)>), IngestError> {
    let mut dumps = Vec::new();
    let mut skipped = Vec::new();
    for (path, explicit) in expand_inputs(paths)? {
        // A plugin folder holds the event streams beside the dumps: not dumps, and not worth a parse error each.
        if !explicit && path.extension().is_some_and(|x| x == "clp") {
            skipped.push((path, "a plugin event stream (.clp), not a hang dump".to_string()));
            continue;
        }
        match read_dump(&path) {
            Ok(d) => dumps.push(d),
            Err(e) if !explicit => skipped.push((path, e.to_string())),
            Err(e) => return Err(e),
        }
    }
    if dumps.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    Ok((dumps, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("commlens-hang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_a_dump_and_rejects_others() {
        let good = tmp(
            "r0.json",
            r#"{"format":"commlens-hang","version":1,"host":"h","pid":7,"global_rank":0,"time_ns":5,
                "comms":[{"comm_hash":42,"nranks":2,"rank":0,"current":[{"seq":3,"op":"AllReduce","start_ns":1}]}]}"#,
        );
        let d = read_dump(&good).unwrap();
        assert_eq!(d.comms[0].current[0].seq, 3);
        assert_eq!(d.reason, "");
        let v2 = tmp("r1.json", r#"{"format":"commlens-hang","version":2}"#);
        let e = read_dump(&v2).unwrap_err().to_string();
        assert!(e.contains("r1.json") && e.contains("unsupported dump version"), "{e}");
        let other = tmp("x.json", r#"{"traceEvents":[]}"#);
        assert!(read_dump(&other).unwrap_err().to_string().contains("expected \"format\""));
        let broken = tmp("y.json", "{\n\"format\": ");
        let e = read_dump(&broken).unwrap_err().to_string();
        assert!(e.contains("y.json:2"), "{e}");
        let (dumps, skipped) = read_dumps(&[good.parent().unwrap().to_path_buf()]).unwrap();
        assert_eq!(dumps.len(), 1);
        assert_eq!(skipped.len(), 3);
    }
}
