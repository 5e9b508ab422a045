// An OpenAPI tool: a folder holding `openapi.json`, an OpenAPI 3.x description
// of an HTTP API an agent calls as tools (one tool per operation), and an
// optional `README.md`. Written in JavaScript, built into a dial-host handler
// component with componentize-js (see README.md and build.mjs).
//
// The host calls the exports below (WIT `dial:handler@1.2.0`, world `handler`,
// names in camelCase); `files.read` is the only way to see bytes.

import { read } from "dial:handler/files@1.2.0";
import { emit } from "dial:handler/log@1.2.0";

import { ProblemList, readText } from "./sdk.js";

const SPEC = "openapi.json";
const README = "README.md";
const VERSION = "0.1.0";
/** The largest spec read (the type's per-file limit says the same). */
const MAX_SPEC_BYTES = 4 << 20;
/** Listings show this many operation ids, then "…". */
const MAX_LISTED_IDS = 400;
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
/** Tool names LLM function calling accepts. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function describe() {
  return {
    typeName: "openapi-tool",
    group: "tools",
    displayName: "OpenAPI tool",
    handlerVersion: VERSION,
    limits: { maxFileBytes: BigInt(MAX_SPEC_BYTES), maxFiles: 100, maxTotalBytes: 16n << 20n },
  };
}

/** What a commit asks (WIT 1.2): warnings and metadata, or the problems. */
export function check(resource, files) {
  const { problems, metadata } = inspect(resource, files);
  // A `result` export: the return value is `ok`, a thrown value is `err`.
  if (problems.hasErrors()) throw problems.all();
  return [problems.warnings(), metadata];
}

/** WIT 1.0/1.1: the same rules in two calls. */
export function validate(resource, files) {
  const { problems } = inspect(resource, files);
  if (problems.hasErrors()) throw problems.all();
  return problems.warnings();
}

export function buildMarkerMetadata(resource, files) {
  const { problems, metadata } = inspect(resource, files);
  if (problems.hasErrors()) throw problems.all();
  return metadata;
}

/** The spec cannot be deleted on its own: without it the folder is no tool. */
export function validateFileMutation(path, op) {
  if (op === "delete" && path === SPEC) {
    throw { path: SPEC, message: `${SPEC} cannot be deleted: it is the tool's description (delete the whole resource instead)` };
  }
}

function inspect(resource, files) {
  const problems = new ProblemList();
  const metadata = [];
  checkListing(files, problems);
  const entry = files.find((file) => file.path === SPEC);
  if (!entry) return { problems, metadata };
  const text = readText(read, entry, MAX_SPEC_BYTES, problems);
  if (text === undefined) return { problems, metadata };
  let spec;
  try {
    spec = JSON.parse(text);
  } catch (error) {
    problems.error(SPEC, `is not valid JSON: ${error.message}`);
    return { problems, metadata };
  }
  if (!isObject(spec)) {
    problems.error(SPEC, "must hold a JSON object (an OpenAPI document), not " + kind(spec));
    return { problems, metadata };
  }
  const header = checkHeader(spec, problems);
  const operations = checkOperations(spec, problems);
  checkRefs(spec, problems);
  if (!problems.hasErrors()) {
    emit("debug", `${resource.path}: ${operations.length} operations`);
    metadata.push(["title", header.title], ["version", header.version], ["openapi", header.openapi]);
    metadata.push(["operations", String(operations.length)]);
    metadata.push(["operationIds", joinCapped(operations.map((op) => op.id), MAX_LISTED_IDS)]);
    if (header.server) metadata.push(["server", header.server]);
  }
  return { problems, metadata };
}

/** From the listing alone: the spec is there, nothing else is unexpected. */
function checkListing(files, problems) {
  if (!files.some((file) => file.path === SPEC)) {
    const nested = files.find((file) => file.path.endsWith("/" + SPEC));
    const hint = nested
      ? ` (found ${nested.path}: put the spec at the top of the folder, not in a subfolder; zip the folder's contents, not the folder)`
      : "";
    problems.error(undefined, `An OpenAPI tool needs ${SPEC} at the top of the folder${hint}`);
  }
  for (const file of files) {
    if (file.path !== SPEC && file.path !== README) {
      problems.warn(file.path, `is not part of an OpenAPI tool (${SPEC} and ${README}); it is stored but nothing reads it`);
    }
  }
}

function checkHeader(spec, problems) {
  const openapi = spec.openapi;
  if (typeof openapi !== "string") {
    problems.error(SPEC, `#/openapi is ${missingOr(openapi)}: say which OpenAPI version the document follows, e.g. "openapi": "3.1.0"`);
  } else if (!/^3\.[0-9]+\.[0-9]+$/.test(openapi)) {
    problems.error(SPEC, `#/openapi is "${clip(openapi)}": only OpenAPI 3.x documents are tools (3.0.x or 3.1.x; convert a Swagger 2.0 file first)`);
  }
  const info = spec.info;
  const header = { openapi: String(openapi), title: "", version: "", server: undefined };
  if (!isObject(info)) {
    problems.error(SPEC, `#/info is ${missingOr(info)}: it must be an object with "title" and "version"`);
  } else {
    for (const field of ["title", "version"]) {
      const value = info[field];
      if (typeof value !== "string" || value.trim() === "") {
        problems.error(SPEC, `#/info/${field} is ${value === "" ? "empty" : missingOr(value)}: it must be a non-empty string`);
      } else {
        header[field] = clip(value);
      }
    }
  }
  if (Array.isArray(spec.servers) && isObject(spec.servers[0]) && typeof spec.servers[0].url === "string") {
    header.server = clip(spec.servers[0].url);
  }
  return header;
}

/** Every operation has an `operationId`, unique across the document. */
function checkOperations(spec, problems) {
  const operations = [];
  const paths = spec.paths;
  if (paths !== undefined && !isObject(paths)) {
    problems.error(SPEC, `#/paths is ${kind(paths)}: it must be an object of path items`);
    return operations;
  }
  const seen = new Map();
  for (const [path, item] of Object.entries(paths ?? {})) {
    if (!isObject(item)) continue;
    for (const method of METHODS) {
      const operation = item[method];
      if (operation === undefined) continue;
      const pointer = `#/paths/${escapePointer(path)}/${method}`;
      if (!isObject(operation)) {
        problems.error(SPEC, `${pointer} is ${kind(operation)}: an operation must be an object`);
        continue;
      }
      const id = operation.operationId;
      if (typeof id !== "string" || id === "") {
        problems.error(SPEC, `${pointer} has no operationId: every operation needs one, it is the tool's name`);
        continue;
      }
      const earlier = seen.get(id);
      if (earlier !== undefined) {
        problems.error(SPEC, `${pointer}/operationId "${clip(id)}" is already used by ${earlier}: operation ids must be unique`);
        continue;
      }
      seen.set(id, pointer);
      if (!TOOL_NAME.test(id)) {
        problems.warn(SPEC, `${pointer}/operationId "${clip(id)}" is not a valid tool name for most LLM APIs (1-64 letters, digits, '_' or '-')`);
      }
      operations.push({ id, pointer });
    }
  }
  if (operations.length === 0 && !problems.hasErrors()) {
    problems.error(SPEC, "#/paths defines no operations: a tool needs at least one (e.g. \"paths\": {\"/weather\": {\"get\": {\"operationId\": \"getWeather\", …}}})");
  }
  return operations;
}

/**
 * Every `$ref` resolves: a local one (`#/…`) to a value of this document,
 * an external one is refused (a tool's spec must stand alone). Iterative,
 * so a deeply nested document cannot overflow the stack.
 */
function checkRefs(spec, problems) {
  const stack = [[spec, ""]];
  while (stack.length > 0) {
    const [value, pointer] = stack.pop();
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${pointer}/${i}`]);
      continue;
    }
    if (!isObject(value)) continue;
    const ref = value.$ref;
    if (typeof ref === "string") {
      const where = `#${pointer}/$ref`;
      if (!ref.startsWith("#")) {
        problems.error(SPEC, `${where} "${clip(ref)}" points outside the document: a tool's spec must be self-contained (inline it under #/components)`);
      } else if (resolve(spec, ref) === undefined) {
        problems.error(SPEC, `${where} "${clip(ref)}" does not resolve: nothing in ${SPEC} is at that JSON pointer`);
      }
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) stack.push([value[keys[i]], `${pointer}/${escapePointer(keys[i])}`]);
  }
}

/** The value a local reference (`#/a/b~1c`) names, or undefined (RFC 6901). */
function resolve(spec, ref) {
  let fragment;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (fragment === "") return spec;
  if (!fragment.startsWith("/")) return undefined;
  let value = spec;
  for (const raw of fragment.slice(1).split("/")) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(value) ? !/^(0|[1-9][0-9]*)$/.test(token) : !isObject(value)) return undefined;
    if (!Object.hasOwn(value, token)) return undefined;
    value = value[token];
  }
  return value;
}

function escapePointer(token) {
  return token.replaceAll("~", "~0").replaceAll("/", "~1");
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function kind(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function missingOr(value) {
  return value === undefined ? "missing" : kind(value);
}

/** Quoted input is cut, so a hostile value cannot make a huge message. */
function clip(text, max = 200) {
  return text.length <= max ? text : text.slice(0, max) + "…";
}

function joinCapped(items, max) {
  const shown = items.slice(0, max).join(", ");
  return items.length > max ? `${shown}, … (${items.length - max} more)` : shown;
}
