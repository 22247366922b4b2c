// The types the client is written against (src/openapi.ts) are what a running gateway describes.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { render } from "../scripts/openapi.mjs";
import { startGateway } from "./gateway.mjs";

test("src/openapi.ts is generated from the gateway's /openapi.json (npm run generate fixes a drift)", async () => {
  const gw = await startGateway({ KX_SERVE_EMBED_MODEL: "none" });
  try {
    const schema = await (await fetch(`${gw.url}/openapi.json`, {
      headers: { Authorization: `Bearer ${gw.token}` },
    })).json();
    const committed = readFileSync(new URL("../src/openapi.ts", import.meta.url), "utf8");
    assert.equal(await render(schema), committed,
                 "the gateway's API changed: run `npm run generate` in sdk/typescript and commit src/openapi.ts");
  } finally {
    await gw.stop();
  }
});
