//! stdout written by a thread of its own, behind an unbounded queue, so a reader that stalls (`--output json` into a
//! pipe nobody reads, a terminal paused with Ctrl-S) never blocks the orchestration or the signal handling: reporters
//! only append to the queue. Before the process exits, `drain` waits for what is queued to be written, in order,
//! for as long as the reader keeps taking it (a bounded wait once it stops: see `drain`).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How much the writer thread hands to the reader at once; progress is counted per piece, so a slow but steady
/// reader of a long line is not mistaken for a stalled one.
const PIECE: usize = 64 * 1024;

/// How long the writer thread lets output gather after a quiet spell before it writes: too short for a person to
/// notice, long enough for the events of a batch of hosts to go out in one write.
const LINGER: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub(crate) struct OutputQueue {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes queued and not yet written.
    pending: usize,
    /// The thread is writing a chunk it took off the queue.
    writing: bool,
    /// The thread waits for output: a push wakes it (one wake-up per event cost more than the writing).
    idle: bool,
    /// When the reader last took something (or, after a quiet spell, when new output was queued).
    last_progress: Instant,
    /// The reader is gone (EPIPE) or the output failed: what is queued is dropped.
    broken: bool,
}

impl OutputQueue {
    /// A queue in front of the process's stdout.
    pub(crate) fn stdout() -> OutputQueue {
        OutputQueue::spawn(|bytes| {
            let mut out = std::io::stdout();
            out.write_all(bytes)?;
            out.flush()
        })
    }

    /// A queue whose thread hands every piece to `write`.
    pub(crate) fn spawn(mut write: impl FnMut(&[u8]) -> std::io::Result<()> + Send + 'static) -> OutputQueue {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                chunks: VecDeque::new(),
                pending: 0,
                writing: false,
                idle: false,
                last_progress: Instant::now(),
                broken: false,
            }),
            changed: Condvar::new(),
        });
        let thread_shared = shared.clone();
        let spawned = std::thread::Builder::new().name("stdout".into()).spawn(move || {
            let shared = thread_shared;
            loop {
                let chunk = {
                    let Ok(mut state) = shared.state.lock() else { return };
                    let after_a_quiet_spell = state.chunks.is_empty();
                    while state.chunks.is_empty() {
                        state.idle = true;
                        state = match shared.changed.wait(state) {
                            Ok(state) => state,
                            Err(_) => return,
                        };
                    }
                    state.idle = false;
                    if after_a_quiet_spell {
                        // Woken by the first event of a busy moment: the events that follow it go out in the same
                        // write. Waking per event was 6% of a wide run's CPU (the futex calls on both sides).
                        drop(state);
                        std::thread::sleep(LINGER);
                        state = match shared.state.lock() {
                            Ok(state) => state,
                            Err(_) => return,
                        };
                    }
                    state.writing = true;
                    // Everything queued goes out together: one write for the events of a busy moment.
                    let mut chunk = state.chunks.pop_front().unwrap_or_default();
                    while let Some(next) = state.chunks.pop_front() {
                        chunk.extend_from_slice(&next);
                    }
                    chunk
                };
                let mut failed = false;
                for piece in chunk.chunks(PIECE) {
                    failed = write(piece).is_err();
                    let Ok(mut state) = shared.state.lock() else { return };
                    state.pending = state.pending.saturating_sub(piece.len());
                    state.last_progress = Instant::now();
                    if failed {
                        break;
                    }
                }
                let Ok(mut state) = shared.state.lock() else { return };
                state.writing = false;
                if failed {
                    state.broken = true;
                    state.chunks.clear();
                    state.pending = 0;
                }
                shared.changed.notify_all();
            }
        });
        if spawned.is_err() {
            // No thread: nothing would ever be written, so say the output is gone rather than queue for ever.
            if let Ok(mut state) = shared.state.lock() {
                state.broken = true;
            }
        }
        OutputQueue { shared }
    }

    /// A `Write` that appends to the queue and never blocks on the reader.
    pub(crate) fn writer(&self) -> Box<dyn Write + Send> {
        Box::new(QueueWriter { queue: self.clone() })
    }

    fn push(&self, bytes: &[u8]) {
        let Ok(mut state) = self.shared.state.lock() else { return };
        if state.broken || bytes.is_empty() {
            return;
        }
        if state.pending == 0 && !state.writing {
            state.last_progress = Instant::now();
        }
        state.pending += bytes.len();
        state.chunks.push_back(bytes.to_vec());
        if state.idle {
            self.shared.changed.notify_all();
        }
    }

    /// Waits until everything queued is written, for as long as the reader keeps taking output: it gives up once
    /// the reader has taken nothing for `idle` since the wait began (a reader that stalled while the run was busy,
    /// a paused terminal, still gets the whole `idle` to come back). Returns the bytes left unwritten (0 when all
    /// was written).
    pub(crate) fn drain(&self, idle: Duration) -> usize {
        let waiting_since = Instant::now();
        let Ok(mut state) = self.shared.state.lock() else { return 0 };
        loop {
            if state.broken || (state.chunks.is_empty() && !state.writing) {
                return 0;
            }
            let quiet = state.last_progress.elapsed().min(waiting_since.elapsed());
            if quiet >= idle {
                return state.pending;
            }
            state = match self.shared.changed.wait_timeout(state, idle - quiet) {
                Ok((state, _)) => state,
                Err(_) => return 0,
            };
        }
    }
}

struct QueueWriter {
    queue: OutputQueue,
}

impl Write for QueueWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.queue.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_stalled_reader_does_not_block_writers_and_gets_everything_in_order_once_it_reads() {
        let (release, released) = mpsc::channel::<()>();
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = written.clone();
        let mut stalled = Some(released);
        let queue = OutputQueue::spawn(move |bytes| {
            // The reader stalls until the test lets it go.
            if let Some(wait) = stalled.take() {
                let _ = wait.recv();
            }
            sink.lock().unwrap().extend_from_slice(bytes);
            Ok(())
        });
        // The reader is let go only after these writes: a writer that waited for it would never get past them.
        let mut out = queue.writer();
        for i in 0..1000 {
            writeln!(out, "line {i}").unwrap();
        }
        assert!(queue.drain(Duration::from_millis(100)) > 0, "a reader that takes nothing is given up on");
        release.send(()).unwrap();
        assert_eq!(queue.drain(Duration::from_secs(30)), 0);
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text, expected);
    }

    #[test]
    fn a_reader_that_went_away_drops_the_rest_instead_of_waiting() {
        let queue = OutputQueue::spawn(|_| Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)));
        let mut out = queue.writer();
        writeln!(out, "nobody reads this").unwrap();
        assert_eq!(queue.drain(Duration::from_secs(30)), 0);
        writeln!(out, "nor this").unwrap();
        assert_eq!(queue.drain(Duration::from_secs(30)), 0);
    }
}
