"""File formats read and written: topics (CAsT, iKAT), qrels and runs, iKAT run files, answers files, ConEL-2."""
