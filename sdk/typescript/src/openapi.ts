// Generated from kx serve's /openapi.json by openapi-typescript (npm run generate). Do not edit:
// test/openapi.test.mjs regenerates it from a running gateway and fails when the two differ.
export interface paths {
    "/v1/agent/runs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Agent Run */
        post: operations["agent_run_v1_agent_runs_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List Datasets */
        get: operations["list_datasets_v1_datasets_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Dataset Summary */
        get: operations["dataset_summary_v1_datasets__name__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}/documents": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List Documents */
        get: operations["list_documents_v1_datasets__name__documents_get"];
        put?: never;
        /**
         * Ingest
         * @description Add documents; each one's result (added, unchanged, or refused with its reason) is in `results`.
         *
         *     When every document is refused, nothing is stored and the answer is the first refusal's status (400
         *     for INVALID_ARGUMENT): `code`, `message` and each document's refusal in `results`. One or more taken
         *     is 200, any refusals listed in `results`.
         */
        post: operations["ingest_v1_datasets__name__documents_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}/documents/{ref}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Document Text */
        get: operations["document_text_v1_datasets__name__documents__ref__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}/documents/{ref}/passages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Document Passages */
        get: operations["document_passages_v1_datasets__name__documents__ref__passages_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}/embed": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Embed
         * @description Finish the dataset's embedding backlog now (the gateway also does so by itself at start).
         */
        post: operations["embed_v1_datasets__name__embed_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/datasets/{name}/query": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Query */
        post: operations["query_v1_datasets__name__query_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Health */
        get: operations["health_v1_health_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/info": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Info */
        get: operations["info_v1_info_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** AgentRunIn */
        AgentRunIn: {
            /**
             * Dataset
             * @description The dataset to research; none: a plain chat agent, if the gateway has a chat model (KX_AGENT_CHAT_URL).
             */
            dataset?: string | null;
            /**
             * Goal
             * @description What the agent should find out (not blank).
             */
            goal: string;
            /**
             * Max Steps
             * @description Most searches (never above the gateway's KX_AGENT_MAX_STEPS).
             */
            max_steps?: number | null;
        };
        /**
         * DocumentIn
         * @description One document: exactly one of `text` or `data_base64`; `vector` for all documents or none.
         */
        DocumentIn: {
            /**
             * Data Base64
             * @description The document's raw bytes, base64 (standard alphabet, padded).
             */
            data_base64?: string | null;
            /**
             * Media Type
             * @description How to read the bytes (application/pdf, text/markdown, ...); default text/plain.
             */
            media_type?: string | null;
            /**
             * Name
             * @description Display name; default derived from the bytes. No control characters (C1 and bidirectional overrides included), no empty, '.' or '..' path segments.
             */
            name?: string | null;
            /**
             * Source Path
             * @description Where the client read it from; no control characters. Stored marked as client-supplied (prefixed 'client:'), never taken for a path on the gateway's machine.
             */
            source_path?: string | null;
            /**
             * Text
             * @description The document as a string (stored as its UTF-8 bytes).
             */
            text?: string | null;
            /**
             * Vector
             * @description A pre-computed embedding: the document becomes one passage with this vector (no model needed).
             */
            vector?: (number | 0 | unknown | unknown)[] | null;
        } & ({
            data_base64?: null;
            text: string;
        } | {
            data_base64: string;
            text?: null;
        });
        /** DocumentTextOut */
        DocumentTextOut: {
            /** Ref */
            ref: string;
            /**
             * Text
             * @description The text passages' character ranges index into, as stored at ingest.
             */
            text: string;
        };
        /** ErrorOut */
        ErrorOut: {
            /** Code */
            code: string;
            /** Message */
            message: string;
            /**
             * Results
             * @description Only when an ingest stored nothing because every document was refused: each document's result (name, status 'refused', code, reason), as a 200's results.
             */
            results?: {
                [key: string]: unknown;
            }[] | null;
        };
        /**
         * HitOut
         * @description One passage of an answer: where it lies (chunk, characters, pages, section) and why it ranks where it does.
         */
        HitOut: {
            /**
             * Answer Span
             * @description [start, end) in the document's text of the sentence or two of the passage that best answer the query (engine/text/answer_span.py); null without query text.
             */
            answer_span: [
                number,
                number
            ] | null;
            /** Char End */
            char_end: number;
            /**
             * Char Start
             * @description Where the passage begins in the document's stored text.
             */
            char_start: number;
            /**
             * Chunk
             * @description "[chunk i/N]"
             */
            chunk: string;
            /** Chunk Count */
            chunk_count: number;
            /**
             * Chunk Index
             * @description The passage's place in its document, from 0 (`chunk` counts from 1).
             */
            chunk_index: number;
            /**
             * Dense Rank
             * @description Its rank in the dense list; null: not in it.
             */
            dense_rank: number | null;
            /** Dense Score */
            dense_score: number | null;
            /**
             * Document Name
             * @description A watched folder's documents are named by their path in it (guide/index); a file's by its name without extension.
             */
            document_name: string;
            /** Document Ref */
            document_ref: string;
            /**
             * Document Title
             * @description The document's own title (PDF metadata, front matter, <title>), if any.
             */
            document_title: string | null;
            /**
             * Duplicate Of
             * @description MMR: the passage ref of a higher hit this one nearly repeats, else null.
             */
            duplicate_of: string | null;
            /**
             * Fused Rank
             * @description Its place before MMR.
             */
            fused_rank: number;
            /**
             * Fused Score
             * @description RRF: the sum of 1 / (K + rank) over the lists it is in (dense, sparse, sentence, lead).
             */
            fused_score: number;
            /**
             * Lead Ratio
             * @description Hybrid's lead vote (engine/ranking.py): set on sparse's best passage when its BM25 score is at least LEAD_RATIO times the runner-up's (this is that ratio); RRF then counts it once more, at rank 1.
             */
            lead_ratio: number | null;
            /**
             * Mmr Moved
             * @description fused_rank - rank: > 0 MMR moved it up, < 0 down, 0 untouched.
             */
            mmr_moved: number;
            /**
             * Ocr
             * @description The passage's document was (partly) read by OCR (a scan or an image): its text may hold misread words.
             */
            ocr: boolean;
            /**
             * Ocr Confidence
             * @description That OCR's mean confidence (0-1); null when the document was not read by OCR.
             */
            ocr_confidence: number | null;
            /**
             * Page End
             * @description Last page of the passage; null without pages.
             */
            page_end: number | null;
            /**
             * Page Start
             * @description First page of the passage (1-based); null without pages.
             */
            page_start: number | null;
            /** Passage Ref */
            passage_ref: string;
            /**
             * Rank
             * @description Its place in the answer, from 1.
             */
            rank: number;
            /**
             * Score
             * @description The mode's relevance: fused RRF (hybrid), cosine (dense; a passage of a document longer than 8 passages less its long-document correction) or BM25 (sparse).
             */
            score: number;
            /**
             * Section
             * @description Heading path at the passage's start, e.g. "3 Model › 3.1 LRS model"; null when no heading precedes it.
             */
            section: string | null;
            /**
             * Sentence Rank
             * @description Hybrid's third list (engine/ranking.py, SENTENCE_DEPTH): the passage's rank among the best fused passages by its best sentence; null outside that head or in a single-retriever mode.
             */
            sentence_rank: number | null;
            /**
             * Sentence Score
             * @description Hybrid: that best sentence's score.
             */
            sentence_score: number | null;
            /**
             * Source Path
             * @description The file the document was read from, if it came from one.
             */
            source_path: string | null;
            /**
             * Sparse Rank
             * @description Its rank in the sparse (BM25) list; null: not in it.
             */
            sparse_rank: number | null;
            /** Sparse Score */
            sparse_score: number | null;
            /**
             * Superseded By
             * @description The ref of the lineage's current version when this hit is from an older one (versions=all).
             */
            superseded_by: string | null;
            /** Text */
            text: string;
            /**
             * Version
             * @description Which version of its lineage (1 = first ingested); null: not tracked.
             */
            version: number | null;
        };
        /** HTTPValidationError */
        HTTPValidationError: {
            /** Detail */
            detail?: components["schemas"]["ValidationError"][];
        };
        /** IngestIn */
        IngestIn: {
            /**
             * Documents
             * @description The documents; give a vector for every one of them (all of one length: the dataset's dimension) or for none.
             */
            documents: components["schemas"]["DocumentIn"][] | unknown | unknown;
        };
        /**
         * QueryIn
         * @description Text, or a vector (which searches dense: not with mode sparse), or both.
         */
        QueryIn: {
            /**
             * Expand
             * @description Expand the query from a first pass's top passages: RM3 terms for the sparse list, a Rocchio-moved vector for the dense list; the added terms are in the answer; default KX_QUERY_EXPANSION.
             */
            expand?: boolean | null;
            /**
             * K
             * @description How many passages to return (clamped to the operator's KX_MAX_K); default KX_DEFAULT_K.
             */
            k?: number | null;
            /** @description Which retrievers answer: hybrid (meaning and exact words fused), dense (meaning) or sparse (BM25: exact words, names, codes); default KX_DEFAULT_MODE. */
            mode?: components["schemas"]["RetrievalMode"] | null;
            /**
             * Rerank
             * @description The MMR pass that keeps near-duplicate passages apart; default KX_RERANK.
             */
            rerank?: boolean | null;
            /**
             * Text
             * @description The question or words to search for (not blank).
             */
            text?: string | null;
            /**
             * Vector
             * @description A pre-computed query embedding (searches dense; with text, it stands in for the text's own).
             */
            vector?: (number | 0 | unknown | unknown)[] | null;
            /** @description latest (the default): each document's current version only; all: every stored version, superseded and retired ones too. */
            versions?: components["schemas"]["VersionView"] | null;
            /**
             * Where
             * @description Filters, all of which must hold (two of one kind: either): name:GLOB (document name or source path), type:pdf, after:YYYY-MM-DD, before:YYYY-MM-DD (a calendar day), pages:A-B (1 <= A <= B), ref:REF[,REF] (6 to 64 hex digits), ocr:yes or ocr:no (not both). Applied inside both retrievers, before fusion: k hits still come back when k matching passages exist.
             */
            where?: string[] | null;
        } & ({
            text: string;
        } | {
            /** @enum {unknown} */
            mode?: "dense" | "hybrid" | null;
            text?: null;
            vector: unknown[];
        });
        /**
         * QueryOut
         * @description A query's answer: its hits, and how it was asked and answered.
         */
        QueryOut: {
            /**
             * Clamped
             * @description Whether k was clamped (k < requested_k).
             */
            clamped: boolean;
            /** Dataset */
            dataset: string;
            /**
             * Dense Coverage
             * @description Share of the dataset's passages dense search covered: below 1 while an ingest's embedding stage is still working through its backlog (sparse covers every committed passage).
             */
            dense_coverage: number;
            /**
             * Expanded Terms
             * @description With expand: the terms the first pass's top passages added to the sparse query, best first ([] when none was added); null when the query was not expanded.
             */
            expanded_terms: string[] | null;
            /** Hits */
            hits: components["schemas"]["HitOut"][];
            /**
             * K
             * @description Hits asked for, after clamping to the operator's maximum.
             */
            k: number;
            mode: components["schemas"]["RetrievalMode"];
            /** Notes */
            notes: string[];
            /** Query */
            query: string | null;
            /** Requested K */
            requested_k: number;
            /** Rerank */
            rerank: boolean;
            /** Timings Ms */
            timings_ms: {
                [key: string]: number;
            };
        };
        /**
         * RetrievalMode
         * @description Which retrievers answer a query. A str: plain "dense" works wherever a mode goes.
         * @enum {string}
         */
        RetrievalMode: "hybrid" | "dense" | "sparse";
        /** ValidationError */
        ValidationError: {
            /** Context */
            ctx?: Record<string, never>;
            /** Input */
            input?: unknown;
            /** Location */
            loc: (string | number)[];
            /** Message */
            msg: string;
            /** Error Type */
            type: string;
        };
        /**
         * VersionView
         * @description Which stored versions a query or a listing shows: each lineage's current one, or every one.
         * @enum {string}
         */
        VersionView: "latest" | "all";
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    agent_run_v1_agent_runs_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AgentRunIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    list_datasets_v1_datasets_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    dataset_summary_v1_datasets__name__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    list_documents_v1_datasets__name__documents_get: {
        parameters: {
            query?: {
                limit?: number;
                offset?: number;
                versions?: components["schemas"]["VersionView"];
            };
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    ingest_v1_datasets__name__documents_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["IngestIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    document_text_v1_datasets__name__documents__ref__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
                ref: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DocumentTextOut"];
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    document_passages_v1_datasets__name__documents__ref__passages_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
                ref: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    embed_v1_datasets__name__embed_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    query_v1_datasets__name__query_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A dataset name: 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook'). */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["QueryIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QueryOut"];
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
    health_v1_health_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    info_v1_info_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Bad Request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Unauthorized */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Forbidden */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Not Found */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Precondition Failed */
            412: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Request Entity Too Large */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
            /** @description Internal Server Error */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorOut"];
                };
            };
        };
    };
}
