// Every query option through the TypeScript door (issue 42): tests/query_doors.py builds one small dataset
// in the gateway's KX_HOME with the in-process engine and prints, for each QueryOptions field, a value that
// changes the answer and what the engine answered; queryDataset must answer each the same.
// (The CLI, the Python SDK, the gateway's HTTP and MCP are held to the same cases by tests/test_query_doors.py.)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { KxClient } from "kx-sdk";

import { REPO, startGateway } from "./gateway.mjs";

let gw;
let doors;

before(async () => {
  gw = await startGateway();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("KX_")));
  if (process.env.KX_MODEL_CACHE) env.KX_MODEL_CACHE = process.env.KX_MODEL_CACHE;
  doors = JSON.parse(execFileSync(process.env.KX_PYTHON ?? "python3", ["-m", "tests.query_doors", join(gw.home, "home")],
                                  { cwd: REPO, encoding: "utf8", env: { ...env, PYTHONPATH: REPO } }));
});

after(async () => {
  const log = gw?.log() ?? "";
  assert.equal(await gw?.stop(), 0, log);
});

// tests/query_doors.py `shape`: integers and strings only, so two processes' models agree to the last digit
function shape(answer) {
  return {
    mode: String(answer.mode), k: answer.k, rerank: answer.rerank, expanded_terms: answer.expanded_terms ?? null,
    hits: answer.hits.map((h) => [h.passage_ref, h.rank, h.fused_rank, h.dense_rank, h.sparse_rank, h.version]),
  };
}

test("every query option reaches the gateway through queryDataset with the engine's own effect", async () => {
  const kx = new KxClient(gw.url, { token: gw.token });
  // a case for every option the gateway's own schema takes besides the text
  const schema = await (await fetch(`${gw.url}/openapi.json`, { headers: { Authorization: `Bearer ${gw.token}` } }))
    .json();
  const options = Object.keys(schema.components.schemas.QueryIn.properties).filter((name) => name !== "text");
  assert.deepEqual(doors.cases.map((c) => c.option).sort(), options.sort());
  for (const { option, options, shape: expected } of doors.cases) {
    const answer = await kx.queryDataset(doors.dataset, { text: doors.question, ...options });
    assert.deepEqual(shape(answer), expected, option);
  }
});
