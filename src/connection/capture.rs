//! What a command printed, kept within a bound: a hook that prints 200 MB must not take the orchestrator with it.
//! The first and the last part of each stream are kept (where a command says what it does, and how it ended), and
//! the middle is replaced by one line that says how many bytes were dropped.

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes kept from the start of each stream (stdout, stderr) of one command.
pub const KEPT_HEAD: usize = 512 * 1024;
/// Bytes kept from the end of each stream of one command.
pub const KEPT_TAIL: usize = 512 * 1024;

/// One stream being read: its head, a sliding tail, and the count of bytes that fell out between them.
#[derive(Debug, Default)]
pub struct BoundedCapture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

impl BoundedCapture {
    pub fn push(&mut self, mut chunk: &[u8]) {
        if self.head.len() < KEPT_HEAD {
            let take = chunk.len().min(KEPT_HEAD - self.head.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= KEPT_TAIL {
            self.dropped += (self.tail.len() + chunk.len() - KEPT_TAIL) as u64;
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - KEPT_TAIL..]);
            return;
        }
        self.tail.extend(chunk);
        let over = self.tail.len().saturating_sub(KEPT_TAIL);
        if over > 0 {
            self.tail.drain(..over);
            self.dropped += over as u64;
        }
    }

    /// The kept bytes; when some were dropped, a line in their place says how many.
    pub fn finish(self) -> Vec<u8> {
        let mut out = self.head;
        if self.dropped > 0 {
            out.extend_from_slice(
                format!(
                    "\n[... {} bytes of output dropped: the first {} KiB and the last {} KiB are kept ...]\n",
                    self.dropped,
                    KEPT_HEAD / 1024,
                    KEPT_TAIL / 1024
                )
                .as_bytes(),
            );
        }
        out.extend(self.tail);
        out
    }
}

/// `text` as a bounded capture of it would have kept it: unchanged when within the bound. The run reads the cluster's
/// node list whole (it parses it), but shows it, in events and logs, as any other command's output is shown.
pub fn bounded_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= KEPT_HEAD + KEPT_TAIL {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut capture = BoundedCapture::default();
    capture.push(text.as_bytes());
    std::borrow::Cow::Owned(String::from_utf8_lossy(&capture.finish()).into_owned())
}

/// Reads a stream to its end, keeping it within the bound. A read error ends the stream (the command's exit status
/// says the rest).
pub async fn read_bounded(mut reader: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut capture = BoundedCapture::default();
    // Small: a buffer is held per stream of every command in flight, and the capture copies out of it anyway.
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => capture.push(&buf[..n]),
        }
    }
    capture.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_read_is_shown_as_a_bounded_capture_would_keep_it() {
        let node_list = "x".repeat(KEPT_HEAD + KEPT_TAIL + 4096);
        let shown = bounded_text(&node_list);
        assert!(shown.starts_with(&"x".repeat(KEPT_HEAD)));
        assert!(shown.contains("[... 4096 bytes of output dropped"), "{}", &shown[KEPT_HEAD..KEPT_HEAD + 200]);
        assert!(shown.len() < KEPT_HEAD + KEPT_TAIL + 200);
        assert!(matches!(bounded_text("a small answer"), std::borrow::Cow::Borrowed("a small answer")));
    }

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = BoundedCapture::default();
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.finish(), b"hello world");
    }

    #[test]
    fn large_output_keeps_its_head_and_tail_and_says_how_much_was_dropped() {
        let total = KEPT_HEAD + KEPT_TAIL + 3_000_000;
        let data: Vec<u8> = (0..total).map(|i| b'a' + (i % 26) as u8).collect();
        // In uneven chunks, some larger than the tail.
        let mut c = BoundedCapture::default();
        let mut at = 0;
        for size in [1, 7000, 900_000, 13, 65536].iter().cycle() {
            if at >= total {
                break;
            }
            let end = (at + size).min(total);
            c.push(&data[at..end]);
            at = end;
        }
        let out = c.finish();
        assert_eq!(&out[..KEPT_HEAD], &data[..KEPT_HEAD]);
        assert_eq!(&out[out.len() - KEPT_TAIL..], &data[total - KEPT_TAIL..]);
        let middle = String::from_utf8_lossy(&out[KEPT_HEAD..out.len() - KEPT_TAIL]).into_owned();
        assert!(middle.contains("[... 3000000 bytes of output dropped"), "{middle}");
    }
}
