//! Column projection for reading: [`Columns`] names the built-in columns a
//! read decodes. Parquet stores each column in its own chunk, so a column
//! left out is never read from disk nor decoded; a command that needs no
//! buffers, kernels or line numbers (`stats`) reads a fraction of the file.
//!
//! Every projection holds [`Columns::IDENTITY`]: what [`crate::read_table`]
//! needs to rebuild processes, devices, communicator handles and operations
//! (and re-assemble global ranks and logical communicators across files).
//! A column left out reads as null, and a field that is never null as its
//! default (0, false): `line` 0, `tid` 0, `comm_seq` 0, `recovered` false.

use crate::rows::needed;

/// The built-in columns a read decodes (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// Sorted, unique, every name a built-in column the reader knows.
    names: Vec<&'static str>,
}

impl Columns {
    /// Read by every projection: the process (`host`, `pid`), the device
    /// (`global_rank`, `local_rank`, `cuda_dev`), the communicator handle and
    /// its identity across hosts (`comm_ptr`, `comm_id`, `nranks`,
    /// `rank_in_comm`, `logical_comm`, `logical_comm_idx`) and the operation's
    /// kind and size (`kind`, `count`, `datatype`, `bytes`).
    pub const IDENTITY: &'static [&'static str] = &[
        "host",
        "pid",
        "global_rank",
        "local_rank",
        "cuda_dev",
        "comm_ptr",
        "comm_id",
        "logical_comm",
        "logical_comm_idx",
        "nranks",
        "rank_in_comm",
        "kind",
        "count",
        "datatype",
        "bytes",
    ];

    /// Every column the reader knows (what [`crate::read_table`] reads).
    pub fn all() -> Columns {
        let mut names: Vec<&'static str> = needed().into_iter().map(|c| c.0).collect();
        names.sort_unstable();
        Columns { names }
    }

    /// [`Columns::IDENTITY`] plus `more`; an error naming a column that is
    /// not a built-in column read back (`gpu_dur_ns`, `source_kind` and extra
    /// columns are derived and never read).
    pub fn identity_and(more: &[&str]) -> Result<Columns, String> {
        let known = needed();
        let mut names = Vec::with_capacity(Self::IDENTITY.len() + more.len());
        for want in Self::IDENTITY.iter().copied().chain(more.iter().copied()) {
            match known.iter().find(|(n, _)| *n == want) {
                Some((n, _)) => names.push(*n),
                None => return Err(format!("`{want}` is not a column the commlens reader reads")),
            }
        }
        names.sort_unstable();
        names.dedup();
        Ok(Columns { names })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.binary_search(&name).is_ok()
    }

    /// The columns read, sorted by name.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

impl Default for Columns {
    fn default() -> Self {
        Columns::all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_always_read_and_unknown_names_are_refused() {
        let c = Columns::identity_and(&["line", "kind"]).unwrap();
        assert_eq!(c.len(), Columns::IDENTITY.len() + 1);
        assert!(c.contains("line") && c.contains("host") && !c.contains("sendbuff"));
        let e = Columns::identity_and(&["busbw_gb_s"]).unwrap_err();
        assert!(e.contains("busbw_gb_s"), "{e}");
        assert!(Columns::identity_and(&["gpu_dur_ns"]).is_err());
        let all = Columns::all();
        assert_eq!(all.len(), needed().len());
        assert!(Columns::IDENTITY.iter().all(|n| all.contains(n)));
    }
}
