"""Stages before retrieval: PTKB statement selection and query rewriting (raw, manual, automatic, HQE,
T5)."""
