"""The collection: Lucene indexes, passage readers and precomputed passage embeddings."""
