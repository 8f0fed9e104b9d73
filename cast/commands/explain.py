"""``cast explain``: draw one turn's entity graph from an answers file, to see why passages were chosen.

Nodes are the turn's entities, sized by their rank; edges are the graph edges the selector kept; the query
entities are outlined, and the entities of the chosen passages are highlighted. The query entities and the
top-ranked entities are labelled.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cast.errors import CastError, DataFormatError
from cast.formats.textfiles import json_lines
from cast.infra.atomic import atomic_path
from cast.infra.text import entity_label

CHOSEN_COLOUR = "#d95f02"
OTHER_COLOUR = "#a6cee3"
QUERY_EDGE_COLOUR = "#1b1b1b"
LABELLED_TOP = 15  # besides the query entities, only the top-ranked entities get a label
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "explain",
        help=summary,
        description="Render the entity graph a selector built for one turn (nodes sized by rank, the chosen "
        "passages' entities highlighted) from an answers JSONL file.",
    )
    parser.add_argument("--answers", required=True, type=Path, help="answers file (JSONL, one turn a line)")
    parser.add_argument("--qid", required=True, help="the turn's query id, e.g. 132_1-3")
    parser.add_argument("--out", required=True, type=Path, help="image to write (.png, .svg or .pdf)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_image_path(args.out)
    selection = read_selection(args.answers, args.qid)
    render_entity_graph(
        selection, args.out, title=f"{args.qid}: entity graph ({selection.get('method', '?')})"
    )
    print(f"wrote {args.out}")
    return 0


def check_image_path(out: Path) -> None:
    """A :class:`CastError` unless ``out`` names an image format the plot can be written in."""
    if out.suffix.lower() not in IMAGE_SUFFIXES:
        raise CastError(f"--out {out}: the image must end in {', '.join(IMAGE_SUFFIXES)} (e.g. graph.png)")


def read_selection(answers: Path, qid: str) -> dict[str, Any]:
    """The ``selection`` of turn ``qid`` in an answers file (one JSON record a line, with ``qid``)."""
    if not answers.is_file():
        raise CastError(f"answers file {answers} does not exist; write one with `cast run ... --out FILE`")
    for number, record in json_lines(answers):
        if str(record.get("qid")) != qid:
            continue
        if not isinstance(record.get("selection"), dict):
            raise DataFormatError(answers, f"turn {qid} has no 'selection' record", number)
        return record["selection"]
    raise CastError(f"turn {qid!r} is not in {answers}; pick a qid from that file")


def render_entity_graph(selection: dict[str, Any], out: Path, title: str = "") -> None:
    """Draw the entity graph of a ``to_dict(Selection)`` to ``out`` (written atomically)."""
    check_image_path(out)
    explanation = selection.get("explanation") or {}
    ranks: dict[str, float] = explanation.get("entity_ranks") or {}
    if not ranks:
        raise CastError(
            f"the selection (method {selection.get('method')!r}) ranked no entities, so there is no graph to "
            "draw; run with an entity selector (--set selector.name=eg or er) and a linker"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    chosen = set(explanation.get("chosen") or [p["passage"]["id"] for p in selection.get("passages", [])])
    passage_entities = explanation.get("passage_entities") or {}
    highlighted = {m["entity"] for pid in chosen for m in passage_entities.get(pid, [])}
    query = set(explanation.get("query_entities") or [])

    graph = nx.Graph()
    graph.add_nodes_from(ranks)
    graph.add_weighted_edges_from(
        (a, b, w) for a, b, w in explanation.get("edges") or [] if a in ranks and b in ranks
    )
    top = max(ranks.values()) or 1.0
    nodes = list(graph.nodes)
    figure, axes = plt.subplots(figsize=(12, 9))
    layout = nx.spring_layout(graph, weight="weight", seed=0)
    heaviest = max((w for _, _, w in graph.edges(data="weight")), default=1.0)
    widths = [0.3 + 2.5 * graph.edges[e]["weight"] / heaviest for e in graph.edges]
    nx.draw_networkx_edges(graph, layout, ax=axes, width=widths, alpha=0.2)
    nx.draw_networkx_nodes(
        graph,
        layout,
        ax=axes,
        nodelist=nodes,
        node_size=[30 + 1200 * ranks[e] / top for e in nodes],
        node_color=[CHOSEN_COLOUR if e in highlighted else OTHER_COLOUR for e in nodes],
        edgecolors=[QUERY_EDGE_COLOUR if e in query else "none" for e in nodes],
        linewidths=2.0,
    )
    top_ranked = set(sorted(nodes, key=lambda e: -ranks[e])[:LABELLED_TOP])
    labelled = [e for e in nodes if e in top_ranked or e in query]
    nx.draw_networkx_labels(
        graph, layout, ax=axes, labels={e: entity_label(e) for e in labelled}, font_size=8
    )
    axes.set_title(f"{title}\norange: entities of the chosen passages; black outline: query entities")
    axes.axis("off")
    try:
        with atomic_path(out) as partial:
            figure.savefig(partial, bbox_inches="tight", dpi=120)
    finally:
        plt.close(figure)
