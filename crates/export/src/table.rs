//! A titled table of strings, rendered as aligned text or as CSV.
//!
//! Text fits [`text_width`] columns (80 unless the CLI's `--wide` lifts the
//! limit) where cutting long free text can make it fit: the widest
//! left-aligned column holding a cell over 16 characters (operation mixes,
//! GPU names, formulas) is cut with `…`, down to 10 columns, then the next.
//! The first column (it names the row), numbers and short labels are never
//! cut, so a table of many numeric columns stays wider. CSV and JSON are never
//! cut.

use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The width tables are fitted to; `usize::MAX` for none.
static TEXT_WIDTH: AtomicUsize = AtomicUsize::new(80);

/// Sets the width text tables are fitted to (`None`: no limit, `--wide`).
pub fn set_text_width(w: Option<usize>) {
    TEXT_WIDTH.store(w.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// The width text tables are fitted to.
pub fn text_width() -> usize {
    TEXT_WIDTH.load(Ordering::Relaxed)
}

/// Narrowest a cut column gets.
const MIN_CUT_WIDTH: usize = 10;

/// `s` cut to `w` characters, the last one `…` when anything was cut.
fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table (notes, totals).
    pub notes: Vec<String>,
    /// Columns of the CSV form when it differs from the text (numbers in base
    /// units named in the header, where the text shows `16.0 MiB`); empty:
    /// CSV has the text's columns.
    pub csv_headers: Vec<String>,
    pub csv_rows: Vec<Vec<String>>,
}

impl Table {
    /// `headers`: names; a trailing `>` right-aligns the column (`"bytes>"`).
    pub fn new(title: &str, headers: &[&str]) -> Table {
        let mut t = Table { title: title.to_string(), ..Table::default() };
        for h in headers {
            match h.strip_suffix('>') {
                Some(name) => {
                    t.headers.push(name.to_string());
                    t.align.push(Align::Right);
                }
                None => {
                    t.headers.push(h.to_string());
                    t.align.push(Align::Left);
                }
            }
        }
        t
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// Gives the CSV form its own columns (see [`Table::row_with_csv`]):
    /// machine-readable names with the unit (`size_bytes`, `busbw_gb_s`).
    pub fn csv_columns(&mut self, headers: &[&str]) {
        self.csv_headers = headers.iter().map(|h| h.to_string()).collect();
    }

    /// A row shown as `cells` and written to CSV as `csv` (plain numbers,
    /// empty when unknown); needs [`Table::csv_columns`].
    pub fn row_with_csv(&mut self, cells: Vec<String>, csv: Vec<String>) {
        debug_assert_eq!(csv.len(), self.csv_headers.len());
        self.row(cells);
        self.csv_rows.push(csv);
    }

    pub fn note(&mut self, s: impl Into<String>) {
        self.notes.push(s.into());
    }

    /// Aligned text with a title line and a rule under the header.
    pub fn to_text(&self) -> String {
        let n = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        // Fit the width: narrow the widest free-text column, one column at a time.
        let limit = text_width();
        let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        // Only long free text is cut (lists, names, formulas: a cell over 16 characters in a
        // left-aligned column); numbers and short labels never are.
        let long_text: Vec<bool> = (0..n)
            .map(|i| self.align[i] == Align::Left && self.rows.iter().any(|r| r.get(i).is_some_and(|c| c.chars().count() > 16)))
            .collect();
        while total(&width) > limit {
            // The first column names the row (a figure, a file): never cut.
            let Some(i) = (1..n)
                .filter(|&i| long_text[i] && width[i] > MIN_CUT_WIDTH)
                .max_by_key(|&i| (width[i], std::cmp::Reverse(i)))
            else {
                break;
            };
            let over = total(&width) - limit;
            width[i] = width[i].saturating_sub(over).max(MIN_CUT_WIDTH);
        }
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().enumerate().map(|(i, c)| cut(c, width.get(i).copied().unwrap_or(usize::MAX))).collect())
            .collect();
        let headers: Vec<String> = self.headers.iter().enumerate().map(|(i, h)| cut(h, width[i])).collect();
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "{}", self.title);
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = width[i].saturating_sub(c.chars().count());
                match self.align[i] {
                    Align::Right => {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    }
                    Align::Left => {
                        s.push_str(c);
                        if i + 1 < n {
                            s.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
            }
            let _ = writeln!(out, "{}", s.trim_end());
        };
        line(&headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &rows {
            line(r, &mut out);
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        if rows.iter().flatten().zip(self.rows.iter().flatten()).any(|(a, b)| a.len() != b.len()) {
            let _ = writeln!(out, "(… = cut to fit {limit} columns; --wide shows everything)");
        }
        out
    }

    /// RFC 4180 CSV: header row then data rows (title and notes are not data).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let write_row = |cells: &[String], out: &mut String| {
            let quoted: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
            out.push_str(&quoted.join(","));
            out.push('\n');
        };
        if !self.csv_headers.is_empty() {
            write_row(&self.csv_headers, &mut out);
            for r in &self.csv_rows {
                write_row(r, &mut out);
            }
            return out;
        }
        write_row(&self.headers, &mut out);
        for r in &self.rows {
            write_row(r, &mut out);
        }
        out
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A byte figure over `ops` operations of which `unknown` have no known
/// size: `?` when none is known, `16.0 MiB+?` (a lower bound) when some are
/// unknown, else [`human_bytes`]. Unknown sizes are never shown as 0 B.
pub fn human_bytes_of(b: u64, ops: u64, unknown: u64) -> String {
    if unknown == 0 {
        human_bytes(b)
    } else if unknown >= ops {
        "?".to_string()
    } else {
        format!("{}+?", human_bytes(b))
    }
}

/// `1536` → `1.5 KiB`; exact bytes below 1 KiB.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_alignment() {
        let mut t = Table::new("T", &["name", "n>"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long name".into(), "12345".into()]);
        t.note("note");
        let s = t.to_text();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "T");
        assert_eq!(lines[1], "name           n");
        assert_eq!(lines[2], "---------  -----");
        assert_eq!(lines[3], "a              1");
        assert_eq!(lines[4], "long name  12345");
        assert_eq!(lines[5], "note");
    }

    #[test]
    fn text_fits_the_width_by_cutting_free_text_columns() {
        let mut t = Table::new("t", &["communicator", "ops>", "operation mix", "bytes>"]);
        t.row(vec!["world0".into(), "12".into(), "AllReduce 51%, AllGather 30%, ReduceScatter 19%".repeat(2), "16.0 MiB".into()]);
        let text = t.to_text();
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert!(text.contains('…') && text.contains("16.0 MiB") && text.contains("world0"), "{text}");
        // CSV keeps every character.
        assert!(t.to_csv().contains(&"AllReduce 51%, AllGather 30%, ReduceScatter 19%".repeat(2)));
    }

    #[test]
    fn csv_columns_replace_display_strings() {
        let mut t = Table::new("t", &["size>", "busbw>"]);
        t.csv_columns(&["size_bytes", "busbw_gb_s"]);
        t.row_with_csv(vec!["16.0 MiB".into(), "12.50 GB/s".into()], vec!["16777216".into(), "12.5".into()]);
        assert_eq!(t.to_csv(), "size_bytes,busbw_gb_s\n16777216,12.5\n");
        assert!(t.to_text().contains("16.0 MiB") && t.to_text().contains("12.50 GB/s"));
    }

    #[test]
    fn csv_quoting() {
        let mut t = Table::new("T", &["a", "b"]);
        t.row(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(t.to_csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn bytes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(268_435_456), "256 MiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}
