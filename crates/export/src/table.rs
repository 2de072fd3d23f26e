//! A titled table of strings, rendered as aligned text or as CSV.

use std::fmt::Write;

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
        line(&self.headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
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
