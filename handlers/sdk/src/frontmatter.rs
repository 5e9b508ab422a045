//! YAML frontmatter (`---` / YAML / `---` at the top of a text file), parsed
//! safely.
//!
//! The frontmatter is untrusted input, so it is size-capped before the YAML
//! parser sees it, and it is parsed with yaml-rust2's pull parser into a small
//! tree of our own: anchors, aliases and tags stop parsing outright (no alias
//! is ever expanded, so no "billion laughs"), nesting is capped, duplicate
//! keys are rejected, a leading byte order mark and CRLF line ends are
//! tolerated. Scalars are typed by the YAML 1.2 core schema, so `version: 1.0`
//! is a number and a rule can say "put it in quotes".
//!
//! ```
//! use dial_handler_sdk::frontmatter::Frontmatter;
//!
//! const FRONTMATTER: Frontmatter = Frontmatter::new("NOTE.md").requiring("the field `title`");
//! let fields = FRONTMATTER.read("---\ntitle: Hello\n---\nBody\n").unwrap();
//! assert_eq!(fields[0].1.as_str(), Some("Hello"));
//! ```
//!
//! Every `Err(String)` is a full sentence meant for the person who wrote the
//! file, naming it and the line.

use std::collections::BTreeMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, ScanError, TScalarStyle};

use crate::text::shorten;

/// Largest frontmatter (the YAML between the `---` lines) parsed by default, in bytes.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest collection nesting allowed by default; the top-level mapping is level 1.
pub const MAX_NESTING_DEPTH: usize = 8;

const BYTE_ORDER_MARK: char = '\u{feff}';

/// How a scalar reads under the YAML 1.2 core schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    String,
    Null,
    Bool,
    Int,
    Float,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scalar {
    /// The scalar's text as written (after YAML unquoting/folding).
    pub text: String,
    pub kind: ScalarKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Scalar(Scalar),
    Sequence(Vec<Node>),
    /// Entries in document order; keys are unique.
    Mapping(Vec<(Scalar, Node)>),
}

/// The top-level `field: value` entries, in document order.
pub type Fields = Vec<(Scalar, Node)>;

impl Scalar {
    /// The type as a message names it, e.g. "a number".
    pub fn describe(&self) -> &'static str {
        match self.kind {
            ScalarKind::String => "a string",
            ScalarKind::Null if self.text.is_empty() => "empty",
            ScalarKind::Null => "null",
            ScalarKind::Bool => "a boolean",
            ScalarKind::Int | ScalarKind::Float => "a number",
        }
    }
}

impl Node {
    /// The text of a string scalar; `None` for any other value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(Scalar { text, kind: ScalarKind::String }) => Some(text),
            _ => None,
        }
    }

    /// The type as a message names it, e.g. "a list".
    pub fn describe(&self) -> &'static str {
        match self {
            Node::Scalar(scalar) => scalar.describe(),
            Node::Sequence(_) => "a list",
            Node::Mapping(_) => "a mapping",
        }
    }

    /// The value as compact JSON (`{"bins":["a"]}`), for keeping a nested
    /// value where only a string fits. Numbers JSON cannot write as they are
    /// (`0x1F`, `.inf`) become strings.
    pub fn to_compact_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Node::Scalar(scalar) => match scalar.kind {
                ScalarKind::Null => out.push_str("null"),
                ScalarKind::Bool => {
                    out.push_str(if scalar.text.eq_ignore_ascii_case("true") { "true" } else { "false" })
                }
                ScalarKind::Int if scalar.text.parse::<i64>().is_ok() => {
                    out.push_str(&scalar.text.parse::<i64>().expect("checked").to_string())
                }
                ScalarKind::Float if scalar.text.parse::<f64>().is_ok_and(f64::is_finite) => {
                    out.push_str(&scalar.text.parse::<f64>().expect("checked").to_string())
                }
                _ => write_json_string(&scalar.text, out),
            },
            Node::Sequence(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Node::Mapping(entries) => {
                out.push('{');
                for (index, (key, value)) in entries.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    write_json_string(&key.text, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
        }
    }
}

/// A JSON string literal (RFC 8259 escapes).
fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The value of the top-level field `key`, if present.
pub fn field<'a>(fields: &'a Fields, key: &str) -> Option<&'a Node> {
    fields.iter().find(|(name, _)| name.text == key).map(|(_, value)| value)
}

/// How one file's frontmatter is read: the file name messages use, and the
/// limits. Build it as a `const`.
#[derive(Debug, Clone, Copy)]
pub struct Frontmatter<'a> {
    /// The file, as messages name it (e.g. `SKILL.md`).
    pub file: &'a str,
    /// Largest YAML accepted, in bytes; checked before parsing.
    pub max_bytes: usize,
    /// Deepest collection nesting accepted; the top-level mapping is level 1.
    pub max_depth: usize,
    /// What an empty frontmatter is missing, e.g. "the fields `name` and
    /// `description`", for the message.
    pub required: Option<&'a str>,
}

impl<'a> Frontmatter<'a> {
    /// Frontmatter of `file` with the default limits (64 KiB, 8 levels).
    pub const fn new(file: &'a str) -> Self {
        Self { file, max_bytes: MAX_FRONTMATTER_BYTES, max_depth: MAX_NESTING_DEPTH, required: None }
    }

    /// The same, naming what an empty frontmatter should contain.
    pub const fn requiring(mut self, required: &'a str) -> Self {
        self.required = Some(required);
        self
    }

    /// [`extract`](Self::extract) then [`parse`](Self::parse).
    pub fn read(&self, text: &str) -> Result<Fields, String> {
        self.extract(text).and_then(|yaml| self.parse(yaml))
    }

    /// Returns the YAML text between the opening and closing `---` lines.
    ///
    /// One leading UTF-8 byte order mark is tolerated. A delimiter is a whole
    /// line that is `---` plus optional trailing spaces or tabs (CRLF
    /// tolerated); a `---` inside a value or a `----` line does not count.
    /// The YAML always starts on line 2 of the file.
    pub fn extract<'t>(&self, text: &'t str) -> Result<&'t str, String> {
        let file = self.file;
        let text = text.strip_prefix(BYTE_ORDER_MARK).unwrap_or(text);
        let mut lines = lines_with_offsets(text);
        let opening_ok = lines.next().is_some_and(|(_, line)| is_delimiter(line));
        if !opening_ok {
            let first_line = text.lines().next().unwrap_or("");
            return Err(format!(
                "{file} must start with YAML frontmatter: the first line must be `---`, but it is {}",
                describe_line(first_line)
            ));
        }
        let yaml_start = text.find('\n').map_or(text.len(), |newline| newline + 1);
        let yaml_end = lines.find(|(_, line)| is_delimiter(line)).map(|(start, _)| start).ok_or_else(|| {
            format!("The frontmatter of {file} is not closed: add a line containing only `---` after the last field")
        })?;
        let yaml = &text[yaml_start..yaml_end];
        if yaml.len() > self.max_bytes {
            return Err(format!(
                "The frontmatter of {file} is {} bytes; the limit is {} bytes{}. Keep long content in the body \
                 or in other files",
                yaml.len(),
                self.max_bytes,
                crate::text::human_size(self.max_bytes as u64)
            ));
        }
        Ok(yaml)
    }

    /// Parses the frontmatter YAML; the result must be a non-empty mapping.
    pub fn parse(&self, yaml: &str) -> Result<Fields, String> {
        let file = self.file;
        if yaml.len() > self.max_bytes {
            return Err(format!(
                "The frontmatter of {file} is {} bytes; the limit is {} bytes",
                yaml.len(),
                self.max_bytes
            ));
        }
        let root = TreeBuilder { config: self, yaml, parser: Parser::new_from_str(yaml) }.document()?;
        match root {
            Some(Node::Mapping(entries)) => Ok(entries),
            Some(other) => Err(format!(
                "The frontmatter of {file} must be a YAML mapping of `field: value` lines, but it is {}",
                other.describe()
            )),
            None => Err(match self.required {
                Some(required) => format!("The frontmatter of {file} is empty; it must contain at least {required}"),
                None => format!("The frontmatter of {file} is empty"),
            }),
        }
    }
}

/// Builds a [`Node`] tree from parser events, rejecting what we never accept.
struct TreeBuilder<'a, 'c> {
    config: &'c Frontmatter<'c>,
    yaml: &'a str,
    parser: Parser<std::str::Chars<'a>>,
}

impl TreeBuilder<'_, '_> {
    /// Parses the single document; `None` when the YAML has no content.
    fn document(&mut self) -> Result<Option<Node>, String> {
        // The stream always opens with StreamStart.
        self.next()?;
        let (event, _) = self.next()?;
        if event == Event::StreamEnd {
            return Ok(None);
        }
        let (first, mark) = self.next()?;
        let root = self.node(first, mark, 1)?;
        // DocumentEnd (implicit or `...`), then the stream must end.
        self.next()?;
        match self.next()? {
            (Event::StreamEnd, _) => Ok(Some(root)),
            (_, mark) => Err(format!(
                "The frontmatter of {} must be a single YAML document, but a second one starts at line {}",
                self.config.file,
                file_line(&mark)
            )),
        }
    }

    /// Parses the node that starts with `event`; `depth` is the nesting level
    /// a collection starting here would have.
    fn node(&mut self, event: Event, mark: Marker, depth: usize) -> Result<Node, String> {
        let is_collection = matches!(event, Event::MappingStart(..) | Event::SequenceStart(..));
        if is_collection && depth > self.config.max_depth {
            return Err(too_deep(self.config, &mark));
        }
        match event {
            Event::Scalar(text, style, ..) => Ok(Node::Scalar(resolve_scalar(text, style))),
            Event::SequenceStart(..) => {
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        (Event::SequenceEnd, _) => return Ok(Node::Sequence(items)),
                        (item, mark) => items.push(self.node(item, mark, depth + 1)?),
                    }
                }
            }
            Event::MappingStart(..) => self.mapping(depth),
            _ => Err(format!(
                "Unexpected YAML structure in the frontmatter of {} at line {}",
                self.config.file,
                file_line(&mark)
            )),
        }
    }

    fn mapping(&mut self, depth: usize) -> Result<Node, String> {
        let file = self.config.file;
        let mut entries = Vec::new();
        // A BTreeMap, not a HashMap: no random hash keys to ask the host for
        // in every fresh instance, and no SipHash.
        let mut first_lines: BTreeMap<String, usize> = BTreeMap::new();
        loop {
            let (key, key_mark) = match self.next()? {
                (Event::MappingEnd, _) => return Ok(Node::Mapping(entries)),
                (Event::Scalar(text, style, ..), mark) => (resolve_scalar(text, style), mark),
                (_, mark) => {
                    return Err(format!(
                        "The frontmatter of {file} uses a list or mapping as a key at line {}; keys must be plain \
                         names",
                        file_line(&mark)
                    ));
                }
            };
            let line = file_line(&key_mark);
            // Keys are compared by their text, so `1` and `"1"` count as the
            // same key: stricter than YAML, never ambiguous for a reader.
            if let Some(first) = first_lines.insert(key.text.clone(), line) {
                return Err(format!(
                    "Duplicate key '{}' at line {line} of {file} (first at line {first}); each key may appear only \
                     once in a mapping",
                    shorten(&key.text)
                ));
            }
            let (value, value_mark) = self.next()?;
            let value = self.node(value, value_mark, depth + 1)?;
            entries.push((key, value));
        }
    }

    /// The next event, with anchors, aliases and tags turned into errors.
    fn next(&mut self) -> Result<(Event, Marker), String> {
        let file = self.config.file;
        let (event, mark) =
            self.parser.next_token().map_err(|error| scan_error_message(self.config, &error, self.yaml))?;
        let (anchor, tag) = match &event {
            Event::Alias(_) => return Err(alias_error(file, &mark)),
            Event::Scalar(_, _, anchor, tag) | Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                (*anchor, tag.as_ref())
            }
            _ => (0, None),
        };
        if let Some(tag) = tag {
            // The parser expands `!!` to the core schema prefix; show it as written.
            let handle = match tag.handle.as_str() {
                "tag:yaml.org,2002:" => "!!",
                other => other,
            };
            return Err(format!(
                "YAML tags such as '{handle}{}' are not allowed in the frontmatter of {file} (line {}); remove the \
                 tag and quote the value if it must be a string",
                tag.suffix,
                file_line(&mark)
            ));
        }
        if anchor != 0 {
            return Err(format!(
                "YAML anchors (`&name`) are not allowed in the frontmatter of {file} (line {}); write the value out \
                 instead",
                file_line(&mark)
            ));
        }
        Ok((event, mark))
    }
}

fn too_deep(config: &Frontmatter, mark: &Marker) -> String {
    format!(
        "The frontmatter of {} is nested more than {} levels deep at line {}",
        config.file,
        config.max_depth,
        file_line(mark)
    )
}

fn alias_error(file: &str, mark: &Marker) -> String {
    format!(
        "YAML aliases (`*name`) are not allowed in the frontmatter of {file} (line {}); write the value out instead",
        file_line(mark)
    )
}

fn scan_error_message(config: &Frontmatter, error: &ScanError, yaml: &str) -> String {
    let mark = error.marker();
    let info = error.info();
    // An alias whose anchor was never defined fails inside the parser, before
    // we see an event; it is still an alias, so say so.
    if info.contains("unknown anchor") {
        return alias_error(config.file, mark);
    }
    // The scanner caps flow (`[`/`{`) nesting itself, before any event.
    if info.contains("recursion limit") {
        return too_deep(config, mark);
    }
    // Tab indentation and an unquoted `: ` are the usual mistakes; the
    // parser's own wording does not point at the fix, so add a hint.
    let hint = if let Some(line) = tab_indented_line(yaml) {
        format!(". Hint: line {} is indented with a tab; YAML indentation must use spaces", line + 1)
    } else if info.contains("mapping values are not allowed") {
        ". Hint: a value containing `: ` must be quoted, e.g. `description: \"Use when: ...\"`".to_string()
    } else {
        String::new()
    };
    format!(
        "The frontmatter of {} is not valid YAML: {info} at line {}, column {}{hint}",
        config.file,
        file_line(mark),
        mark.col() + 1
    )
}

/// File line of a YAML position: the YAML starts on line 2.
fn file_line(mark: &Marker) -> usize {
    mark.line() + 1
}

fn resolve_scalar(text: String, style: TScalarStyle) -> Scalar {
    let kind = match style {
        TScalarStyle::Plain => plain_scalar_kind(&text),
        _ => ScalarKind::String,
    };
    Scalar { text, kind }
}

/// Types a plain (unquoted) scalar by the YAML 1.2 core schema.
fn plain_scalar_kind(text: &str) -> ScalarKind {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let all_digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    match text {
        "" | "~" | "null" | "Null" | "NULL" => ScalarKind::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => ScalarKind::Bool,
        ".nan" | ".NaN" | ".NAN" => ScalarKind::Float,
        _ if matches!(unsigned, ".inf" | ".Inf" | ".INF") => ScalarKind::Float,
        _ if all_digits(unsigned, 10) => ScalarKind::Int,
        _ if text.strip_prefix("0x").is_some_and(|s| all_digits(s, 16)) => ScalarKind::Int,
        _ if text.strip_prefix("0o").is_some_and(|s| all_digits(s, 8)) => ScalarKind::Int,
        _ if is_decimal_float(unsigned) => ScalarKind::Float,
        _ => ScalarKind::String,
    }
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, sign already removed.
fn is_decimal_float(text: &str) -> bool {
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => digits(whole) && digits(fraction) && !(whole.is_empty() && fraction.is_empty()),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// Lines with the byte offset where each starts; the line excludes `\n`.
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_inclusive('\n').scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len();
        Some((start, line.strip_suffix('\n').unwrap_or(line)))
    })
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\r', ' ', '\t']) == "---"
}

fn describe_line(line: &str) -> String {
    match line.trim_end_matches('\r') {
        "" => "empty".to_string(),
        line => format!("`{}`", shorten(line)),
    }
}

/// First YAML line (1-based, relative to the YAML) whose indentation holds a tab.
fn tab_indented_line(yaml: &str) -> Option<usize> {
    yaml.lines()
        .position(|line| {
            let content_start = line.trim_start_matches([' ', '\t']);
            !content_start.is_empty() && line[..line.len() - content_start.len()].contains('\t')
        })
        .map(|index| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FM: Frontmatter = Frontmatter::new("SKILL.md");

    fn kind(text: &str) -> ScalarKind {
        plain_scalar_kind(text)
    }

    fn parse(yaml: &str) -> Result<Fields, String> {
        FM.parse(yaml)
    }

    fn extract(text: &str) -> Result<&str, String> {
        FM.extract(text)
    }

    #[test]
    fn plain_scalars_are_typed_by_the_core_schema() {
        for null in ["", "~", "null", "Null", "NULL"] {
            assert_eq!(kind(null), ScalarKind::Null, "{null:?}");
        }
        for boolean in ["true", "True", "TRUE", "false", "False", "FALSE"] {
            assert_eq!(kind(boolean), ScalarKind::Bool, "{boolean:?}");
        }
        for int in ["123", "-7", "+0", "0x1F", "0o17"] {
            assert_eq!(kind(int), ScalarKind::Int, "{int:?}");
        }
        for float in ["1.0", "-.5", "1.", "1e5", "2.5E-3", ".inf", "-.Inf", ".NaN"] {
            assert_eq!(kind(float), ScalarKind::Float, "{float:?}");
        }
        // YAML 1.1 booleans, dates and near-misses stay strings.
        for text in ["yes", "no", "on", "tRUE", "2024-01-01", "1.2.3", "0x", "0o8", "-", ".", "e5", "1e", "my-skill"] {
            assert_eq!(kind(text), ScalarKind::String, "{text:?}");
        }
    }

    #[test]
    fn quoted_and_block_scalars_are_strings() {
        let fields = parse("a: \"123\"\nb: 'true'\nc: |\n  null\n").unwrap();
        assert!(fields.iter().all(|(_, value)| matches!(value, Node::Scalar(Scalar { kind: ScalarKind::String, .. }))));
    }

    #[test]
    fn extract_finds_whole_delimiter_lines_only() {
        let text = "---\nname: a --- b\nurl: x---y\n----\nmore: 1\n--- \t\r\nbody\n---\n";
        assert_eq!(extract(text).unwrap(), "name: a --- b\nurl: x---y\n----\nmore: 1\n");
        assert_eq!(extract("\u{feff}---\r\nname: x\r\n---\r\n").unwrap(), "name: x\r\n");
        assert_eq!(extract("---\n---").unwrap(), "");
    }

    #[test]
    fn extract_reports_missing_and_unterminated_frontmatter() {
        assert!(extract("# Title\n").unwrap_err().contains("must start with YAML frontmatter"));
        assert!(extract("\n---\nname: x\n---\n").unwrap_err().contains("it is empty"));
        assert!(extract("----\nname: x\n---\n").unwrap_err().contains("`----`"));
        assert!(extract("").unwrap_err().contains("must start"));
        assert!(extract("---\nname: x\n").unwrap_err().contains("not closed"));
    }

    #[test]
    fn size_cap_applies_before_parsing() {
        let small = Frontmatter { max_bytes: 16, ..Frontmatter::new("NOTE.md") };
        let error = small.read("---\ntitle: a long enough title\n---\n").unwrap_err();
        assert!(error.contains("The frontmatter of NOTE.md is 27 bytes; the limit is 16 bytes"), "{error}");
        assert!(small.parse("title: a long enough title\n").unwrap_err().contains("limit is 16 bytes"));
    }

    #[test]
    fn messages_name_the_configured_file() {
        let notes = Frontmatter::new("NOTE.md").requiring("the field `title`");
        assert_eq!(
            notes.parse("").unwrap_err(),
            "The frontmatter of NOTE.md is empty; it must contain at least the field `title`"
        );
        assert!(notes.parse("a: 1\na: 2\n").unwrap_err().contains("at line 3 of NOTE.md (first at line 2)"));
        let fields = notes.read("\u{feff}---\r\ntitle: Hi\r\n---\r\n").unwrap();
        assert_eq!(field(&fields, "title").and_then(Node::as_str), Some("Hi"));
        assert_eq!(field(&fields, "other"), None);
    }

    #[test]
    fn nesting_is_capped_at_eight_levels() {
        // `nest(n)` builds a mapping n levels deep including the top level.
        let nest = |levels: usize| {
            (0..levels).map(|level| format!("{}k{level}:", "  ".repeat(level))).collect::<Vec<_>>().join("\n")
                + " leaf\n"
        };
        assert!(parse(&nest(8)).is_ok());
        assert!(parse(&nest(9)).unwrap_err().contains("nested more than 8 levels"));
        for opener in ["[", "{"] {
            let flow = format!("k: {}\n", opener.repeat(5000));
            assert!(parse(&flow).unwrap_err().contains("nested more than 8 levels"));
        }
    }

    #[test]
    fn parse_rejects_multiple_documents_and_complex_keys() {
        assert!(parse("a: b\n--- c\n").unwrap_err().contains("single YAML document"));
        assert!(parse("? [a]\n: b\n").unwrap_err().contains("as a key"));
        assert!(parse("").unwrap_err().contains("is empty"));
        assert!(parse("- a\n").unwrap_err().contains("but it is a list"));
    }

    /// Random YAML-ish input must produce a result or an error, never a panic.
    #[test]
    fn parser_never_panics_on_random_input() {
        const PIECES: [&str; 24] = [
            "a",
            ":",
            " ",
            "\n",
            "-",
            "[",
            "]",
            "{",
            "}",
            ",",
            "\"",
            "'",
            "&x",
            "*x",
            "!!",
            "|",
            ">",
            "#",
            "?",
            "\t",
            "---",
            "...",
            "%YAML 1.2",
            "\r\n",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            let mut input = String::new();
            for _ in 0..(state % 40) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                input.push_str(PIECES[(state % PIECES.len() as u64) as usize]);
            }
            let _ = parse(&input);
            let _ = extract(&input);
        }
    }
}
