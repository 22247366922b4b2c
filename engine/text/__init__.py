"""Text in and text out: inputs and safe file reads, chunking, BM25 analysis, answer spans."""
