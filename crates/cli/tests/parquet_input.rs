//! Our own Parquet tables as inputs, through the binary: the report command
//! `commlens demo` prints is run exactly as printed and gives the bandwidth
//! section of the demo's own report (GPU spans survive the round trip);
//! `diff`, `stats`, `export` and `trace` read `fused.parquet`; a folder with
//! other inputs keeps skipping Parquet files; a table mixed with the inputs
//! it came from is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

fn commlens<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The report's bandwidth section: the number of plotted operations and the
/// per-kind rows' kind, timed ops, median and max busbw.
fn busbw_section(html: &Path) -> (usize, Vec<Vec<String>>) {
    let s = std::fs::read_to_string(html).unwrap();
    let start = s.find(r#"<section class="card" id="busbw">"#).expect("a bandwidth section");
    let sec = &s[start..start + s[start..].find("</section>").unwrap()];
    assert!(!sec.contains("Not available"), "the bandwidth section has data");
    let body = &sec[sec.find("<tbody>").expect("a per-kind table")..];
    let rows = body
        .split("<tr>")
        .skip(1)
        .map(|r| {
            r.split("<td")
                .skip(1)
                .take(4)
                .map(|c| c[c.find('>').unwrap() + 1..c.find("</td>").unwrap()].to_string())
                .collect()
        })
        .collect();
    (sec.matches("<circle").count(), rows)
}

fn stats_json(input: &Path) -> serde_json::Value {
    let (code, out, err) = commlens(&["stats".as_ref(), input.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["stats"].clone()
}

#[test]
fn demo_printed_report_command_reads_the_fused_table() {
    let dir = std::env::temp_dir().join(format!("commlens-cli-pq-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = commlens(&["demo", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    // Exactly the printed command, into a report of its own.
    let line = out.lines().find(|l| l.starts_with("$ commlens report ")).expect("the demo prints the report command");
    let mut args: Vec<String> = line["$ commlens ".len()..].split_whitespace().map(str::to_string).collect();
    assert_eq!(args[1], dir.join("fused").display().to_string(), "{line}");
    let o = args.iter().position(|a| a == "-o").expect("-o in the printed command");
    let demo_html = PathBuf::from(&args[o + 1]);
    let own_html = dir.join("report-from-parquet.html");
    args[o + 1] = own_html.display().to_string();
    let (code, out2, err) = commlens(&args);
    assert_eq!(code, 0, "{line}: {err}");
    assert!(out2.contains("496 operations, 4 ranks"), "{out2}");
    assert!(err.contains("fused.parquet: commlens table (schema 1"), "{err}");

    // The bandwidth section: every operation timed, the same figures per kind
    // as the demo's report built from the fused table in memory.
    let (points, rows) = busbw_section(&own_html);
    let (demo_points, demo_rows) = busbw_section(&demo_html);
    assert_eq!(points, 496);
    assert_eq!((points, &rows), (demo_points, &demo_rows));
    assert!(rows.iter().any(|r| r[0] == "AllReduce" && r[2].ends_with("GB/s")), "{rows:?}");

    // diff of the table with itself: no regression, exit 0.
    let fused = dir.join("fused/fused.parquet");
    let (code, _, err) = commlens(&["diff".as_ref(), fused.as_os_str(), fused.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no regression"), "{err}");

    // stats of the table (file or output folder) equal the logs' stats.
    let logs = dir.join("logs");
    let from_logs = stats_json(&logs);
    assert_eq!(stats_json(&fused), from_logs);
    assert_eq!(stats_json(&dir.join("fused")), from_logs);

    // export and trace read it too; the re-exported table has the same stats.
    let re = dir.join("re.parquet");
    let (code, out, err) = commlens(&["export".as_ref(), fused.as_os_str(), "--parquet".as_ref(), re.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("496 rows"), "{out}");
    assert_eq!(stats_json(&re), from_logs);
    let tr = dir.join("tr");
    let (code, out, err) = commlens(&["trace".as_ref(), fused.as_os_str(), "-o".as_ref(), tr.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("496 slices with GPU time"), "{out}");

    // A folder with other inputs still skips the Parquet files in it.
    let mixed = dir.join("logs-and-table");
    std::fs::create_dir_all(&mixed).unwrap();
    for e in std::fs::read_dir(&logs).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, mixed.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::copy(&fused, mixed.join("fused.parquet")).unwrap();
    assert_eq!(stats_json(&mixed), from_logs);

    // The table with the logs it came from would count everything twice.
    let (code, _, err) = commlens(&["stats".as_ref(), fused.as_os_str(), logs.as_os_str()]);
    assert_eq!(code, 2);
    assert!(err.contains("count operations twice") && err.contains("fused.parquet"), "{err}");

    // A truncated table is an error naming the file.
    let cut = dir.join("cut.parquet");
    let bytes = std::fs::read(&fused).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (code, _, err) = commlens(&["report".as_ref(), cut.as_os_str(), "-o".as_ref(), dir.join("x.html").as_os_str()]);
    assert_eq!(code, 2);
    assert!(err.contains("cut.parquet") && err.contains("not a readable Parquet file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
