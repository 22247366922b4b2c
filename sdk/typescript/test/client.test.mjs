// kx-sdk against a real `kx serve`: ingest, query every mode, read documents, every error status it can answer.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:net";
import { after, before, test } from "node:test";

import { KxClient, KxError, RetrievalMode, toBase64 } from "kx-sdk";

import { freePort, REPO, startGateway } from "./gateway.mjs";

const LIMIT = 2_000_000;  // the gateway's KX_MAX_REQUEST_BYTES here, so a 413 costs little
let gw;
let kx;

before(async () => {
  gw = await startGateway({ KX_MAX_REQUEST_BYTES: String(LIMIT) });
  kx = new KxClient(gw.url, { token: gw.token });
});

after(async () => {
  const log = gw?.log() ?? "";
  assert.equal(await gw?.stop(), 0, log);
  assert.ok(!log.includes(gw.token), "the request log never holds the token");
});

const RETURNS = "# Returns\n\nA logger bought from us may be returned within 30 days for a full refund. "
  + "Bring the receipt and the serial number.\n";
const DOCK = "The loading dock closes at six; deliveries after that wait until morning.";

test("ingest strings, bytes and Blobs, then list the datasets", async () => {
  assert.deepEqual(await kx.listDatasets(), []);
  const report = await kx.ingestDocuments("notes", [
    DOCK,
    new TextEncoder().encode(RETURNS),
    new Blob(["Visitors park in bay C behind the warehouse."], { type: "text/plain" }),
  ], { names: ["dock", "returns", "parking"], mediaTypes: [null, "text/markdown", null] });
  assert.equal(report.dataset, "notes");
  assert.equal(report.created, true);
  assert.equal(report.added, 3);
  assert.deepEqual(report.results.map((r) => r.status), ["added", "added", "added"]);
  const again = await kx.ingestDocuments("notes", [DOCK]);
  assert.equal(again.unchanged, 1);
  const [summary] = await kx.listDatasets();
  assert.equal(summary.name, "notes");
  assert.equal(summary.documents, 3);
  assert.equal((await kx.datasetSummary("notes")).passages, summary.passages);
  assert.equal((await kx.health()).status, "ok");
  assert.equal(typeof (await kx.info()).version, "string");
});

test("query every mode: the hits are an array that carries the query's fields", async () => {
  for (const mode of [RetrievalMode.HYBRID, RetrievalMode.DENSE, RetrievalMode.SPARSE]) {
    const hits = await kx.queryDataset("notes", { text: "how long do I have to return a logger?", k: 2, mode });
    assert.ok(Array.isArray(hits));
    assert.equal(hits.mode, mode);
    assert.equal(hits.dataset, "notes");
    assert.equal(hits.k, 2);
    assert.equal(hits.length, hits.hits.length);
    assert.ok(hits.length >= 1 && hits.length <= 2);
    const [top] = hits;
    assert.equal(top.document_name, "returns", mode);
    assert.equal(top.rank, 1);
    assert.match(top.chunk, /^\[chunk \d+\/\d+\]$/);
    assert.equal(typeof hits.timings_ms, "object");
    if (mode === "dense") assert.equal(top.sparse_rank, null);
    if (mode === "sparse") assert.equal(top.dense_rank, null);
  }
  const plain = await kx.queryDataset("notes", { text: "loading dock", mode: "sparse", rerank: false });
  assert.equal(plain.rerank, false);
  assert.equal(plain[0].document_name, "dock");
});

test("read a document: its text, where its passages lie, paged listing", async () => {
  const [hit] = await kx.queryDataset("notes", { text: "serial number receipt", k: 1, mode: "sparse" });
  const text = await kx.documentText("notes", hit.document_ref);
  assert.equal(text.slice(hit.char_start, hit.char_end), hit.text);
  const spans = await kx.documentPassages("notes", hit.document_ref);
  assert.equal(spans.length, hit.chunk_count);
  assert.equal(spans[hit.chunk_index].ref, hit.passage_ref);
  const first = await kx.listDocuments("notes", { limit: 2 });
  assert.deepEqual(first.map((d) => d.name), ["dock", "returns"]);
  assert.equal(first.total, 3);
  assert.equal(first.offset, 0);
  const rest = await kx.listDocuments("notes", { offset: 2, limit: 2 });
  assert.deepEqual(rest.map((d) => d.name), ["parking"]);
  assert.equal(rest[0].media_type, "text/plain");
});

test("the agent runs on the gateway and cites what it read", async () => {
  const run = await kx.runAgent("how long do I have to return a logger?", { dataset: "notes", maxSteps: 2 });
  assert.equal(run.dataset, "notes");
  assert.ok(run.steps.length >= 1 && run.steps.length <= 2);
  assert.ok(run.citations.some((c) => c.document_name === "returns"), JSON.stringify(run.citations));
  assert.match(run.answer, /\[returns, chunk \d+\/\d+\]/);
});

async function refusal(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof KxError, String(error));
    return error;
  }
  assert.fail("expected a KxError");
}

test("every error status the gateway answers comes back as a KxError", async () => {
  const missing = await refusal(kx.queryDataset("nope", { text: "x" }));
  assert.deepEqual([missing.code, missing.status], ["NOT_FOUND", 404]);
  assert.match(missing.message, /nope/);
  assert.equal(String(missing), `NOT_FOUND: ${missing.message}`);

  const badMode = await refusal(kx.queryDataset("notes", { text: "x", mode: "fuzzy" }));
  assert.deepEqual([badMode.code, badMode.status], ["INVALID_ARGUMENT", 400]);
  const badRef = await refusal(kx.documentText("notes", "f".repeat(64)));
  assert.equal(badRef.code, "NOT_FOUND");
  const badPage = await refusal(kx.listDocuments("notes", { limit: 5000 }));
  assert.equal(badPage.code, "INVALID_ARGUMENT");

  const noToken = await refusal(new KxClient(gw.url).listDatasets());
  assert.deepEqual([noToken.code, noToken.status], ["UNAUTHENTICATED", 401]);
  const wrongToken = await refusal(new KxClient(gw.url, { token: "nope" }).listDatasets());
  assert.equal(wrongToken.status, 401);

  const fromPage = new KxClient(gw.url, {
    token: gw.token,
    fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, Origin: "http://evil.example" } }),
  });
  const forged = await refusal(fromPage.listDatasets());
  assert.deepEqual([forged.code, forged.status], ["PERMISSION_DENIED", 403]);

  const noDataset = await refusal(kx.runAgent("what is there?"));
  assert.deepEqual([noDataset.code, noDataset.status], ["FAILED_PRECONDITION", 412]);

  const huge = await refusal(kx.ingestDocuments("notes", [new Uint8Array(LIMIT + 1)]));
  assert.deepEqual([huge.code, huge.status], ["RESOURCE_EXHAUSTED", 413]);

  const closed = await refusal(new KxClient(`http://127.0.0.1:${await freePort()}`, { token: "x" }).listDatasets());
  assert.deepEqual([closed.code, closed.status], ["UNAVAILABLE", 503]);

  const allRefused = await refusal(kx.ingestDocuments("notes", ["  ", "\n"], { names: ["blank", "newline"] }));
  assert.deepEqual([allRefused.code, allRefused.status], ["INVALID_ARGUMENT", 400]);
  assert.match(allRefused.message, /nothing was stored: blank: .*nothing to index/);
  assert.deepEqual(allRefused.results.map((r) => [r.name, r.status, r.code]),
                   [["blank", "refused", "INVALID_ARGUMENT"], ["newline", "refused", "INVALID_ARGUMENT"]]);
  assert.ok(allRefused.results.every((r) => r.reason.includes("nothing to index")));

  const local = await refusal(kx.ingestDocuments("notes", ["a", "b"], { names: ["only one"] }));
  assert.equal(local.code, "INVALID_ARGUMENT");
  await refusal(kx.ingestDocuments("notes", []));
  await refusal(kx.documentText("notes", ""));
  // every method answers a promise, refusals included: these threw before returning one, past a .catch()
  for (const call of [() => kx.datasetSummary(""), () => kx.embedDataset(""), () => kx.listDocuments(""),
                      () => kx.queryDataset("", { text: "x" }), () => kx.documentPassages("notes", "")]) {
    let pending;
    assert.doesNotThrow(() => { pending = call(); });
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof KxError && error.code === "INVALID_ARGUMENT", String(error));
  }
});

test("a query that names no k or mode gets the gateway's defaults, as the CLI and the Python SDK do", async () => {
  // the SDK sent k 5 and mode hybrid whatever the gateway's KX_DEFAULT_K / KX_DEFAULT_MODE said
  const own = await startGateway({ KX_DEFAULT_K: "2", KX_DEFAULT_MODE: "sparse" });
  try {
    const client = new KxClient(own.url, { token: own.token });
    await client.ingestDocuments("notes", [DOCK, RETURNS, "Visitors park in bay C.", "The cafe opens at eight."]);
    const hits = await client.queryDataset("notes", { text: "loading dock deliveries" });
    assert.deepEqual([hits.mode, hits.requested_k, hits.k], ["sparse", 2, 2]);
    assert.equal(hits[0].dense_rank, null);
    const chosen = await client.queryDataset("notes", { text: "loading dock deliveries", k: 1, mode: "hybrid" });
    assert.deepEqual([chosen.mode, chosen.requested_k], ["hybrid", 1]);
    const none = await refusal(client.queryDataset("notes"));
    assert.deepEqual([none.code, none.status], ["INVALID_ARGUMENT", 400]);
    assert.match(none.message, /give query text/);
    const nan = await refusal(client.queryDataset("notes", { text: "dock", k: Number.NaN }));
    assert.equal(nan.code, "INVALID_ARGUMENT");  // JSON would have carried it as null: the default k, silently
    assert.match(nan.message, /^k: NaN is not a number/);
  } finally {
    assert.equal(await own.stop(), 0);
  }
});

test("an address that is not a URL, a refused connection and a timeout each say what to do", async () => {
  for (const bad of ["127.0.0.1:50151", "http://[bad", "ftp://127.0.0.1:50151"]) {
    assert.throws(() => new KxClient(bad), (error) => error instanceof KxError && error.code === "INVALID_ARGUMENT"
      && /is not an http:\/\/ or https:\/\/ URL/.test(error.message), bad);
  }
  const refused = await refusal(new KxClient(`http://127.0.0.1:${await freePort()}`).listDatasets());
  assert.deepEqual([refused.code, refused.status], ["UNAVAILABLE", 503]);
  assert.match(refused.message, /\(TypeError: fetch failed \(ECONNREFUSED\)\); start it with `kx serve`/);
  const silent = createServer(() => {});  // accepts, never answers
  await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
  try {
    const slow = new KxClient(`http://127.0.0.1:${silent.address().port}`, { timeoutMs: 200 });
    const late = await refusal(slow.listDatasets());
    assert.deepEqual([late.code, late.status], ["UNAVAILABLE", 503]);
    assert.match(late.message, /gave no answer to GET \/v1\/datasets within 200 ms \(timeoutMs\).*raise timeoutMs/);
  } finally {
    silent.closeAllConnections?.();
    silent.close();
  }
  // an answer that starts, then stalls or is cut: the body's failure escaped as a bare DOMException / TypeError
  const half = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"datas';
  const stalls = createServer((socket) => socket.on("data", () => socket.write(half)));
  const cuts = createServer((socket) => socket.on("data", () => { socket.write(half); socket.destroy(); }));
  for (const server of [stalls, cuts]) await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const stalled = await refusal(new KxClient(`http://127.0.0.1:${stalls.address().port}`, { timeoutMs: 300 })
      .listDatasets());
    assert.deepEqual([stalled.code, stalled.status], ["UNAVAILABLE", 503]);
    assert.match(stalled.message, /gave no answer to GET \/v1\/datasets within 300 ms \(timeoutMs\)/);
    const cut = await refusal(new KxClient(`http://127.0.0.1:${cuts.address().port}`).listDatasets());
    assert.deepEqual([cut.code, cut.status], ["UNAVAILABLE", 503]);
    assert.match(cut.message, /broke while its answer to GET \/v1\/datasets arrived .*; try again$/);
  } finally {
    for (const server of [stalls, cuts]) {
      server.closeAllConnections?.();
      server.close();
    }
  }
});

test("the README's snippet runs as written", () => {
  // build/examples/readme.js is examples/readme.ts compiled; the README shows the same file
  const out = execFileSync(process.execPath, ["build/examples/readme.js"], {
    cwd: new URL("..", import.meta.url), encoding: "utf8",
    env: { ...process.env, KX_GATEWAY: gw.url, KX_TOKEN: gw.token },
  });
  const lines = out.trim().split("\n");
  assert.match(lines[0], /^1 returns \[chunk 1\/1\]/);
  assert.match(lines.at(-1), /^hybrid \{"/);
  const readme = execFileSync("cat", ["README.md"], { cwd: REPO, encoding: "utf8" });
  const snippet = execFileSync("cat", ["sdk/typescript/examples/readme.ts"], { cwd: REPO, encoding: "utf8" });
  assert.ok(readme.includes(snippet.trim()), "README.md shows examples/readme.ts verbatim");
});

test("base64 matches the platform's", () => {
  for (const size of [0, 1, 2, 3, 4, 5, 255, 1000]) {
    const bytes = Uint8Array.from({ length: size }, (_, i) => (i * 37 + 11) % 256);
    assert.equal(toBase64(bytes), Buffer.from(bytes).toString("base64"));
  }
});
