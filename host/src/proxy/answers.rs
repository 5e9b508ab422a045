//! The attachments of a callee's answer, granted to its caller (DIAL Core's
//! "response attachments"): when application A calls application B with its
//! key and B answers with a file it wrote — into its appdata folder, say —
//! A's key is granted READ on it, so A can pass the file up the chain. DIAL
//! apps hand generated files upwards this way.
//!
//! The answer is read as it is relayed, never buffered whole when it
//! streams: each event of an event stream is read when its blank line
//! arrives (at most [`MAX_SCANNED_EVENT`] bytes of it are kept; a larger one
//! is passed on unread), and the chunk that completes an event naming
//! attachments is held until they are granted, so the caller never sees a
//! link it cannot open yet. A JSON answer is held whole (up to
//! [`MAX_SCANNED_ANSWER`]; past that it is relayed unread) and read once it
//! has ended, before its bytes go on. What is granted is decided by the
//! caller of [`AnswerLinks`] (what the callee's key could read), and every
//! use of the grant is still bounded by the originating user's reach.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use super::attachments;
use crate::keys::KeyLease;

/// The largest JSON answer held to be read for attachments.
pub const MAX_SCANNED_ANSWER: usize = 16 << 20;
/// The largest event of a stream read for attachments.
pub const MAX_SCANNED_EVENT: usize = 1 << 20;

/// Grants the links an answer carries; resolves once they are granted.
pub type Grant = Arc<dyn Fn(Vec<String>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What to do with the attachments an answer carries.
pub struct AnswerLinks {
    pub grant: Grant,
    /// Links read from one answer at most (`proxy.max_attachments`).
    pub max: usize,
}

/// How an answer is being read.
pub struct Scan {
    links: AnswerLinks,
    /// Links already granted (each once per answer).
    granted: usize,
    reading: Reading,
}

enum Reading {
    /// An event stream: the event being received.
    Events { line: Vec<u8>, data: Vec<u8>, skipping: bool },
    /// A JSON answer, held until it ends.
    Whole { held: Vec<Bytes>, size: usize },
}

impl Scan {
    pub fn new(links: AnswerLinks, event_stream: bool) -> Self {
        let reading = match event_stream {
            true => Reading::Events { line: Vec::new(), data: Vec::new(), skipping: false },
            false => Reading::Whole { held: Vec::new(), size: 0 },
        };
        Self { links, granted: 0, reading }
    }

    /// The links of the events `chunk` completes (an event stream).
    fn events(&mut self, chunk: &[u8]) -> Vec<String> {
        let Reading::Events { line, data, skipping } = &mut self.reading else { return Vec::new() };
        let mut found = Vec::new();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if *skipping {
                // A line too large to keep: wait for its end, then for the
                // blank line that ends its event.
                if piece.ends_with(b"\n") && piece.len() <= 2 && line.is_empty() {
                    *skipping = false;
                    data.clear();
                }
                continue;
            }
            line.extend_from_slice(piece);
            if line.len() + data.len() > MAX_SCANNED_EVENT {
                tracing::warn!(limit = MAX_SCANNED_EVENT, "an event of an answer is too large to read for attachments");
                *skipping = true;
                line.clear();
                data.clear();
                continue;
            }
            if !line.ends_with(b"\n") {
                continue;
            }
            let text = line.strip_suffix(b"\n").unwrap_or(line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                if !data.is_empty() {
                    found.extend(attachments::answer_links(data));
                }
                data.clear();
            } else if let Some(value) = text.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
            }
            line.clear();
        }
        found
    }

    /// Grants what `links` name, within the answer's bound.
    async fn grant(&mut self, links: Vec<String>) {
        let room = self.links.max.saturating_sub(self.granted);
        let links: Vec<String> = links.into_iter().take(room).collect();
        if links.is_empty() {
            return;
        }
        self.granted += links.len();
        (self.links.grant)(links).await;
    }
}

type Upstream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// An answer on its way to the client: chunks as they come, read by the
/// scan when there is one; the key's lease lives as long as it does.
pub struct Relayed {
    upstream: Upstream,
    scan: Option<Scan>,
    ready: VecDeque<Bytes>,
    /// The upstream's failure, once what was held before it has gone out.
    failure: Option<reqwest::Error>,
    ended: bool,
    _lease: Option<KeyLease>,
}

impl Relayed {
    pub fn new(upstream: Upstream, scan: Option<Scan>, lease: Option<KeyLease>) -> Self {
        Self { upstream, scan, ready: VecDeque::new(), failure: None, ended: false, _lease: lease }
    }

    /// The next chunk for the client.
    pub async fn next(&mut self) -> Option<Result<Bytes, reqwest::Error>> {
        loop {
            if let Some(chunk) = self.ready.pop_front() {
                return Some(Ok(chunk));
            }
            if let Some(failure) = self.failure.take() {
                return Some(Err(failure));
            }
            if self.ended {
                return None;
            }
            let chunk = match self.upstream.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(error)) => {
                    self.ended = true;
                    // What was held goes out first, then the failure.
                    if let Some(Scan { reading: Reading::Whole { held, .. }, .. }) = self.scan.take() {
                        self.ready.extend(held);
                    }
                    self.failure = Some(error);
                    continue;
                }
                None => {
                    self.ended = true;
                    if let Some(mut scan) = self.scan.take()
                        && let Reading::Whole { held, .. } = &mut scan.reading
                    {
                        let held = std::mem::take(held);
                        let whole: Vec<u8> = held.concat();
                        scan.grant(attachments::answer_links(&whole)).await;
                        self.ready.extend(held);
                    }
                    continue;
                }
            };
            let Some(scan) = &mut self.scan else { return Some(Ok(chunk)) };
            match &mut scan.reading {
                Reading::Events { .. } => {
                    let links = scan.events(&chunk);
                    scan.grant(links).await;
                    return Some(Ok(chunk));
                }
                Reading::Whole { held, size } => {
                    *size += chunk.len();
                    held.push(chunk);
                    if *size > MAX_SCANNED_ANSWER {
                        tracing::warn!(
                            limit = MAX_SCANNED_ANSWER,
                            "an answer is too large to read for attachments; relayed unread"
                        );
                        self.ready.extend(std::mem::take(held));
                        self.scan = None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn scan(event_stream: bool) -> (Scan, Arc<Mutex<Vec<String>>>) {
        let granted = Arc::new(Mutex::new(Vec::new()));
        let sink = granted.clone();
        let grant: Grant = Arc::new(move |links| {
            sink.lock().unwrap().extend(links);
            Box::pin(std::future::ready(()))
        });
        (Scan::new(AnswerLinks { grant, max: 3 }, event_stream), granted)
    }

    async fn relay(event_stream: bool, chunks: Vec<&'static [u8]>) -> (Vec<u8>, Vec<String>) {
        let (scan, granted) = scan(event_stream);
        let upstream = futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c))));
        let mut relayed = Relayed::new(Box::pin(upstream), Some(scan), None);
        let mut body = Vec::new();
        while let Some(chunk) = relayed.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        let granted = granted.lock().unwrap().clone();
        (body, granted)
    }

    #[tokio::test]
    async fn stream_events_are_read_as_they_complete_even_split_across_chunks() {
        let chunks: Vec<&'static [u8]> = vec![
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
            b"data: {\"choices\":[{\"delta\":{\"custom_content\":{\"attachments\":[{\"url\":\"files/B/app",
            b"data/x/a.png\"}]}}}]}\r\n\r\n: comment\n\ndata: {\"choices\":[{\"delta\":{\"custom_content\":",
            b"{\"stages\":[{\"attachments\":[{\"url\":\"files/B/s.txt\"},{\"url\":\"https://x/y\"}]}]}}}]}\n\ndata: [DONE]\n\n",
        ];
        let expected: Vec<u8> = chunks.concat();
        let (body, granted) = relay(true, chunks).await;
        assert_eq!(body, expected, "relayed unchanged");
        assert_eq!(granted, ["files/B/appdata/x/a.png", "files/B/s.txt"]);
    }

    #[tokio::test]
    async fn a_json_answer_is_read_whole_and_bounded() {
        let chunks: Vec<&'static [u8]> = vec![
            b"{\"choices\":[{\"message\":{\"content\":\"x\",\"custom_content\":{\"attachments\":[",
            b"{\"url\":\"files/B/1\"},{\"url\":\"files/B/2\"},{\"url\":\"files/B/3\"},{\"url\":\"files/B/4\"}]}}}]}",
        ];
        let expected: Vec<u8> = chunks.concat();
        let (body, granted) = relay(false, chunks).await;
        assert_eq!(body, expected);
        assert_eq!(granted, ["files/B/1", "files/B/2", "files/B/3"], "at most max per answer");
    }

    #[test]
    fn an_oversized_event_is_skipped_and_the_next_one_read() {
        let (mut scan, _) = scan(true);
        let big = format!("data: {}\n\n", "x".repeat(MAX_SCANNED_EVENT + 10));
        assert!(scan.events(big.as_bytes()).is_empty());
        let next =
            b"data: {\"choices\":[{\"delta\":{\"custom_content\":{\"attachments\":[{\"url\":\"files/B/n\"}]}}}]}\n\n";
        assert_eq!(scan.events(next), ["files/B/n"]);
    }
}
