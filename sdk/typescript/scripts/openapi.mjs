// The gateway's OpenAPI description -> src/openapi.ts, the types the client is written against.
// Used by `npm run generate` (to write the file) and by test/openapi.test.mjs (to prove it has not drifted).
import openapiTS, { astToString } from "openapi-typescript";

const HEADER = `// Generated from kx serve's /openapi.json by openapi-typescript (npm run generate). Do not edit:
// test/openapi.test.mjs regenerates it from a running gateway and fails when the two differ.
`;

export async function render(schema) {
  const ast = await openapiTS(schema, { alphabetize: true });
  return HEADER + astToString(ast);
}
