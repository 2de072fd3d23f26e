//! The job the inputs describe (NCCL versions, nodes, hosts), the first line
//! `stats` and `topo` print and a column of `stats --format csv`.

use commlens_ingest::nccl_tests::BenchFile;

/// The job the inputs describe, printed first by `stats` and `topo` in every
/// format: NCCL versions (from the logs' `NCCL version` lines) and nodes
/// (distinct host names of the processes, or of nccl-tests' `Rank` lines).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Job {
    pub nccl_versions: Vec<String>,
    pub nodes: usize,
    pub hosts: Vec<String>,
}

impl Job {
    pub fn of_table(t: &commlens_core::OpTable) -> Job {
        let mut versions: Vec<commlens_core::NcclVersion> = t.processes.iter().filter_map(|p| p.nccl_version).collect();
        versions.sort();
        versions.dedup();
        let mut hosts: Vec<String> =
            t.processes.iter().map(|p| p.host.clone()).filter(|h| !h.is_empty() && h != "?").collect();
        hosts.sort();
        hosts.dedup();
        Job { nccl_versions: versions.iter().map(|v| v.to_string()).collect(), nodes: hosts.len(), hosts }
    }

    pub fn of_benchmarks(files: &[BenchFile]) -> Job {
        let mut hosts: Vec<String> = files.iter().flat_map(|f| &f.runs).flat_map(|r| r.hosts.iter().cloned()).collect();
        hosts.sort();
        hosts.dedup();
        Job { nccl_versions: Vec::new(), nodes: hosts.len(), hosts }
    }

    /// `job: NCCL 2.26.6 on 2 nodes (a, b)`, saying what the inputs did not tell.
    pub fn line(&self) -> String {
        let versions = match self.nccl_versions.as_slice() {
            [] => "NCCL version unknown (the inputs do not name it)".to_string(),
            [v] => format!("NCCL {v}"),
            vs => format!("NCCL versions {} (mixed)", vs.join(", ")),
        };
        let nodes = match self.nodes {
            0 => "node count unknown (no host names in the inputs)".to_string(),
            n => {
                let mut h: Vec<&str> = self.hosts.iter().take(4).map(String::as_str).collect();
                if self.hosts.len() > 4 {
                    h.push("…");
                }
                format!("{n} node{} ({})", if n == 1 { "" } else { "s" }, h.join(", "))
            }
        };
        format!("job: {versions}; {nodes}")
    }

    /// A `# job` CSV section (the tables of `topo` and of benchmark-only `stats` are sections too).
    pub fn csv(&self) -> String {
        let mut t = commlens_export::table::Table::new("job", &["nccl_versions", "nodes", "hosts"]);
        t.row(vec![self.nccl_versions.join(";"), self.nodes.to_string(), self.hosts.join(";")]);
        format!("# job\n{}", t.to_csv())
    }
}
