/**
 * kx-sdk: a client for the kx gateway (`kx serve`), with no runtime dependencies.
 *
 * It needs only the global `fetch` (Node 18 and later, Deno, Bun, browsers).
 * Field names are the gateway's own (snake_case, as in `/openapi.json`), so a
 * hit reads the same here, in the Python SDK and in `kx datasets query --json`.
 *
 * ```ts
 * import { KxClient, RetrievalMode } from "kx-sdk";
 * const client = new KxClient("http://127.0.0.1:50151", { token });
 * const hits = await client.queryDataset("handbook", { text: "refunds", k: 5, mode: RetrievalMode.HYBRID });
 * ```
 */

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** Which retrievers answer a query: `RetrievalMode.HYBRID` or plain `"hybrid"` both work. */
export const RetrievalMode = {
  HYBRID: "hybrid",
  DENSE: "dense",
  SPARSE: "sparse",
} as const satisfies Record<string, Schemas["RetrievalMode"]>;
export type RetrievalMode = Schemas["RetrievalMode"];

/** One passage of an answer: where it lies (chunk, characters, pages, section) and why it ranks where it does. */
export type Hit = Schemas["HitOut"] & Record<string, unknown>;

/** A query's answer without its hits. */
export type QueryFields = Omit<Schemas["QueryOut"], "hits">;

/**
 * A query's answer: the array of its hits (`hits.length`, `hits[0]`, `for (const hit of hits)`) that also
 * carries the query's other fields (`hits.mode`, `hits.timings_ms`, ...) and `hits.hits`, as the Python SDK does.
 */
export type QueryResult = Hit[] & QueryFields & { hits: Hit[] };

/**
 * A query: its text or a pre-computed vector (or both), and its options (`k`, `mode`, `rerank`, `where`,
 * `versions`, `expand`, ...), each described where it is declared (the gateway's `QueryIn`, derived from the
 * engine's `QueryOptions`): an option the engine gains reaches this type with `npm run generate`. Left out,
 * an option is the gateway's own default (`KX_DEFAULT_K`, `KX_DEFAULT_MODE`, ...).
 */
export type QueryOptions = Schemas["QueryIn"];

/** What one dataset holds (`GET /v1/datasets`). */
export interface DatasetSummary {
  name: string;
  documents: number;
  passages: number;
  embed_model: string | null;
  created_at: number;
  fingerprint: Record<string, unknown> | null;
  path: string;
  /** Passages committed but not yet embedded: an ingest's second stage still to do. */
  backlog?: number;
  /** Passages committed but not yet in the keyword index (its update failed: a full disk); the next writer indexes them. */
  unindexed?: number;
  [field: string]: unknown;
}

/** One document of a dataset (`GET /v1/datasets/{name}/documents`). */
export interface DocumentSummary {
  name: string;
  /** sha256 of its bytes */
  ref: string;
  media_type: string;
  pages: number | null;
  passages: number;
  ingested_at: number;
  source_path: string | null;
  title: string | null;
  size: number;
  extractor: string | null;
  notes: string[];
  [field: string]: unknown;
}

/** Which page of documents: `limit` (1..1000, default 100) from `offset` (default 0). */
export interface PageOptions {
  offset?: number | undefined;
  limit?: number | undefined;
  /** "latest" (default): each document's current version; "all": every stored version. */
  versions?: "latest" | "all" | undefined;
}

/** A page of documents: the array, plus where it lies in the whole list. */
export type DocumentPage = DocumentSummary[] & { dataset: string; offset: number; limit: number; total: number };

/** Where one passage lies in its document's text (slice `documentText` with its character range). */
export interface PassageSpan {
  ref: string;
  chunk_index: number;
  chunk_count: number;
  char_start: number;
  char_end: number;
  page_start: number | null;
  page_end: number | null;
  section: string | null;
  [field: string]: unknown;
}

/** What an ingest did with one input document. */
export interface DocumentResult {
  name: string;
  status: "added" | "unchanged" | "refused";
  ref: string | null;
  passages: number;
  source_path: string | null;
  /** the status name when refused */
  code: string | null;
  reason: string | null;
}

/** The answer to `ingestDocuments`. */
export interface IngestReport {
  dataset: string;
  created: boolean;
  added: number;
  unchanged: number;
  refused: number;
  passages_added: number;
  /** the dataset's totals after the ingest */
  documents: number;
  passages: number;
  advisories: string[];
  results: DocumentResult[];
}

export interface IngestOptions {
  /** A display name per document (null: derived from its bytes). */
  names?: (string | null)[] | undefined;
  /** How to read each document's bytes: "application/pdf", "text/markdown", ... (null: text/plain). */
  mediaTypes?: (string | null)[] | undefined;
  /** Pre-computed embeddings, one per document (each document then becomes one passage). */
  vectors?: number[][] | undefined;
  /** Where each document was read from, kept with it. */
  sourcePaths?: (string | null)[] | undefined;
}

/** One passage an agent's answer cites. */
export interface Citation {
  ref: string;
  /** "[document p. 6, chunk 3/12]" */
  label: string;
  document_name: string;
  document_ref: string;
}

/** A bounded agent run on the gateway: its transcript and cited answer (`POST /v1/agent/runs`). */
export interface AgentRun {
  goal: string;
  dataset: string | null;
  brain: string;
  stop_reason: string;
  found: boolean;
  answer: string;
  citations: Citation[];
  stripped_citations: string[];
  notes: string[];
  elapsed_ms: number;
  steps: Record<string, unknown>[];
  read: Record<string, Record<string, unknown>>;
  [field: string]: unknown;
}

/** The HTTP status each kx status code answers with (engine/errors.py). */
const HTTP_STATUS: Record<string, number> = {
  INVALID_ARGUMENT: 400, NOT_FOUND: 404, FAILED_PRECONDITION: 412, ALREADY_EXISTS: 409, RESOURCE_EXHAUSTED: 413,
  UNAUTHENTICATED: 401, UNAVAILABLE: 503, PERMISSION_DENIED: 403, DATA_LOSS: 500, INTERNAL: 500,
};

/**
 * Every failure: `code` is the status name (NOT_FOUND, ...), `status` its HTTP status, `message` what to do.
 * An ingest whose every document was refused (nothing stored) carries each document's refusal, with its
 * `reason`, in `results`.
 */
export class KxError extends Error {
  readonly code: string;
  readonly status: number;
  readonly results?: DocumentResult[];

  constructor(code: string, message: string, status?: number, results?: DocumentResult[]) {
    super(message);
    this.name = "KxError";
    this.code = code;
    this.status = status ?? HTTP_STATUS[code] ?? 500;
    if (results !== undefined) this.results = results;
  }

  override toString(): string {
    return `${this.code}: ${this.message}`;
  }
}

export interface ClientOptions {
  /** The gateway's bearer token ($KX_HOME/gateway.token on its machine). */
  token?: string | undefined;
  /** Milliseconds before a request is abandoned (default 600000: a large ingest is embedded while it waits). */
  timeoutMs?: number | undefined;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch | undefined;
}

type Json = Record<string, unknown>;

/** A `kx serve` gateway. */
export class KxClient {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(baseUrl = "http://127.0.0.1:50151", options: ClientOptions = {}) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(baseUrl);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
      throw new KxError("INVALID_ARGUMENT", `${JSON.stringify(baseUrl)} is not an http:// or https:// URL; give the `
        + "gateway's address, e.g. http://127.0.0.1:50151");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#token = options.token?.trim() || undefined;
    this.#timeoutMs = options.timeoutMs ?? 600_000;
    const given = options.fetch ?? globalThis.fetch;
    if (typeof given !== "function") {
      throw new KxError("FAILED_PRECONDITION", "no global fetch here; use Node 18 or later, or pass options.fetch");
    }
    this.#fetch = given;
  }

  /** Liveness and the gateway's version. */
  health(): Promise<{ status: string; version: string }> {
    return this.#call("GET", "/v1/health");
  }

  /** Every effective setting of the gateway, and its model (what `kx info --json` shows). */
  info(): Promise<Json> {
    return this.#call("GET", "/v1/info");
  }

  /** The datasets with their counts and model. */
  async listDatasets(): Promise<DatasetSummary[]> {
    return (await this.#call<{ datasets: DatasetSummary[] }>("GET", "/v1/datasets")).datasets;
  }

  /** Finish the dataset's embedding backlog now; the dataset afterwards, with how many passages this embedded. */
  async embedDataset(name: string): Promise<DatasetSummary & { embedded: number }> {
    return this.#call("POST", `/v1/datasets/${segment(name)}/embed`);
  }

  /** One dataset's summary; NOT_FOUND if there is none. */
  async datasetSummary(name: string): Promise<DatasetSummary> {
    return this.#call("GET", `/v1/datasets/${segment(name)}`);
  }

  /**
   * Add documents to dataset `name` (created on first use): strings (stored as UTF-8), bytes or Blobs
   * (a PDF, a Word file, ...; say how to read them with `mediaTypes`). Bytes already there are "unchanged".
   */
  async ingestDocuments(name: string, docs: (string | Uint8Array | Blob)[],
                        options: IngestOptions = {}): Promise<IngestReport> {
    if (!Array.isArray(docs) || docs.length === 0) {
      throw new KxError("INVALID_ARGUMENT", "give at least one document (a string, a Uint8Array or a Blob)");
    }
    for (const [what, given] of Object.entries({ names: options.names, mediaTypes: options.mediaTypes,
                                                 vectors: options.vectors, sourcePaths: options.sourcePaths })) {
      if (given !== undefined && given.length !== docs.length) {
        throw new KxError("INVALID_ARGUMENT", `${what}: expected ${docs.length}, got ${given.length}`);
      }
    }
    const documents: Schemas["DocumentIn"][] = [];
    for (const [i, doc] of docs.entries()) {
      const item = {} as Schemas["DocumentIn"];
      if (typeof doc === "string") {
        item.text = doc;
      } else if (doc instanceof Uint8Array) {
        item.data_base64 = toBase64(doc);
      } else if (typeof Blob !== "undefined" && doc instanceof Blob) {
        item.data_base64 = toBase64(new Uint8Array(await doc.arrayBuffer()));
        item.media_type = doc.type || null;
      } else {
        throw new KxError("INVALID_ARGUMENT", `document ${i} is not a string, a Uint8Array or a Blob`);
      }
      const name = options.names?.[i];
      const media = options.mediaTypes?.[i];
      const source = options.sourcePaths?.[i];
      if (name != null) item.name = name;
      if (media != null) item.media_type = media;
      if (source != null) item.source_path = source;
      const vector = options.vectors?.[i];
      if (vector !== undefined) item.vector = vector;
      documents.push(item);
    }
    const body: Schemas["IngestIn"] = { documents };
    return this.#call("POST", `/v1/datasets/${segment(name)}/documents`, body);
  }

  /** Ask dataset `name` a question: the hits, as an array that also carries the query's other fields. */
  async queryDataset(name: string, options: QueryOptions): Promise<QueryResult> {
    // sent as given, every option by its own name: one left out is the gateway's default. A k that JSON
    // cannot carry (NaN, Infinity: written as null) is refused here, not taken for "the default"
    const body: QueryOptions = { ...options };
    if (body.k != null) body.k = wholeNumber("k", body.k);
    const answer = await this.#call<Schemas["QueryOut"]>("POST", `/v1/datasets/${segment(name)}/query`, body);
    const { hits, ...fields } = answer;
    return Object.assign([...hits] as Hit[], fields, { hits: hits as Hit[] });
  }

  /** Dataset `name`'s documents in ingest order, `limit` (1..1000, default 100) from `offset`. */
  async listDocuments(name: string, options: PageOptions = {}): Promise<DocumentPage> {
    const query = new URLSearchParams({ offset: String(options.offset ?? 0), limit: String(options.limit ?? 100) });
    if (options.versions !== undefined) query.set("versions", options.versions);
    const page = await this.#call<{ dataset: string; offset: number; limit: number; total: number;
                                     documents: DocumentSummary[] }>(
      "GET", `/v1/datasets/${segment(name)}/documents?${query}`);
    const { documents, ...fields } = page;
    return Object.assign([...documents], fields);
  }

  /** A document's stored text: the text its passages' character ranges index into. */
  async documentText(name: string, ref: string): Promise<string> {
    const out = await this.#call<Schemas["DocumentTextOut"]>("GET",
                                                             `/v1/datasets/${segment(name)}/documents/${segment(ref)}`);
    return out.text;
  }

  /** Where each passage of a document lies in its text, in chunk order. */
  async documentPassages(name: string, ref: string): Promise<PassageSpan[]> {
    const out = await this.#call<{ passages: PassageSpan[] }>(
      "GET", `/v1/datasets/${segment(name)}/documents/${segment(ref)}/passages`);
    return out.passages;
  }

  /** A bounded research run on the gateway (its KX_AGENT_* settings; `maxSteps` can only tighten them). */
  runAgent(goal: string,
           options: { dataset?: string | undefined; maxSteps?: number | undefined } = {}): Promise<AgentRun> {
    const body: Schemas["AgentRunIn"] = { goal };
    if (options.dataset !== undefined) body.dataset = options.dataset;
    if (options.maxSteps !== undefined) body.max_steps = options.maxSteps;
    return this.#call("POST", "/v1/agent/runs", body);
  }

  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.#token) headers.Authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response | undefined;
    let text: string;
    try {
      const init: RequestInit = { method, headers };
      if (body !== undefined) init.body = JSON.stringify(body);
      if (typeof AbortSignal.timeout === "function") init.signal = AbortSignal.timeout(this.#timeoutMs);
      response = await this.#fetch(this.baseUrl + path, init);
      // the body too: a timeout or a connection cut while it arrives is the same failure as before it
      text = await response.text();
    } catch (error) {
      if (error instanceof Error && error.name === "TimeoutError") {
        throw new KxError("UNAVAILABLE", `the gateway at ${this.baseUrl} gave no answer to ${method} ${path} within `
          + `${this.#timeoutMs} ms (timeoutMs); it may still be working on it: raise timeoutMs, or try again`, 503);
      }
      if (response !== undefined) {
        throw new KxError("UNAVAILABLE", `the connection to the gateway at ${this.baseUrl} broke while its answer to `
          + `${method} ${path} arrived (${networkWhy(error)}); try again`, 503);
      }
      throw new KxError("UNAVAILABLE", `cannot reach the gateway at ${this.baseUrl} (${networkWhy(error)}); start `
        + "it with `kx serve`, or check the address", 503);
    }
    let data: unknown = undefined;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = undefined;
    }
    if (!response.ok) {
      const error = data as Partial<Schemas["ErrorOut"]> | undefined;
      if (error && typeof error.code === "string" && typeof error.message === "string") {
        // an ingest refused whole lists each document's refusal beside code and message (engine/server/gateway.py)
        const results = Array.isArray(error.results) ? error.results as unknown as DocumentResult[] : undefined;
        throw new KxError(error.code, error.message, response.status, results);
      }
      throw new KxError(response.status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT",
                        `the gateway answered HTTP ${response.status} without a kx error: ${text.slice(0, 200)}`,
                        response.status);
    }
    if (data === undefined) {
      throw new KxError("INTERNAL", `the gateway answered ${method} ${path} with no JSON body`, response.status);
    }
    return data as T;
  }
}

/** A number JSON can carry as the integer the gateway wants (NaN and Infinity would go out as null). */
function wholeNumber(what: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new KxError("INVALID_ARGUMENT", `${what}: ${String(value)} is not a number; give a whole number >= 1`);
  }
  return value;
}

/** Why fetch failed, with the cause Node hides behind "fetch failed" (ECONNREFUSED, ENOTFOUND, ...). */
function networkWhy(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  const detail = cause instanceof Error ? ((cause as { code?: string }).code ?? cause.message) : undefined;
  return `${error.name}: ${error.message}` + (detail ? ` (${detail})` : "");
}

/** One URL path segment: a name or ref, percent-encoded ("." and ".." too, so they stay a segment). */
function segment(value: string): string {
  if (typeof value !== "string" || value === "") {
    throw new KxError("INVALID_ARGUMENT", "a dataset name or document ref must be a non-empty string");
  }
  if (value === ".") return "%2E";
  if (value === "..") return "%2E%2E";
  return encodeURIComponent(value);
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard, padded base64 (no Buffer, no btoa: the same in Node and browsers). */
export function toBase64(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += ALPHABET[(n >> 18) & 63]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += ALPHABET[(n >> 18) & 63]! + ALPHABET[(n >> 12) & 63]! + "==";
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += ALPHABET[(n >> 18) & 63]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + "=";
  }
  return out;
}
