// Preloaded into the MCP conformance suite (`node --import`): its client has no option for a
// header, so every request it fetches carries the credential in `MCP_AUTH_HEADER` (`NAME=VALUE`,
// e.g. `Authorization=Bearer …`), as an MCP client configured with one sends it. Nothing else of
// the suite is touched.
const [name, ...value] = (process.env.MCP_AUTH_HEADER ?? "").split("=");
const fetchWithoutCredential = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (name && !headers.has(name)) headers.set(name, value.join("="));
  return fetchWithoutCredential(input, { ...init, headers });
};
