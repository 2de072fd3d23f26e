//! Every subcommand's `--help`, through the binary: fits 80 columns (the
//! usage line aside, which clap does not wrap), has examples, and says what
//! each argument and flag is; outputs are `-o/--out` wherever a command
//! writes files.

mod common;

fn help(args: &[&str]) -> String {
    let r = common::run_limited(common::commlens_cmd(args), 30, &format!("{args:?}"));
    assert_eq!(r.code, 0, "{args:?}: {}", r.err);
    r.out
}

fn subcommands() -> Vec<String> {
    let top = help(&["--help"]);
    let mut in_cmds = false;
    let mut out = Vec::new();
    for l in top.lines() {
        if l.starts_with("Commands:") {
            in_cmds = true;
            continue;
        }
        if in_cmds {
            if !l.starts_with("  ") {
                break;
            }
            // A command's name starts at column 2; wrapped descriptions are indented further.
            if !l.starts_with("   ") {
                let name = l.split_whitespace().next().unwrap().to_string();
                if name != "help" {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Lines that name an argument or flag whose help text is missing: a flag
/// alone on its line with nothing indented under it.
fn undocumented(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut bad = Vec::new();
    let mut in_args = false;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("Arguments:") || l.starts_with("Options:") {
            in_args = true;
            continue;
        }
        if !l.starts_with(' ') {
            in_args = false;
        }
        let t = l.trim_start();
        let is_arg = t.starts_with('-') || t.starts_with('<') || t.starts_with('[');
        if !in_args || !is_arg || l.len() - t.len() > 6 {
            continue;
        }
        // `[default: …] [possible values: …]` alone is no help text.
        let has_same_line = t.split("  ").skip(1).any(|p| !p.trim().is_empty() && !p.trim().starts_with('['));
        let next_deeper = lines.get(i + 1).is_some_and(|n| {
            let nt = n.trim_start();
            !nt.is_empty() && n.len() - nt.len() > l.len() - t.len() && !nt.starts_with('-') && !nt.starts_with('[')
        });
        if !has_same_line && !next_deeper {
            bad.push(l.to_string());
        }
    }
    bad
}

#[test]
fn every_subcommand_help_fits_80_columns_has_examples_and_documents_every_flag() {
    let cmds = subcommands();
    assert!(cmds.len() >= 14, "{cmds:?}");
    let mut problems = Vec::new();
    for c in &cmds {
        let text = help(&[c, "--help"]);
        for l in text.lines().filter(|l| !l.starts_with("Usage:")) {
            if l.chars().count() > 80 {
                problems.push(format!("{c}: {} columns: {l}", l.chars().count()));
            }
        }
        if !text.contains("Examples:") {
            problems.push(format!("{c}: no examples"));
        }
        for l in undocumented(&text) {
            problems.push(format!("{c}: no help text for `{}`", l.trim()));
        }
        // Equation numbers name their source.
        if text.contains("eq.") || text.contains("eqs.") {
            assert!(text.contains("Borzyk") || text.contains("Singh") || text.contains("thesis"), "{c}: an equation number without its source");
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_undocumented_check_finds_a_bare_flag() {
    let text = "Options:\n      --nodes <NODES>  Nodes\n      --bare <BARE>\n      --long <LONG>\n          Explained below\n      --format <F>\n          [default: text]\n      --mode <M>  [default: a]\n  -h, --help  Print help\n";
    assert_eq!(undocumented(text), ["      --bare <BARE>", "      --format <F>", "      --mode <M>  [default: a]"]);
}

#[test]
fn commands_that_write_files_take_dash_o() {
    for c in ["report", "trace", "fuse", "export", "simulate", "demo"] {
        let text = help(&[c, "--help"]);
        assert!(text.contains("-o, --out"), "{c} has no -o/--out:\n{text}");
    }
}

/// `stats` text fits 80 columns on the demo's logs (the operation mix is cut, with a note),
/// and `--wide` prints it whole.
#[test]
fn stats_tables_fit_80_columns_unless_wide() {
    let dir = common::temp_dir("width", "demo");
    let cfg = commlens_synth::RunConfig::default();
    commlens_synth::write_to_dir(&commlens_synth::generate(&cfg), &dir).unwrap();
    let narrow = help(&["stats", dir.to_str().unwrap()]);
    let over: Vec<&str> = narrow.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(over.is_empty(), "{over:#?}");
    assert!(narrow.contains('…') && narrow.contains("--wide shows everything"), "{narrow}");
    let wide = help(&["stats", dir.to_str().unwrap(), "--wide"]);
    assert!(wide.lines().any(|l| l.chars().count() > 80) && !wide.contains('…'), "{wide}");
    assert!(wide.contains("AllReduce 100%"), "{wide}");
}

/// The README's `commlens export logs/ -o ops.parquet` works as written (and the older
/// `--parquet` still does).
#[test]
fn export_writes_parquet_with_dash_o() {
    let dir = common::temp_dir("width", "export");
    commlens_synth::write_to_dir(&commlens_synth::generate(&commlens_synth::RunConfig::default()), &dir.join("logs")).unwrap();
    for flag in ["-o", "--parquet"] {
        let out = dir.join(format!("ops{flag}.parquet"));
        let r = common::run_limited(common::commlens_cmd(&["export", dir.join("logs").to_str().unwrap(), flag, out.to_str().unwrap()]), 120, "export");
        assert_eq!(r.code, 0, "{flag}: {}", r.err);
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.len() > 8 && &bytes[..4] == b"PAR1", "{flag}: not a Parquet file");
    }
}
