//! Multipart uploads, read in bounded memory: every route that takes
//! `multipart/form-data` reads it through [`Upload`].
//!
//! multer (the parser under axum's `Multipart`) keeps pulling the body into
//! its buffer until it finds the first delimiter, and for every part until
//! it finds the blank line that ends the part's headers, with no limit on
//! either: its constraints bound field and stream sizes only, and its limit
//! of 32 headers applies after the block is buffered. So the body passes
//! through [`Bounded`] before multer sees it: it follows the structure the
//! way multer does and fails the body as soon as the preamble or one part's
//! header block runs past [`MAX_HEADER_BYTES`], or a part has more than
//! [`MAX_HEADERS`] header lines. Part data is never held: it streams to the
//! route's consumer chunk by chunk.
//!
//! A single-file upload ([`Upload::single_file`]) must be exactly one file:
//! its [`Part`] checks what follows when its data ends, before the consumer
//! sees the end of the stream, so a second file fails the upload instead of
//! being dropped after the first was stored.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::extract::Request;
use axum::http::header;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use memchr::memmem::Finder;

use super::error::ApiError;

/// Most bytes of a part's header block (from the end of the boundary to the
/// blank line, both included), and of the preamble before the first
/// boundary. Part headers are a few hundred bytes (a filename is at most
/// 900 bytes of storage path).
const MAX_HEADER_BYTES: usize = 16 << 10;
/// Most header lines of one part: multer's own limit, enforced here while
/// reading so the message says what is wrong.
const MAX_HEADERS: usize = 32;
/// DIAL's message for a single-file upload with no file or several.
const EXACTLY_ONE_FILE: &str = "Exactly one file part is required";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A multipart request body being read.
pub struct Upload {
    multipart: multer::Multipart<'static>,
}

/// What a single-file upload does with parts that have no filename (form
/// fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormFields {
    /// Skipped wherever they are: the file is the one part with a filename
    /// (DIAL's v1 upload reads file parts only).
    Skipped,
    /// Parts like any other: the upload is exactly one part, named or not.
    Counted,
}

impl Upload {
    /// Starts reading `request`'s body; `expected` (what the route takes)
    /// leads the 400 when the body is not `multipart/form-data`.
    pub fn new(request: Request, expected: &str) -> Result<Self, ApiError> {
        let content_type =
            request.headers().get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default();
        let boundary = multer::parse_boundary(content_type)
            .map_err(|error| ApiError::bad_request(format!("{expected}: {error}")))?;
        let body = Bounded::new(request.into_body().into_data_stream(), &boundary);
        Ok(Self { multipart: multer::Multipart::new(body, boundary) })
    }

    /// The next part, or `None` after the last one.
    pub async fn next_part(&mut self) -> Result<Option<Part<'_>>, ApiError> {
        let field = self.multipart.next_field().await.map_err(bad_multipart)?;
        Ok(field.map(|field| Part::new(field, &mut self.multipart, None)))
    }

    /// The one file of a single-file upload. Zero files is refused here; a
    /// second one when the returned part's data ends, as its stream's error.
    pub async fn single_file(&mut self, form_fields: FormFields) -> Result<Part<'_>, ApiError> {
        loop {
            match self.multipart.next_field().await.map_err(bad_multipart)? {
                Some(field) if form_fields == FormFields::Skipped && field.file_name().is_none() => continue,
                Some(field) => return Ok(Part::new(field, &mut self.multipart, Some(form_fields))),
                None => return Err(ApiError::bad_request(EXACTLY_ONE_FILE)),
            }
        }
    }
}

/// One part: its data as a stream of chunks for the route's consumer.
///
/// The stream's errors are plain messages, since consumers wrap them in
/// their own errors; [`Part::error_or`] gives the route the real one.
pub struct Part<'u> {
    /// `None` once the data has ended (multer allows one live field).
    field: Option<multer::Field<'static>>,
    name: Option<String>,
    file_name: Option<String>,
    content_type: Option<String>,
    multipart: &'u mut multer::Multipart<'static>,
    /// For the part of a single-file upload: nothing but (maybe) form fields
    /// may follow it.
    single: Option<FormFields>,
    failure: Option<ApiError>,
}

impl<'u> Part<'u> {
    fn new(
        field: multer::Field<'static>,
        multipart: &'u mut multer::Multipart<'static>,
        single: Option<FormFields>,
    ) -> Self {
        Self {
            name: field.name().map(str::to_owned),
            file_name: field.file_name().map(str::to_owned),
            content_type: field.content_type().map(|mime| mime.as_ref().to_owned()),
            field: Some(field),
            multipart,
            single,
            failure: None,
        }
    }

    /// The form field's name (`files[]`, `display_name`, …).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn file_name(&self) -> Option<&str> {
        self.file_name.as_deref()
    }

    pub fn content_type(&self) -> Option<&str> {
        self.content_type.as_deref()
    }

    /// The error to answer after the consumer of this part failed with
    /// `error`: when reading the part failed, that failure (the consumer saw
    /// only a message), else `error`.
    pub fn error_or(&mut self, error: impl Into<ApiError>) -> ApiError {
        self.failure.take().unwrap_or_else(|| error.into())
    }

    fn fail(&mut self, error: ApiError) -> Poll<Option<Result<Bytes, String>>> {
        let message = error.message.clone();
        self.failure = Some(error);
        Poll::Ready(Some(Err(message)))
    }

    /// After the data of a single file: the end of the body, or form fields
    /// when they are skipped; anything else fails the upload.
    fn poll_rest(&mut self, form_fields: FormFields, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, String>>> {
        loop {
            match ready!(self.multipart.poll_next_field(cx)) {
                Ok(None) => {
                    self.single = None;
                    return Poll::Ready(None);
                }
                // Dropping it lets multer skip its data on the next poll.
                Ok(Some(field)) if form_fields == FormFields::Skipped && field.file_name().is_none() => continue,
                Ok(Some(_)) => return self.fail(ApiError::bad_request(EXACTLY_ONE_FILE)),
                Err(error) => return self.fail(bad_multipart(error)),
            }
        }
    }
}

impl Stream for Part<'_> {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // Failed stays failed: a consumer that polls on must not see an end.
        if let Some(failure) = &this.failure {
            return Poll::Ready(Some(Err(failure.message.clone())));
        }
        if let Some(field) = this.field.as_mut() {
            match ready!(field.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => return Poll::Ready(Some(Ok(chunk))),
                Some(Err(error)) => return this.fail(bad_multipart(error)),
                None => this.field = None,
            }
        }
        match this.single {
            Some(form_fields) => this.poll_rest(form_fields, cx),
            None => Poll::Ready(None),
        }
    }
}

/// A body multer could not read: 400 naming the problem.
fn bad_multipart(error: multer::Error) -> ApiError {
    let exceeded = match &error {
        multer::Error::StreamReadFailed(source) => source.downcast_ref::<Exceeded>(),
        _ => None,
    };
    match exceeded {
        Some(exceeded) => ApiError::bad_request(format!("Invalid multipart body: {exceeded}")),
        None => ApiError::bad_request(format!("Invalid multipart body: {error}")),
    }
}

/// Which bound a body broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Exceeded {
    #[error("no boundary in the first {MAX_HEADER_BYTES} bytes")]
    Preamble,
    #[error("part headers exceed {MAX_HEADER_BYTES} bytes")]
    HeaderBytes,
    #[error("a part has more than {MAX_HEADERS} headers")]
    HeaderLines,
}

/// Where [`Bounded`] is in the body; the same steps as multer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the first `--boundary` (anywhere, as multer looks for it).
    Preamble,
    /// Right after a boundary: `--` ends the body, anything else starts a
    /// part; `dash` when one `-` has been seen.
    AfterBoundary { dash: bool },
    /// The rest of the delimiter line (transport padding and CRLF).
    DelimiterLine,
    /// Header lines, up to the first CRLF CRLF after the delimiter line.
    Headers,
    /// Part data, up to the next CRLF `--boundary`.
    Data,
    /// After the last boundary: multer reads no further.
    Epilogue,
}

/// The request body on its way to multer, checked against the bounds (see
/// the module documentation). Chunks pass through unchanged.
struct Bounded<S> {
    inner: S,
    phase: Phase,
    /// Bytes of the preamble, or of the current header block, so far.
    block_bytes: usize,
    /// Line ends in the current header lines so far.
    block_lines: usize,
    first_boundary: Seeker,
    next_boundary: Seeker,
    blank_line: Seeker,
    failed: Option<Exceeded>,
}

impl<S> Bounded<S> {
    fn new(inner: S, boundary: &str) -> Self {
        Self {
            inner,
            phase: Phase::Preamble,
            block_bytes: 0,
            block_lines: 0,
            first_boundary: Seeker::new(format!("--{boundary}").as_bytes()),
            next_boundary: Seeker::new(format!("\r\n--{boundary}").as_bytes()),
            blank_line: Seeker::new(b"\r\n\r\n"),
            failed: None,
        }
    }

    /// Follows `chunk` through the structure; fails when a bound breaks.
    fn inspect(&mut self, mut rest: &[u8]) -> Result<(), Exceeded> {
        while let Some(&first) = rest.first() {
            match self.phase {
                Phase::Preamble => {
                    let (taken, found) = split(rest, self.first_boundary.find(rest));
                    self.count(taken, Exceeded::Preamble)?;
                    rest = &rest[taken..];
                    if found {
                        self.start_block();
                    }
                }
                Phase::AfterBoundary { dash } => match (dash, first) {
                    (false, b'-') => {
                        self.count(1, Exceeded::HeaderBytes)?;
                        self.phase = Phase::AfterBoundary { dash: true };
                        rest = &rest[1..];
                    }
                    (true, b'-') => self.phase = Phase::Epilogue,
                    // Not consumed: it is the delimiter line's first byte.
                    _ => self.phase = Phase::DelimiterLine,
                },
                Phase::DelimiterLine => {
                    let (taken, found) = split(rest, memchr::memchr(b'\n', rest).map(|at| at + 1));
                    self.count(taken, Exceeded::HeaderBytes)?;
                    rest = &rest[taken..];
                    if found {
                        self.blank_line.reset();
                        self.phase = Phase::Headers;
                    }
                }
                Phase::Headers => {
                    let (taken, found) = split(rest, self.blank_line.find(rest));
                    self.count(taken, Exceeded::HeaderBytes)?;
                    // n header lines end in n + 1 line ends with the blank line.
                    self.block_lines += memchr::memchr_iter(b'\n', &rest[..taken]).count();
                    if self.block_lines > MAX_HEADERS + 1 {
                        return Err(Exceeded::HeaderLines);
                    }
                    rest = &rest[taken..];
                    if found {
                        self.next_boundary.reset();
                        self.phase = Phase::Data;
                    }
                }
                Phase::Data => match self.next_boundary.find(rest) {
                    Some(end) => {
                        rest = &rest[end..];
                        self.start_block();
                    }
                    None => rest = &[],
                },
                Phase::Epilogue => rest = &[],
            }
        }
        Ok(())
    }

    fn start_block(&mut self) {
        self.phase = Phase::AfterBoundary { dash: false };
        self.block_bytes = 0;
        self.block_lines = 0;
    }

    fn count(&mut self, bytes: usize, exceeded: Exceeded) -> Result<(), Exceeded> {
        self.block_bytes += bytes;
        if self.block_bytes > MAX_HEADER_BYTES { Err(exceeded) } else { Ok(()) }
    }
}

/// How much of `rest` a phase takes: up to the end of what it looks for
/// (`found`), or all of it.
fn split(rest: &[u8], end: Option<usize>) -> (usize, bool) {
    match end {
        Some(end) => (end, true),
        None => (rest.len(), false),
    }
}

impl<S, E> Stream for Bounded<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<BoxError>,
{
    type Item = Result<Bytes, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            // What is left of a refused body is the listener's to drain.
            if let Some(exceeded) = this.failed {
                return Poll::Ready(Some(Err(Box::new(exceeded))));
            }
            return match ready!(this.inner.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => match this.inspect(&chunk) {
                    Ok(()) => Poll::Ready(Some(Ok(chunk))),
                    Err(exceeded) => {
                        this.failed = Some(exceeded);
                        continue;
                    }
                },
                Some(Err(error)) => Poll::Ready(Some(Err(error.into()))),
                None => Poll::Ready(None),
            };
        }
    }
}

/// Finds a pattern in a sequence of chunks, matches that straddle chunks
/// included: keeps the last `len - 1` bytes seen without a match.
struct Seeker {
    finder: Finder<'static>,
    carry: Vec<u8>,
}

impl Seeker {
    fn new(pattern: &[u8]) -> Self {
        Self { finder: Finder::new(pattern).into_owned(), carry: Vec::with_capacity(pattern.len()) }
    }

    /// Forgets earlier chunks: the next search starts afresh.
    fn reset(&mut self) {
        self.carry.clear();
    }

    /// Where in `chunk` the first match ends (it may begin in earlier
    /// chunks).
    fn find(&mut self, chunk: &[u8]) -> Option<usize> {
        let keep = self.finder.needle().len() - 1;
        if !self.carry.is_empty() {
            // A match that begins in the carry ends within `keep` bytes.
            let carried = self.carry.len();
            self.carry.extend_from_slice(&chunk[..chunk.len().min(keep)]);
            let straddling = self.finder.find(&self.carry);
            self.carry.truncate(carried);
            if let Some(start) = straddling {
                self.carry.clear();
                return Some(start + keep + 1 - carried);
            }
        }
        if let Some(start) = self.finder.find(chunk) {
            self.carry.clear();
            return Some(start + keep + 1);
        }
        if chunk.len() >= keep {
            self.carry.clear();
        }
        self.carry.extend_from_slice(&chunk[chunk.len().saturating_sub(keep)..]);
        let excess = self.carry.len().saturating_sub(keep);
        self.carry.drain(..excess);
        None
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use futures_util::stream;

    use super::*;

    const BOUNDARY: &str = "XyZ";

    fn part(headers: &[String], data: &str) -> String {
        format!("--{BOUNDARY}\r\n{}\r\n\r\n{data}\r\n", headers.join("\r\n"))
    }

    fn file(name: &str, data: &str) -> String {
        part(&[format!("Content-Disposition: form-data; name=\"file\"; filename=\"{name}\"")], data)
    }

    fn body(parts: &[String]) -> String {
        format!("preamble\r\n{}--{BOUNDARY}--\r\nepilogue", parts.concat())
    }

    /// Every part as (filename, data), read by multer behind [`Bounded`]
    /// from `chunks`.
    async fn parse(chunks: Vec<Bytes>) -> Result<Vec<(Option<String>, Vec<u8>)>, String> {
        let source = stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
        let mut multipart = multer::Multipart::new(Bounded::new(source, BOUNDARY), BOUNDARY);
        let mut parts = Vec::new();
        while let Some(mut field) = multipart.next_field().await.map_err(|e| bad_multipart(e).message)? {
            let name = field.file_name().map(str::to_owned);
            let mut data = Vec::new();
            while let Some(chunk) = field.chunk().await.map_err(|e| bad_multipart(e).message)? {
                data.extend_from_slice(&chunk);
            }
            parts.push((name, data));
        }
        Ok(parts)
    }

    /// `text` in two chunks split at every offset, and one byte per chunk.
    fn splits(text: &str) -> Vec<Vec<Bytes>> {
        let bytes = Bytes::copy_from_slice(text.as_bytes());
        let mut all: Vec<Vec<Bytes>> = (0..=bytes.len()).map(|at| vec![bytes.slice(..at), bytes.slice(at..)]).collect();
        all.push((0..bytes.len()).map(|at| bytes.slice(at..at + 1)).collect());
        all
    }

    #[tokio::test]
    async fn well_formed_bodies_pass_unchanged_however_they_are_split() {
        let long_header = format!("X-Long: {}", "h".repeat(MAX_HEADER_BYTES - 200));
        let many_headers: Vec<String> = (0..MAX_HEADERS).map(|i| format!("X-{i}: v")).collect();
        let mut at_the_limit = many_headers.clone();
        at_the_limit[0] = "Content-Disposition: form-data; name=\"f\"; filename=\"many\"".into();
        let text = body(&[
            file("a.txt", "hello\r\n--Xy\r\n-\r\n--XyX\r\n\r\n--"),
            part(&["Content-Disposition: form-data; name=\"field\"".into()], ""),
            part(&["Content-Disposition: form-data; name=\"x\"; filename=\"long\"".into(), long_header], "\r\n\r\n"),
            part(&at_the_limit, "data"),
        ]);
        let expected = vec![
            (Some("a.txt".to_string()), b"hello\r\n--Xy\r\n-\r\n--XyX\r\n\r\n--".to_vec()),
            (None, Vec::new()),
            (Some("long".to_string()), b"\r\n\r\n".to_vec()),
            (Some("many".to_string()), b"data".to_vec()),
        ];
        for chunks in splits(&text) {
            let described = chunks.iter().map(Bytes::len).collect::<Vec<_>>();
            assert_eq!(parse(chunks).await.as_ref(), Ok(&expected), "chunks of {described:?}");
        }
    }

    #[tokio::test]
    async fn bounds_break_wherever_the_body_is_split() {
        let too_long = format!("X-Long: {}", "h".repeat(MAX_HEADER_BYTES));
        let too_many: Vec<String> = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v")).collect();
        let cases = [
            (body(&[file("a", "x"), part(&[too_long], "y")]), Exceeded::HeaderBytes),
            (body(&[part(&too_many, "y")]), Exceeded::HeaderLines),
            (format!("{}--{BOUNDARY}\r\n", "p".repeat(MAX_HEADER_BYTES + 1)), Exceeded::Preamble),
            // Never terminated: multer alone would read until the body ends.
            (format!("--{BOUNDARY}\r\nX-Endless: {}", "e".repeat(MAX_HEADER_BYTES)), Exceeded::HeaderBytes),
            (format!("--{BOUNDARY}{}", " ".repeat(MAX_HEADER_BYTES + 1)), Exceeded::HeaderBytes),
        ];
        for (text, exceeded) in cases {
            let expected = Err(format!("Invalid multipart body: {exceeded}"));
            for chunks in splits(&text) {
                let described = chunks.iter().map(Bytes::len).collect::<Vec<_>>();
                assert_eq!(parse(chunks).await, expected, "chunks of {described:?}");
            }
        }
    }

    #[tokio::test]
    async fn an_endless_header_stops_the_body_within_the_bound() {
        let chunk = Bytes::from(vec![b'h'; 1000]);
        let endless = stream::iter(
            std::iter::once(Bytes::from(format!("--{BOUNDARY}\r\nX-Endless: ")))
                .chain(std::iter::repeat(chunk))
                .map(Ok::<_, std::io::Error>),
        );
        let mut bounded = Bounded::new(endless, BOUNDARY);
        let mut passed = 0;
        let error = loop {
            match bounded.next().await.expect("the body is endless") {
                Ok(chunk) => passed += chunk.len(),
                Err(error) => break error,
            }
        };
        assert!(passed <= MAX_HEADER_BYTES, "{passed} bytes passed");
        assert_eq!(error.downcast_ref::<Exceeded>(), Some(&Exceeded::HeaderBytes));
    }

    #[test]
    fn the_seeker_finds_matches_across_chunks() {
        let text = b"ab--X--Xy--XYZ--XYZ";
        for at in 0..=text.len() {
            for second in at..=text.len() {
                let chunks = [&text[..at], &text[at..second], &text[second..]];
                let mut seeker = Seeker::new(b"--XYZ");
                let mut offset = 0;
                let found = chunks.iter().find_map(|chunk| {
                    let end = seeker.find(chunk).map(|end| offset + end);
                    offset += chunk.len();
                    end
                });
                assert_eq!(found, Some(14), "split at {at} and {second}");
            }
        }
        assert_eq!(Seeker::new(b"--XYZ").find(b"--XY"), None);
    }

    fn request(text: &str) -> Request {
        Request::builder()
            .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(Body::from(text.to_string()))
            .unwrap()
    }

    /// The data of a single-file upload, or the error its part reports.
    async fn single(text: &str, form_fields: FormFields) -> Result<Vec<u8>, String> {
        let mut upload = Upload::new(request(text), "a file").map_err(|e| e.message)?;
        let mut part = upload.single_file(form_fields).await.map_err(|e| e.message)?;
        let mut data = Vec::new();
        while let Some(chunk) = part.next().await {
            match chunk {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(message) => {
                    assert_eq!(part.error_or(ApiError::bad_request("consumer")).message, message);
                    return Err(message);
                }
            }
        }
        Ok(data)
    }

    #[tokio::test]
    async fn a_single_file_upload_is_exactly_one_file() {
        let field = part(&["Content-Disposition: form-data; name=\"note\"".into()], "n");
        let one = body(&[file("a", "A")]);
        let two = body(&[file("a", "A"), file("b", "B")]);
        let fields_around = body(&[field.clone(), file("a", "A"), field.clone()]);
        let only_a_field = body(std::slice::from_ref(&field));
        let none = format!("--{BOUNDARY}--\r\n");
        let exactly_one = Err(EXACTLY_ONE_FILE.to_string());

        assert_eq!(single(&one, FormFields::Skipped).await, Ok(b"A".to_vec()));
        assert_eq!(single(&one, FormFields::Counted).await, Ok(b"A".to_vec()));
        assert_eq!(single(&two, FormFields::Skipped).await, exactly_one);
        assert_eq!(single(&two, FormFields::Counted).await, exactly_one);
        assert_eq!(single(&fields_around, FormFields::Skipped).await, Ok(b"A".to_vec()));
        assert_eq!(single(&fields_around, FormFields::Counted).await, exactly_one.clone());
        assert_eq!(single(&only_a_field, FormFields::Skipped).await, exactly_one);
        assert_eq!(single(&only_a_field, FormFields::Counted).await, Ok(b"n".to_vec()));
        assert_eq!(single(&none, FormFields::Counted).await, exactly_one);

        let not_multipart = Request::builder().body(Body::from("x")).unwrap();
        let refused = Upload::new(not_multipart, "Expected a file").err().unwrap();
        assert_eq!(refused.message, "Expected a file: failed to decode Content-Type");
    }
}
