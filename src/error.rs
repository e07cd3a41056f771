//! Errors are values with fields; they are rendered once, at the top, where `exit_code` picks the process status.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::vocabulary::ExitCode;

/// Where in a user's file something went wrong. Lines and columns count from 1; 0 means unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Shared: every variable of a file carries its location, and a 5,000-host inventory clones them per host.
    pub file: Arc<Path>,
    pub line: usize,
    pub column: usize,
}

impl Location {
    pub fn new(file: impl AsRef<Path>, line: usize, column: usize) -> Self {
        Location { file: Arc::from(file.as_ref()), line, column }
    }
    pub fn file(file: impl AsRef<Path>) -> Self {
        Location::new(file, 0, 0)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
            if self.column > 0 {
                write!(f, ":{}", self.column)?;
            }
        }
        Ok(())
    }
}

/// What kind of failure this is; it alone decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The user's files or flags are wrong; nothing on any host was touched.
    Input,
    /// One or more hosts failed, or the run stopped on the failure threshold.
    HostsFailed,
    /// The run was interrupted by a signal.
    Interrupted,
    /// Something on the controller itself failed (I/O on the state directory, a bug).
    Internal,
}

impl ErrorKind {
    pub fn code(self) -> ExitCode {
        match self {
            ErrorKind::Input => ExitCode::BadInput,
            ErrorKind::HostsFailed | ErrorKind::Internal => ExitCode::Failed,
            ErrorKind::Interrupted => ExitCode::Interrupted,
        }
    }

    pub fn exit_code(self) -> i32 {
        self.code().code()
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub location: Option<Location>,
    /// What the user should do about it.
    pub hint: Option<String>,
}

impl Error {
    pub fn input(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Input, message: message.into(), location: None, hint: None }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Internal, message: message.into(), location: None, hint: None }
    }
    pub fn hosts_failed(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::HostsFailed, message: message.into(), location: None, hint: None }
    }
    pub fn at(mut self, location: Location) -> Self {
        self.location = Some(location);
        self
    }
    pub fn in_file(self, file: &Path) -> Self {
        self.at(Location::file(file))
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    /// Reading a user's file failed: names the file (once, as the location) and says what to check.
    pub fn read_file(path: &Path, err: std::io::Error) -> Self {
        use std::io::ErrorKind as Io;
        let (message, hint) = match err.kind() {
            Io::NotFound => {
                ("no such file".to_string(), "check the path; a relative path starts from the current directory")
            }
            Io::PermissionDenied => {
                ("permission denied: cannot read this file".to_string(), "make the file readable by this user")
            }
            Io::IsADirectory => ("this is a directory, not a file".to_string(), "name a file"),
            _ => (format!("cannot read this file: {}", io_reason(&err)), "check that the path exists and is readable"),
        };
        Error::input(message).in_file(path).hint(hint)
    }
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
    pub fn code(&self) -> ExitCode {
        self.kind.code()
    }
}

/// An I/O error as a person reads it: `No such file or directory`, without Rust's ` (os error 2)`.
pub fn io_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(end) if text.ends_with(')') => text[..end].to_string(),
        _ => text,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{loc}: {}", self.message)?,
            None => write!(f, "{}", self.message)?,
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
