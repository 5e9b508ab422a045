#!/usr/bin/env node
// Builds a JavaScript handler into a dial-host component with componentize-js
// (its JavaScript API: `jco componentize` needs Node 22, this runs on 20).
//
//   node build.mjs                        # handler.js → openapi-tools.wasm
//   node build.mjs --source other.js --out /tmp/other.wasm [--wit path/to/wit]
//
// The handler's exports are wrapped (ENTRY below) so that a thrown `Error`
// (a bug, as opposed to a thrown list of problems) reaches the host's error
// message instead of becoming an empty list of problems.
//
// The component is rebuilt only when an input changed: the JavaScript files
// next to the source, the WIT, and the toolchain's version (a `.inputs` file
// beside the output keeps their digest).

import { createHash } from "node:crypto";
import { readdir, readFile, rm, writeFile, stat } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    source: { type: "string", default: join(here, "handler.js") },
    out: { type: "string", default: join(here, "openapi-tools.wasm") },
    // The contract: dial-host's wit/ (a copy of wit/handler.wit in your own project).
    wit: { type: "string", default: join(here, "../../../wit") },
    force: { type: "boolean", default: false },
  },
});
const source = resolve(args.source);
const out = resolve(args.out);
const wit = resolve(args.wit);

const toolchain = JSON.parse(
  await readFile(join(here, "node_modules/@bytecodealliance/componentize-js/package.json"), "utf8").catch(() => {
    console.error("build.mjs: componentize-js is not installed: run `npm ci` in " + here);
    process.exit(1);
  }),
);

// Everything the component is made of.
const digest = createHash("sha256");
digest.update(`componentize-js ${toolchain.version}\n`);
for (const dir of [dirname(source), wit]) {
  const names = (await stat(dir)).isDirectory() ? (await readdir(dir)).sort() : [];
  for (const name of names.filter((n) => /\.(m?js|wit)$/.test(n) && !n.startsWith("."))) {
    digest.update(`${name}\n`).update(await readFile(join(dir, name)));
  }
}
digest.update(await readFile(source)).update(entry(basename(source)));
const inputs = digest.digest("hex");
const stamp = out + ".inputs";
if (!args.force && (await readFile(stamp, "utf8").catch(() => "")) === inputs && (await stat(out).catch(() => null))) {
  process.exit(0);
}

const { componentize } = await import("@bytecodealliance/componentize-js");
const started = Date.now();
// The entry sits beside the source, so the source's relative imports resolve.
const entryPath = join(dirname(source), `.dial-entry-${basename(source)}`);
await writeFile(entryPath, entry(basename(source)));
const { component } = await componentize({
  sourcePath: entryPath,
  witPath: wit,
  worldName: "dial:handler/handler@1.2.0",
  // The host links no network and no real clocks or randomness: leave out
  // what needs them. `stdio` stays, so an uncaught error's message reaches
  // stderr, which the host quotes when a call crashes.
  disableFeatures: ["http", "fetch-event", "random", "clocks"],
}).finally(() => rm(entryPath, { force: true }));
await writeFile(out, component);
await writeFile(stamp, inputs);
const mib = (component.length / (1 << 20)).toFixed(1);
console.error(`build.mjs: ${out} (${mib} MiB) in ${((Date.now() - started) / 1000).toFixed(1)} s`);

/**
 * The module componentize-js builds: the handler's five exports, each
 * guarded. In WIT, a thrown value is a `result` export's `err`: a list of
 * problems (or one problem, for `validateFileMutation`) is what a handler
 * throws to reject. Anything else thrown (an `Error`, a string) is a bug:
 * its message and stack go to stderr and the call fails, so the host answers
 * 500 `handler '<type>@<version>' crashed: <message> …` (rather than a 400
 * with no reason, which is what an `Error` lowered as a list would give).
 */
function entry(source) {
  return `import * as handler from "./${source}";

function isProblem(value) {
  return typeof value === "object" && value !== null && !(value instanceof Error) && typeof value.message === "string";
}

function report(name, thrown) {
  const text = thrown instanceof Error ? \`\${thrown}\${thrown.stack ? "\\n" + thrown.stack : ""}\` : \`\${typeof thrown} \${String(thrown)}\`;
  console.error(\`\${name} threw \${text}\`);
}

function guard(name, rejects) {
  const call = handler[name];
  if (typeof call !== "function") throw new Error(\`the handler does not export \${name}\`);
  return (...args) => {
    try {
      return call(...args);
    } catch (thrown) {
      if (rejects(thrown)) throw thrown;
      report(name, thrown);
      // No problem named: the host reports the call as a crash, quoting the line above.
      if (name !== "validateFileMutation") throw [];
      throw { message: undefined };
    }
  };
}

const problems = (thrown) => Array.isArray(thrown) && thrown.every(isProblem);
export const describe = guard("describe", () => false);
export const check = guard("check", problems);
export const validate = guard("validate", problems);
export const buildMarkerMetadata = guard("buildMarkerMetadata", problems);
export const validateFileMutation = guard("validateFileMutation", isProblem);
`;
}
