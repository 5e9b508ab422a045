// What the Rust `dial-handler-sdk` gives a handler, for JavaScript: problems
// collected and capped, a file read through the `files` import in chunks
// within the host's read budget, and YAML-style frontmatter split off a
// Markdown file. Plain JavaScript with no WIT import, so it also runs (and is
// tested, test.mjs) under Node. Copy it into your own handler.

/** Problems are cut at this many, then one line says how many more. */
export const MAX_PROBLEMS = 50;

/** The host's cap on one `files.read` (1 MiB): larger reads come back short. */
export const CHUNK = 1 << 20;

/**
 * Errors and warnings, each `{ path, message }` as WIT's `problem` (`path`
 * undefined = about the whole resource). `all()` gives the errors, then the
 * warnings: what a rejected commit reports.
 */
export class ProblemList {
  #errors = [];
  #warnings = [];
  #dropped = 0;

  error(path, message) {
    this.#push(this.#errors, path, message);
  }

  warn(path, message) {
    this.#push(this.#warnings, path, message);
  }

  hasErrors() {
    return this.#errors.length > 0;
  }

  warnings() {
    return this.#capped(this.#warnings);
  }

  all() {
    return this.#capped([...this.#errors, ...this.#warnings]);
  }

  #push(list, path, message) {
    if (this.#errors.length + this.#warnings.length >= MAX_PROBLEMS) {
      this.#dropped++;
      return;
    }
    // The host prints `<path>: <message>`, so a message starting with the
    // path reads twice: messages here start after it.
    list.push(path === undefined ? { message } : { path, message });
  }

  #capped(list) {
    if (this.#dropped === 0) return list;
    return [...list, { message: `… and ${this.#dropped} more problems (only the first ${MAX_PROBLEMS} are reported)` }];
  }
}

/**
 * Reads a whole file as UTF-8 text through `read` (the `files` import's
 * `read(path, offset: bigint, len: number) -> Uint8Array`, which throws the
 * WIT `read-error` as `{ payload: { tag, val } }`), in chunks of at most 1 MiB.
 * Checks the listed size against `maxBytes` before reading anything. Returns
 * the text, or undefined after recording why on `problems`.
 */
export function readText(read, entry, maxBytes, problems) {
  const size = Number(entry.size);
  if (size > maxBytes) {
    problems.error(entry.path, `is ${size} bytes; at most ${maxBytes} are read`);
    return undefined;
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  while (offset < size) {
    let chunk;
    try {
      chunk = read(entry.path, BigInt(offset), Math.min(CHUNK, size - offset));
    } catch (thrown) {
      problems.error(entry.path, `could not be read: ${describeReadError(thrown)}`);
      return undefined;
    }
    if (chunk.length === 0) break; // the file is shorter than listed
    bytes.set(chunk.subarray(0, size - offset), offset);
    offset += chunk.length;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, offset));
  } catch {
    problems.error(entry.path, "is not UTF-8 text");
    return undefined;
  }
}

/** A `read-error` as a sentence. */
export function describeReadError(thrown) {
  const error = thrown && Object.hasOwn(thrown, "payload") ? thrown.payload : thrown;
  switch (error?.tag) {
    case "not-found":
      return "no such file in the resource";
    case "budget-exceeded":
      return `this check has read its budget of ${error.val} bytes; keep the files smaller`;
    case "storage":
      return `the storage failed (${error.val}); try again`;
    default:
      return String(error?.message ?? error);
  }
}

/**
 * Splits Markdown frontmatter: `---\n<yaml>\n---\n<body>`. Returns
 * `{ fields, body }` with `fields` the flat `key: value` lines (quotes
 * removed), or throws an Error whose message says what is wrong. Nested YAML
 * (lists, maps) is not parsed: bundle a YAML library (e.g. `yaml`, with
 * esbuild) if your type needs it.
 */
export function frontmatter(text, file) {
  const normalized = text.replace(/^\uFEFF/, "").replaceAll("\r\n", "\n");
  if (!normalized.startsWith("---\n")) {
    throw new Error(`${file} must start with YAML frontmatter: a line '---', the fields, then another '---'`);
  }
  const end = normalized.indexOf("\n---", 3);
  if (end === -1 || (normalized[end + 4] !== undefined && normalized[end + 4] !== "\n")) {
    throw new Error(`${file}'s frontmatter is not closed: add a line '---' after the fields`);
  }
  const fields = new Map();
  const lines = normalized.slice(4, end + 1).split("\n");
  lines.forEach((line, index) => {
    if (line.trim() === "" || line.trimStart().startsWith("#")) return;
    const match = /^([A-Za-z0-9_-]+):[ \t]*(.*)$/.exec(line);
    if (!match) {
      throw new Error(`${file} line ${index + 2}: expected 'key: value', found '${line.slice(0, 80)}'`);
    }
    if (fields.has(match[1])) throw new Error(`${file} line ${index + 2}: '${match[1]}' is given twice`);
    fields.set(match[1], unquote(match[2].trim()));
  });
  return { fields, body: normalized.slice(end + 5) };
}

function unquote(value) {
  const quoted = /^"(.*)"$/.exec(value) ?? /^'(.*)'$/.exec(value);
  return quoted ? quoted[1] : value;
}
