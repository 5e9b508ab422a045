// A JavaScript handler that misbehaves on request, to test the host's sandbox
// with an interpreted (SpiderMonkey) component. Its type is `js-misbehaving`.
//
// `check` (and `validate`) look at the resource's file names: `loop` spins
// forever, `hog` grabs memory until the cap stops it, `throw` throws an
// `Error` (a handler bug: what a user must see is the handler and the
// message), `throw-value` throws a plain string; anything else is valid, with
// the file count as metadata. Built by scripts/test with
// examples/handlers/js-openapi-tools/build.mjs.

export function describe() {
  return {
    typeName: "js-misbehaving",
    group: "js-misbehaving",
    displayName: "Misbehaving JavaScript test handler",
    handlerVersion: "0.1.0",
    limits: { maxFiles: 10 },
  };
}

export function check(resource, files) {
  misbehave(files);
  return [[], [["files", String(files.length)]]];
}

export function validate(resource, files) {
  misbehave(files);
  return [];
}

export function buildMarkerMetadata(resource, files) {
  return [["files", String(files.length)]];
}

export function validateFileMutation(path, op) {
  if (path === "throw") throw new Error(`refusing to ${op} ${path} by throwing`);
}

function misbehave(files) {
  const names = new Set(files.map((file) => file.path));
  if (names.has("loop")) {
    let counter = 0;
    for (;;) counter = (counter + 1) | 0;
  }
  if (names.has("hog")) {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  }
  if (names.has("throw")) {
    throw new Error("the spec's servers[0].url is not a URL (thrown on purpose)");
  }
  if (names.has("throw-value")) {
    throw "a plain string thrown on purpose";
  }
}
