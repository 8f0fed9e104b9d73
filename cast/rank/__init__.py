"""Ranking stages: first-stage retrieval (Lucene), re-rankers, and the score fusion they share."""
