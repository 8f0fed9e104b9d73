"""The fastest pipeline the tests run end to end: no re-ranking, no entity linking, the original order, top-k trim
answers (each test adds the rewriter it needs)."""

FAST = ("reranker.name=none", "linker.name=none", "selector.name=o", "summarizer.name=topk_trim")


def cli_sets(*assignments: str) -> list[str]:
    """``--set A --set B ...`` for a command line."""
    return [word for assignment in assignments for word in ("--set", assignment)]
