//! `commlens watch DIR`: a view of a running job from the files the commlens
//! profiler plugin appends to (`COMMLENS_PLUGIN_DIR`), refreshed every
//! `--interval` seconds. Each refresh reads only what the files gained
//! (`ingest::plugin_follow`), picks up new files and lists hang dumps
//! ([`job`]); the view ([`view`]) is redrawn in place on a terminal
//! ([`term`]), or printed as plain snapshots one after another when standard
//! output is not a terminal or with `--once` / `--ticks`, as text or JSON lines.
//!
//! Ends on `q`, Ctrl-C or SIGTERM (the terminal restored), after `--ticks`,
//! or when every file has its END record (unless `--follow`). An error when no
//! plugin file ever appeared, or when a file could not be read.

mod job;
mod term;
mod view;

use super::CmdResult;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    Text,
    /// One JSON object per snapshot and line.
    Json,
}

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// The folder the plugin writes into (COMMLENS_PLUGIN_DIR); searched three levels deep.
    pub dir: PathBuf,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Seconds of the most recent activity behind the recent busbw, calls/s and slowest ranks.
    #[arg(long, default_value_t = 10.0)]
    pub window: f64,
    /// Print one snapshot and exit (an error when the folder holds no plugin file).
    #[arg(long, conflicts_with = "ticks")]
    pub once: bool,
    /// Print this many snapshots one after another, then exit.
    #[arg(long)]
    pub ticks: Option<u64>,
    /// Keep watching after every file has its END record (a process may start new communicators).
    #[arg(long)]
    pub follow: bool,
    /// Snapshots as text, or JSON (one object per line).
    #[arg(long, value_enum, default_value_t = WatchFormat::Text)]
    pub format: WatchFormat,
}

fn positive(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "--{name} must be a positive number of seconds (got {v})"
        ))
    }
}

pub fn run(a: &WatchArgs) -> CmdResult {
    positive("interval", a.interval)?;
    positive("window", a.window)?;
    if a.dir.exists() && !a.dir.is_dir() {
        return Err(format!(
            "{}: not a folder; commlens watch follows the folder the plugin writes into (COMMLENS_PLUGIN_DIR)",
            a.dir.display()
        )
        .into());
    }
    term::catch_interrupts();
    let live = a.format == WatchFormat::Text
        && !a.once
        && a.ticks.is_none()
        && std::io::stdout().is_terminal();
    let screen = live.then(|| term::Screen::enter(std::io::stdin().is_terminal()));
    if let (true, Some((cols, _))) = (live, term::size()) {
        // `--wide` lifted the limit already; otherwise fit the terminal.
        if commlens_export::table::text_width() != usize::MAX {
            commlens_export::table::set_text_width(Some(cols));
        }
    }
    let mut job = job::Job::new(&a.dir, a.window);
    let limit = if a.once {
        1
    } else {
        a.ticks.unwrap_or(u64::MAX)
    };
    let interval = Duration::from_secs_f64(a.interval);
    let (mut shown, mut found, mut quit) = (0u64, false, false);
    while shown < limit {
        let began = Instant::now();
        let snap = job.tick();
        shown += 1;
        found |= snap.waiting.is_none();
        if a.once && !found && job.errors().is_empty() {
            let why = snap.waiting.unwrap_or_default();
            return Err(format!(
                "{}: {why}; the plugin writes one file per process once NCCL creates a communicator",
                a.dir.display()
            )
            .into());
        }
        match (&screen, a.format) {
            (Some(s), _) => s.draw(&view::render_text(&snap, ", q quits")),
            (None, WatchFormat::Text) => println!("{}", view::render_text(&snap, "")),
            (None, WatchFormat::Json) => println!("{}", serde_json::to_string(&snap)?),
        }
        std::io::stdout().flush()?;
        if (snap.job_ended && !a.follow) || shown >= limit {
            break;
        }
        let rest = interval.saturating_sub(began.elapsed());
        let asked = match &screen {
            Some(s) => s.wait(rest),
            None => term::wait_for_quit(rest, false),
        };
        if asked {
            quit = true;
            break;
        }
    }
    drop(screen);
    if !job.errors().is_empty() {
        return Err(job.errors().join("\n").into());
    }
    if !found && !quit {
        return Err(format!(
            "{}: no commlens plugin file (.clp) appeared in {shown} snapshot(s); is COMMLENS_PLUGIN_DIR set to this folder?",
            a.dir.display()
        )
        .into());
    }
    Ok(())
}
