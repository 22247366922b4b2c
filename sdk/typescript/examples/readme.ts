import { KxClient, RetrievalMode } from "kx-sdk";

const client = new KxClient(process.env.KX_GATEWAY ?? "http://127.0.0.1:50151", { token: process.env.KX_TOKEN });
await client.ingestDocuments("handbook", ["Loggers may be returned within 30 days with the receipt."],
                             { names: ["returns"] });
const hits = await client.queryDataset("handbook", { text: "how long do I have to return a logger?", k: 5,
                                                     mode: RetrievalMode.HYBRID });
for (const hit of hits) {
  console.log(hit.rank, hit.document_name, hit.chunk, hit.page_start, hit.section, hit.dense_rank, hit.sparse_rank);
}
console.log(hits.mode, JSON.stringify(hits.timings_ms));  // the query's other fields ride on the array
