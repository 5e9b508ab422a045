//! Checks and helpers for text files and for the messages about them.
//!
//! Every `Err(String)` is a full sentence meant for the person who wrote the
//! file, naming it.

/// Checks that `bytes` are UTF-8 and returns them as text.
pub fn decode_utf8<'a>(bytes: &'a [u8], file: &str) -> Result<&'a str, String> {
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        not_utf8_message(file, offset, line_at(&bytes[..offset]))
    })
}

pub(crate) fn not_utf8_message(file: &str, offset: usize, line: usize) -> String {
    format!(
        "{file} is not valid UTF-8 text: the first invalid byte is at byte offset {offset} (line {line}); save the \
         file as UTF-8"
    )
}

/// Finds the first C0 control character other than tab, line feed and
/// carriage return, which no text editor puts in a text file on purpose.
pub fn find_control_char(text: &str, file: &str) -> Option<String> {
    let offset = first_control_byte(text.as_bytes())?;
    Some(format!(
        "{file} contains the control character U+{:04X} at byte offset {offset} (line {}); only tab, line feed and \
         carriage return are allowed",
        text.as_bytes()[offset],
        line_at(&text.as_bytes()[..offset])
    ))
}

/// The first byte below 0x20 other than tab, line feed and carriage return.
/// Bytes, not chars: no byte of a multi-byte UTF-8 character is below 0x80.
/// Eight bytes per step ("has a byte less than 0x20" on a `u64`), because in
/// WebAssembly every loop iteration also pays the host's CPU-deadline check:
/// a byte loop spent 2.3 µs on a 2 KiB SKILL.md, a tenth of a commit.
fn first_control_byte(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let is_control = |b: u8| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r');
    let mut chunks = bytes.chunks_exact(8);
    for (index, chunk) in chunks.by_ref().enumerate() {
        let word = u64::from_ne_bytes(chunk.try_into().expect("chunks of eight"));
        // Non-zero exactly when some byte of the word is below 0x20.
        if word.wrapping_sub(0x20 * ONES) & !word & HIGHS != 0
            && let Some(at) = chunk.iter().position(|&b| is_control(b))
        {
            return Some(index * 8 + at);
        }
    }
    let tail = chunks.remainder();
    tail.iter().position(|&b| is_control(b)).map(|at| bytes.len() - tail.len() + at)
}

/// `text` cut to a length that fits in a message (keys can be kilobytes long).
pub fn shorten(text: &str) -> String {
    const SHOWN_CHARS: usize = 60;
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The 1-based line a position is on, given the bytes before it.
pub fn line_at(prefix: &[u8]) -> usize {
    prefix.iter().filter(|&&b| b == b'\n').count() + 1
}

/// ` (1 MiB)`, ` (64 KiB)` for whole binary units; empty otherwise.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        0 => String::new(),
        b if b % (1 << 30) == 0 => format!(" ({} GiB)", b >> 30),
        b if b % (1 << 20) == 0 => format!(" ({} MiB)", b >> 20),
        b if b % (1 << 10) == 0 => format!(" ({} KiB)", b >> 10),
        _ => String::new(),
    }
}

/// `items` joined with `, `, cut after `max_chars` characters with
/// `, … (N more)`, for metadata values and messages listing many names.
pub fn join_capped<S: AsRef<str>>(items: &[S], max_chars: usize) -> String {
    let mut joined = String::new();
    for (index, item) in items.iter().enumerate() {
        let item = item.as_ref();
        let separator = if index == 0 { "" } else { ", " };
        if joined.chars().count() + separator.len() + item.chars().count() > max_chars {
            joined.push_str(&format!("{separator}… ({} more)", items.len() - index));
            break;
        }
        joined.push_str(separator);
        joined.push_str(item);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_and_control_characters() {
        let error = decode_utf8(b"---\nname: caf\xe9\n", "SKILL.md").unwrap_err();
        assert!(error.starts_with("SKILL.md is not valid UTF-8"));
        assert!(error.contains("byte offset 13") && error.contains("line 2"), "{error}");
        let error = find_control_char("ab\ncd\0", "SKILL.md").unwrap();
        assert!(error.contains("U+0000") && error.contains("byte offset 5") && error.contains("line 2"));
        assert_eq!(find_control_char("tab\there\r\n\u{7f} é 技能", "x"), None);
    }

    /// The eight-bytes-at-a-time scan finds what a byte loop finds, for
    /// every byte value at every position of words and tails.
    #[test]
    fn the_word_scan_agrees_with_a_byte_loop() {
        let naive = |bytes: &[u8]| bytes.iter().position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
        for len in 0..27 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut bytes = b"ab\tc\nde\rfgh 12345678\xe9\x80\xff xyz".repeat(2)[..len].to_vec();
                    bytes[at] = byte;
                    assert_eq!(first_control_byte(&bytes), naive(&bytes), "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(shorten(&"k".repeat(100)).chars().count(), 61);
        assert_eq!(human_size(1 << 20), " (1 MiB)");
        assert_eq!(human_size(65536), " (64 KiB)");
        assert_eq!(human_size(1000), "");
        assert_eq!(join_capped(&["a", "b", "c"], 100), "a, b, c");
        assert_eq!(join_capped(&["alpha", "beta", "gamma"], 12), "alpha, beta, … (1 more)");
        assert_eq!(join_capped::<&str>(&[], 10), "");
    }
}
