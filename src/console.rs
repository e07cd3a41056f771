//! Lines for the person at the terminal, written so that a closed pipe (`upgrade check | head`) or a closed stderr
//! ends the output quietly instead of panicking as `println!` does. Unix tools stop quietly when their reader goes;
//! `upgrade` keeps going instead (an upgrade in progress must not die because its viewer did), and what it says is
//! still in the journal and the host logs.

use std::fmt::Arguments;
use std::io::Write;

/// Writes one line on stdout; a failed write is dropped.
pub(crate) fn line_out(args: Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
}

/// Writes one line on stderr; a failed write is dropped.
pub(crate) fn line_err(args: Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// `println!` that survives a closed stdout.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::console::line_out(format_args!($($arg)*)) };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::console::line_err(format_args!($($arg)*)) };
}

pub(crate) use {errln, outln};
