//! The report files a CI job reads (`--junit`, `--summary-md`, GitHub's `GITHUB_STEP_SUMMARY`), opened before the
//! run starts and written once it ends, whatever the outcome.
//!
//! Opened first: a path that cannot be written is bad input, said before any host is touched, not found after the
//! whole upgrade when the output has already said how it went (a CI job would read "success" and see exit 1). Each
//! file is held open from then on, so writing it at the end can fail only for lack of space; such a failure is said
//! as a warning and leaves the exit code to the summary, so that the code, the output and the reports agree.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{Error, Result, io_reason};
use crate::vocabulary::Summary;

use super::{junit, summary_md};

/// One report file, open for writing.
struct Report {
    path: PathBuf,
    file: File,
    /// Appended to (GitHub gathers every step's summary in one file), not replaced.
    append: bool,
}

/// The run's report files; empty when none was asked for.
pub(crate) struct ReportFiles {
    junit: Option<Report>,
    markdown: Vec<Report>,
    /// Whether the reports were written: a refusal after the run wrote them leaves them as they are.
    written: AtomicBool,
}

impl ReportFiles {
    /// Opens `--junit` and `--summary-md` (created or emptied), and `GITHUB_STEP_SUMMARY` when set (to append to).
    pub(crate) fn open(junit: Option<&Path>, summary_md: Option<&Path>) -> Result<ReportFiles> {
        let junit = junit.map(|path| open(path, "--junit", "the JUnit report", false)).transpose()?;
        let mut markdown = Vec::new();
        if let Some(path) = summary_md {
            markdown.push(open(path, "--summary-md", "the Markdown summary", false)?);
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
            markdown.push(open(Path::new(&path), "GITHUB_STEP_SUMMARY", "the Markdown summary", true)?);
        }
        Ok(ReportFiles { junit, markdown, written: AtomicBool::new(false) })
    }

    /// Writes the reports of a run that ended with `summary` (already masked), after `took`, its record in
    /// `state_dir`. Returns a warning for each report that could not be written.
    pub(crate) fn write(&self, summary: &Summary, took: Duration, state_dir: &Path) -> Vec<String> {
        self.written.store(true, Ordering::Relaxed);
        let mut warnings = Vec::new();
        if let Some(report) = &self.junit {
            warnings.extend(report.write(&junit::render(summary)));
        }
        if !self.markdown.is_empty() {
            let markdown = summary_md::render(summary, took, state_dir);
            for report in &self.markdown {
                let text = if report.append { format!("{markdown}\n") } else { markdown.clone() };
                warnings.extend(report.write(&text));
            }
        }
        warnings
    }

    /// Writes the reports of a run refused before it started (`summary` says why), unless the run wrote them.
    pub(crate) fn write_refused(&self, summary: &Summary, state_dir: &Path) -> Vec<String> {
        if self.written.load(Ordering::Relaxed) {
            return Vec::new();
        }
        self.write(summary, Duration::ZERO, state_dir)
    }
}

fn open(path: &Path, flag: &str, what: &str, append: bool) -> Result<Report> {
    let opened =
        if append { std::fs::OpenOptions::new().create(true).append(true).open(path) } else { File::create(path) };
    match opened {
        Ok(file) => Ok(Report { path: path.to_path_buf(), file, append }),
        Err(e) => {
            let hint = if append {
                format!("check that the file {flag} names is writable, or unset {flag}")
            } else {
                format!("name a file in a directory that exists and is writable, or leave {flag} out")
            };
            Err(Error::input(format!("{flag}: cannot write {what} {}: {}", path.display(), io_reason(&e))).hint(hint))
        }
    }
}

impl Report {
    fn write(&self, text: &str) -> Option<String> {
        let mut file = &self.file;
        let written = if self.append {
            file.write_all(text.as_bytes())
        } else {
            file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(text.as_bytes()))
        };
        written
            .and_then(|()| file.flush())
            .err()
            .map(|e| format!("cannot write {}: {}", self.path.display(), io_reason(&e)))
    }
}
