// The SDK helpers under Node (`npm test`; scripts/test runs it before the build):
// what the handler relies on, without a component.
import assert from "node:assert/strict";
import { test } from "node:test";

import { MAX_PROBLEMS, ProblemList, frontmatter, readText } from "./sdk.js";

/** A fake `files.read`: the host's contract (1 MiB per read, errors thrown as `{ payload }`). */
function reader(files, budget = Infinity) {
  let spent = 0;
  const calls = [];
  const read = (path, offset, len) => {
    calls.push([path, offset, len]);
    if (!(path in files)) throw { payload: { tag: "not-found" } };
    const bytes = new TextEncoder().encode(files[path]).subarray(Number(offset), Number(offset) + Math.min(len, 1 << 20));
    if (spent + bytes.length > budget) throw { payload: { tag: "budget-exceeded", val: BigInt(budget) } };
    spent += bytes.length;
    return bytes;
  };
  return { read, calls };
}

test("readText reads a file larger than one read in chunks", () => {
  const text = "x".repeat((1 << 20) + 10);
  const { read, calls } = reader({ "a.json": text });
  const problems = new ProblemList();
  assert.equal(readText(read, { path: "a.json", size: BigInt(text.length) }, 4 << 20, problems), text);
  assert.equal(calls.length, 2);
  assert.equal(problems.hasErrors(), false);
});

test("readText refuses an oversized file before reading it", () => {
  const { read, calls } = reader({ "a.json": "{}" });
  const problems = new ProblemList();
  assert.equal(readText(read, { path: "a.json", size: 100n }, 10, problems), undefined);
  assert.equal(calls.length, 0);
  assert.deepEqual(problems.all(), [{ path: "a.json", message: "is 100 bytes; at most 10 are read" }]);
});

test("readText turns read errors and bad UTF-8 into problems", () => {
  const problems = new ProblemList();
  readText(reader({}).read, { path: "gone", size: 1n }, 10, problems);
  readText(reader({ big: "0123456789" }, 4).read, { path: "big", size: 10n }, 10, problems);
  const bad = () => new Uint8Array([0xff, 0xfe]);
  readText(bad, { path: "bin", size: 2n }, 10, problems);
  assert.deepEqual(
    problems.all().map((p) => `${p.path}: ${p.message}`),
    [
      "gone: could not be read: no such file in the resource",
      "big: could not be read: this check has read its budget of 4 bytes; keep the files smaller",
      "bin: is not UTF-8 text",
    ],
  );
});

test("ProblemList keeps errors before warnings and caps the count", () => {
  const problems = new ProblemList();
  problems.warn("a", "w");
  problems.error(undefined, "e");
  assert.deepEqual(problems.all(), [{ message: "e" }, { path: "a", message: "w" }]);
  for (let i = 0; i < MAX_PROBLEMS + 5; i++) problems.error("x", `e${i}`);
  assert.equal(problems.all().length, MAX_PROBLEMS + 1);
  assert.match(problems.all().at(-1).message, /and 7 more problems/);
});

test("frontmatter splits fields and says what is wrong", () => {
  const { fields, body } = frontmatter("---\ntitle: \"Weather\"\n# comment\nowner: data-team\n---\n# Body\n", "CARD.md");
  assert.deepEqual([...fields], [["title", "Weather"], ["owner", "data-team"]]);
  assert.equal(body, "# Body\n");
  assert.throws(() => frontmatter("# no", "CARD.md"), /CARD.md must start with YAML frontmatter/);
  assert.throws(() => frontmatter("---\ntitle: x\n", "CARD.md"), /not closed/);
  assert.throws(() => frontmatter("---\n- item\n---\n", "CARD.md"), /CARD.md line 2: expected 'key: value'/);
  assert.throws(() => frontmatter("---\na: 1\na: 2\n---\n", "CARD.md"), /'a' is given twice/);
});
