// npm run generate [-- URL|FILE]: write src/openapi.ts from the gateway's OpenAPI description.
// Without an argument the description is made in-process by the repository's Python (KX_PYTHON, else python3).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { render } from "./openapi.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const source = process.argv[2];

let schema;
if (source?.startsWith("http")) {
  schema = await (await fetch(source)).json();
} else if (source) {
  schema = JSON.parse(readFileSync(source, "utf8"));
} else {
  const python = process.env.KX_PYTHON ?? "python3";
  const code = "import json; from engine import Engine; from engine.server.gateway import create_app; "
    + "print(json.dumps(create_app(Engine(), None).openapi()))";
  schema = JSON.parse(execFileSync(python, ["-c", code], { cwd: repo, encoding: "utf8",
    env: { ...process.env, PYTHONPATH: repo } }));
}
writeFileSync(join(here, "..", "src", "openapi.ts"), await render(schema));
console.log("wrote src/openapi.ts");
