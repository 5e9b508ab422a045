//! Safe reading of `SKILL.md`'s text and YAML frontmatter.
//!
//! The frontmatter is untrusted input, so it is size-capped before the YAML
//! parser sees it, and it is parsed with yaml-rust2's pull parser into a small
//! tree of our own: anchors, aliases and tags stop parsing outright (no alias
//! is ever expanded), nesting is capped, and duplicate keys are rejected.
//!
//! Every `Err(String)` here is a full sentence meant for the person who wrote
//! the file.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, ScanError, TScalarStyle};

/// Largest frontmatter (the YAML between the `---` lines) parsed, in bytes.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest collection nesting allowed; the top-level mapping is level 1.
pub const MAX_NESTING_DEPTH: usize = 8;

const BYTE_ORDER_MARK: char = '\u{feff}';
const EMPTY_FRONTMATTER: &str = "The frontmatter of SKILL.md is empty; it must contain at least \
                                 the fields `name` and `description`";

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
}

/// Checks that `bytes` are UTF-8 and returns them as text.
pub fn decode_utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        format!(
            "SKILL.md is not valid UTF-8 text: the first invalid byte is at byte offset {offset} \
             (line {}); save the file as UTF-8",
            line_at(&bytes[..offset])
        )
    })
}

/// Finds the first C0 control character other than tab, line feed and
/// carriage return, which no text editor puts in a Markdown file on purpose.
pub fn find_control_char(text: &str) -> Option<String> {
    let (offset, found) =
        text.char_indices().find(|&(_, c)| c.is_ascii_control() && c != '\x7f' && !matches!(c, '\t' | '\n' | '\r'))?;
    Some(format!(
        "SKILL.md contains the control character U+{:04X} at byte offset {offset} (line {}); \
         only tab, line feed and carriage return are allowed",
        u32::from(found),
        line_at(&text.as_bytes()[..offset])
    ))
}

/// Returns the YAML text between the opening and closing `---` lines.
///
/// One leading UTF-8 byte order mark is tolerated. A delimiter is a whole line
/// that is `---` plus optional trailing spaces or tabs (CRLF tolerated); a
/// `---` inside a value or a `----` line does not count. The YAML always
/// starts on line 2 of the file.
pub fn extract(text: &str) -> Result<&str, String> {
    let text = text.strip_prefix(BYTE_ORDER_MARK).unwrap_or(text);
    let mut lines = lines_with_offsets(text);
    let opening_ok = lines.next().is_some_and(|(_, line)| is_delimiter(line));
    if !opening_ok {
        let first_line = text.lines().next().unwrap_or("");
        return Err(format!(
            "SKILL.md must start with YAML frontmatter: the first line must be `---`, but it is \
             {}",
            describe_line(first_line)
        ));
    }
    let yaml_start = text.find('\n').map_or(text.len(), |newline| newline + 1);
    let yaml_end = lines.find(|(_, line)| is_delimiter(line)).map(|(start, _)| start).ok_or_else(|| {
        "The frontmatter of SKILL.md is not closed: add a line containing only `---` after \
             the last field"
            .to_string()
    })?;
    let yaml = &text[yaml_start..yaml_end];
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(format!(
            "The frontmatter of SKILL.md is {} bytes; the limit is {MAX_FRONTMATTER_BYTES} bytes \
             (64 KiB). Keep long content in the Markdown body or in other files",
            yaml.len()
        ));
    }
    Ok(yaml)
}

/// Parses the frontmatter YAML; the result must be a mapping.
pub fn parse(yaml: &str) -> Result<Vec<(Scalar, Node)>, String> {
    let root = TreeBuilder { yaml, parser: Parser::new_from_str(yaml) }.document()?;
    match root {
        Some(Node::Mapping(entries)) => Ok(entries),
        Some(other) => Err(format!(
            "The frontmatter of SKILL.md must be a YAML mapping of `field: value` lines, but it \
             is {}",
            other.describe()
        )),
        None => Err(EMPTY_FRONTMATTER.to_string()),
    }
}

/// Builds a [`Node`] tree from parser events, rejecting what we never accept.
struct TreeBuilder<'a> {
    yaml: &'a str,
    parser: Parser<std::str::Chars<'a>>,
}

impl TreeBuilder<'_> {
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
                "The frontmatter of SKILL.md must be a single YAML document, but a second one \
                 starts at line {}",
                file_line(&mark)
            )),
        }
    }

    /// Parses the node that starts with `event`; `depth` is the nesting level
    /// a collection starting here would have.
    fn node(&mut self, event: Event, mark: Marker, depth: usize) -> Result<Node, String> {
        let is_collection = matches!(event, Event::MappingStart(..) | Event::SequenceStart(..));
        if is_collection && depth > MAX_NESTING_DEPTH {
            return Err(format!(
                "The frontmatter of SKILL.md is nested more than {MAX_NESTING_DEPTH} levels deep \
                 at line {}",
                file_line(&mark)
            ));
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
            _ => Err(format!("Unexpected YAML structure in the frontmatter of SKILL.md at line {}", file_line(&mark))),
        }
    }

    fn mapping(&mut self, depth: usize) -> Result<Node, String> {
        let mut entries = Vec::new();
        let mut first_lines: HashMap<String, usize> = HashMap::new();
        loop {
            let (key, key_mark) = match self.next()? {
                (Event::MappingEnd, _) => return Ok(Node::Mapping(entries)),
                (Event::Scalar(text, style, ..), mark) => (resolve_scalar(text, style), mark),
                (_, mark) => {
                    return Err(format!(
                        "The frontmatter of SKILL.md uses a list or mapping as a key at line {}; \
                         keys must be plain names",
                        file_line(&mark)
                    ));
                }
            };
            let line = file_line(&key_mark);
            // Keys are compared by their text, so `1` and `"1"` count as the
            // same key: stricter than YAML, never ambiguous for a reader.
            if let Some(first) = first_lines.insert(key.text.clone(), line) {
                return Err(format!(
                    "Duplicate key '{}' at line {line} of SKILL.md (first at line {first}); each \
                     key may appear only once in a mapping",
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
        let (event, mark) = self.parser.next_token().map_err(|error| scan_error_message(&error, self.yaml))?;
        let (anchor, tag) = match &event {
            Event::Alias(_) => return Err(alias_error(&mark)),
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
                "YAML tags such as '{handle}{}' are not allowed in the frontmatter of SKILL.md \
                 (line {}); remove the tag and quote the value if it must be a string",
                tag.suffix,
                file_line(&mark)
            ));
        }
        if anchor != 0 {
            return Err(format!(
                "YAML anchors (`&name`) are not allowed in the frontmatter of SKILL.md (line {}); \
                 write the value out instead",
                file_line(&mark)
            ));
        }
        Ok((event, mark))
    }
}

fn alias_error(mark: &Marker) -> String {
    format!(
        "YAML aliases (`*name`) are not allowed in the frontmatter of SKILL.md (line {}); write \
         the value out instead",
        file_line(mark)
    )
}

fn scan_error_message(error: &ScanError, yaml: &str) -> String {
    let mark = error.marker();
    let info = error.info();
    // An alias whose anchor was never defined fails inside the parser, before
    // we see an event; it is still an alias, so say so.
    if info.contains("unknown anchor") {
        return alias_error(mark);
    }
    // The scanner caps flow (`[`/`{`) nesting itself, before any event.
    if info.contains("recursion limit") {
        return format!(
            "The frontmatter of SKILL.md is nested more than {MAX_NESTING_DEPTH} levels deep at \
             line {}",
            file_line(mark)
        );
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
        "The frontmatter of SKILL.md is not valid YAML: {info} at line {}, column {}{hint}",
        file_line(mark),
        mark.col() + 1
    )
}

/// SKILL.md line of a YAML position: the YAML starts on line 2.
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

/// `text` cut to a length that fits in a message (keys can be kilobytes long).
pub fn shorten(text: &str) -> String {
    const SHOWN_CHARS: usize = 60;
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

fn line_at(prefix: &[u8]) -> usize {
    prefix.iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> ScalarKind {
        plain_scalar_kind(text)
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
    fn utf8_and_control_characters() {
        let error = decode_utf8(b"---\nname: caf\xe9\n").unwrap_err();
        assert!(error.contains("byte offset 13") && error.contains("line 2"), "{error}");
        let error = find_control_char("ab\ncd\0").unwrap();
        assert!(error.contains("U+0000") && error.contains("byte offset 5") && error.contains("line 2"));
        assert_eq!(find_control_char("tab\there\r\n\u{7f} é 技能"), None);
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
