// A real `kx serve` on a free loopback port with a temporary KX_HOME, for the tests.
// The repository's Python runs it (KX_PYTHON, else python3), importing this checkout's code.
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function startGateway(env = {}) {
  const home = mkdtempSync(join(tmpdir(), "kx-sdk-ts-"));
  const port = await freePort();
  const logPath = join(home, "serve.log");
  const log = openSync(logPath, "w");
  const childEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("KX_")));
  if (process.env.KX_MODEL_CACHE) childEnv.KX_MODEL_CACHE = process.env.KX_MODEL_CACHE;  // a shared export cache
  const proc = spawn(process.env.KX_PYTHON ?? "python3", ["-m", "kx_tui", "serve", "--port", String(port)], {
    cwd: REPO, stdio: ["ignore", log, log],
    env: { ...childEnv, KX_HOME: join(home, "home"), PYTHONPATH: REPO, ...env },
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`kx serve exited: ${readFileSync(logPath, "utf8")}`);
    try {
      if ((await fetch(`${url}/v1/health`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`kx serve did not answer within 120 s: ${readFileSync(logPath, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const token = readFileSync(join(home, "home", "gateway.token"), "utf8").trim();
  return {
    url, port, token, home,
    log: () => readFileSync(logPath, "utf8"),
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      rmSync(home, { recursive: true, force: true });
      return proc.exitCode;
    },
  };
}
