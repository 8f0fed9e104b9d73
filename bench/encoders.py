"""The sentence encoder's backends (``encoder.backend``: torch, onnx, onnx int8, openvino) side by side: speed
and faithfulness to torch.

``speed``: passages embedded per second by each backend on the same slice of the collection, in rounds that
rotate which backend goes first (the machine is shared: each round's ratio to torch is taken under the same
load), and each backend's cosine to torch's embeddings (min / mean)::

    .venv/bin/python bench/encoders.py speed --passages 1000 --rounds 3
    .venv/bin/python bench/encoders.py speed --passages 20000 --rounds 1 --backends onnx-int8   # a store's rate

A backend is ``torch``, ``torch-fp16``, ``torch-bf16``, ``onnx``, ``onnx-int8`` or ``openvino``, optionally with
``@THREADS`` (``onnx-int8@1``); ``st`` and ``st-fp16`` are torch's model timed through sentence-transformers' own
``encode`` (tokenising in the calling thread: how ``cast index embed`` ran before). ``--device cuda`` runs torch
on a GPU (the rate of ``cast index embed --device cuda``)::

    python bench/encoders.py speed --device cuda --backends st-fp16 torch-fp16 --passages 20000 --batch-size 512

``host``: where the torch pipeline's time goes. The host's rate tokenising alone (on 1, 2... threads), the
device's rate on batches tokenised beforehand, and the whole pipeline's rate (tokenising ahead on threads while
the device computes). Without a GPU, ``--stand-in RATE`` puts a device of that rate in the model's place::

    .venv/bin/python bench/encoders.py host --passages 5000 --threads 1 2 --stand-in 20000
    python bench/encoders.py host --device cuda --precision fp16 --passages 20000 --threads 1 4 8 16

Several ``--batch-size`` values put every backend at every size into the rotation::

    .venv/bin/python bench/encoders.py speed --passages 500 --rounds 4 --backends onnx-int8 --batch-size 8 16 32 64 128

``rerank``: the offline profile's bi-encoder re-ranking (fused with LMD) of the top ``--depth`` LMD passages of
the CAsT 2022 dev turns (manual rewrites by default), once per backend: MRR and nDCG@3 against torch's, Kendall
tau of each turn's re-ranked order against torch's, and the cosine of every passage's embedding to torch's::

    .venv/bin/python bench/encoders.py rerank --backends torch onnx-int8

``bound``: the arithmetic a cold run spends encoding, against what this machine's cores can do. From a run file,
the distinct passages of every turn's top ``--depth`` (a cold run encodes each once), their MiniLM token counts
(title prefixed, ``--max-seq-length``), the float32 FLOPs of encoding them, and the rate of a float32 matrix product
on 1 and 2 threads (numpy): the least time per turn any float32 encoder needs on these cores::

    .venv/bin/python bench/encoders.py bound --run RUN --index INDEX
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.benchmark.scripts import (
    DEFAULT_INDEX,
    DEV_2022_QRELS,
    DEV_2022_TOPICS,
    WIKI,
    existing_path,
    load_average,
    run,
)
from cast.benchmark.stages import load_conversations, rewrite_all, stage_section, study_resources
from cast.testing import random_weights_like

PRECISIONS = {"": "float32", "fp16": "float16", "bf16": "bfloat16"}


def backend_settings(spec: str) -> dict[str, Any]:
    """The ``encoder`` section for a backend spec: ``onnx-int8@1`` -> onnx, int8, 1 thread; ``torch-fp16`` ->
    torch with float16 weights (a GPU's); ``st`` / ``st-fp16``: torch's model, timed through
    sentence-transformers' own ``encode`` (:func:`speed_encoder`)."""
    name, _, threads = spec.partition("@")
    backend, _, variant = name.partition("-")
    settings: dict[str, Any] = {"backend": "torch" if backend == "st" else backend}
    if variant in PRECISIONS:
        settings["precision"] = PRECISIONS[variant]
    else:
        settings["quantize"] = variant
    return {**settings, "threads": int(threads) if threads else None}


class SentenceTransformersEncode:
    """A contestant that encodes with sentence-transformers' ``encode`` on the model a torch encoder loaded: how
    ``cast index embed`` ran before batches were tokenised ahead."""

    def __init__(self, encoder: Any):
        self.model = encoder.model.model

    def embed(self, texts: list[str], batch_size: int) -> Any:
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True)


def speed_encoder(spec: str, args: argparse.Namespace) -> Any:
    """The encoder a speed contestant runs (``embed(texts, batch_size)``)."""
    from cast.infra.encoder import EncoderSettings, SentenceEncoder

    encoder = SentenceEncoder(
        args.model, args.device, args.max_seq_length, EncoderSettings(**backend_settings(spec)), args.exports
    )
    return SentenceTransformersEncode(encoder) if spec.startswith("st") else encoder


def cosines(vectors: Any, reference: Any) -> str:
    values = (vectors * reference).sum(axis=1)
    return f"cosine to torch min {values.min():.4f} mean {values.mean():.5f}"


def command_speed(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(args.torch_threads)
    texts = collection_slice(args)
    words = statistics.mean(len(t.split()) for t in texts)
    print(
        f"{len(texts)} passages of {args.input.name} from #{args.offset} ({words:.1f} words), "
        f"batch {' / '.join(map(str, args.batch_size))}"
    )
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"{where}; torch threads {args.torch_threads}; {load_average()}")
    encoders = {spec: speed_encoder(spec, args) for spec in args.backends}
    # Several batch sizes: each backend at each size is one contestant of the rotation ("onnx-int8/b16").
    contestants = {
        (spec if len(args.batch_size) == 1 else f"{spec}/b{size}"): (spec, size)
        for spec in encoders
        for size in args.batch_size
    }
    rates: dict[str, list[float]] = {label: [] for label in contestants}
    vectors: dict[str, Any] = {}
    specs = list(contestants)
    for number in range(args.rounds):
        for label in specs[number % len(specs) :] + specs[: number % len(specs)]:
            spec, size = contestants[label]
            start = time.perf_counter()
            vectors[label] = encoders[spec].embed(texts, size)
            rates[label].append(len(texts) / (time.perf_counter() - start))
        print(
            f"round {number + 1}: "
            + ", ".join(f"{s} {rates[s][-1]:.1f}/s" for s in specs)
            + f"; {load_average()}"
        )
    # The reference: torch at the first batch size, when it runs.
    reference = next((label for label in specs if contestants[label][0] == "torch"), None)
    print(f"\n{'backend':<16}{'passages/s (median)':>20}{'x torch (median of rounds)':>28}   faithfulness")
    for label in specs:
        ratio = (
            f"{statistics.median(r / t for r, t in zip(rates[label], rates[reference], strict=True)):.2f}"
            if reference
            else "-"
        )
        faith = cosines(vectors[label], vectors[reference]) if reference else ""
        print(f"{label:<16}{statistics.median(rates[label]):>20.1f}{ratio:>28}   {faith}")
    return 0


def command_host(args: argparse.Namespace) -> int:
    """The host's tokenising rate alone, the device's rate on batches tokenised beforehand, and the whole
    pipeline's rate (:class:`cast.infra.encoder.TorchEncoder`), on the same passages."""
    import torch

    from cast.infra.encoder import EncoderSettings, SentenceEncoder, longest_first_batches, run_ahead

    torch.set_num_threads(args.torch_threads)
    texts = collection_slice(args)
    settings = EncoderSettings(backend="torch", precision=PRECISIONS[args.precision])
    model = SentenceEncoder(args.model, args.device, args.max_seq_length, settings).model
    assert model.tokenizer is not None, "the model has no Rust tokenizer"
    batches = longest_first_batches(texts, args.batch_size)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(
        f"{where}, {settings.precision}; batch {args.batch_size}; torch threads {args.torch_threads}; {load_average()}"
    )

    def tokenise(rows: list[int]) -> Any:
        return model.features([texts[i] for i in rows])

    start = time.perf_counter()
    for rows in batches:
        model.model.preprocess([texts[i] for i in rows])
    print(
        f"host: sentence-transformers' own tokenising (its encode's): "
        f"{len(texts) / (time.perf_counter() - start):,.0f} passages/s"
    )
    for threads in args.threads:
        start = time.perf_counter()
        for _ in run_ahead(batches, tokenise, lambda features: None, threads):
            pass
        print(
            f"host: tokenising alone, {threads} thread(s): {len(texts) / (time.perf_counter() - start):,.0f} passages/s"
        )
    features = [tokenise(rows) for rows in batches]
    if args.stand_in:
        # No GPU here: a device that takes len(batch) / rate seconds per batch and holds no lock, as a GPU's queue
        # holds none, shows whether the host keeps such a device fed.
        def device(batch: dict[str, Any]) -> None:
            time.sleep(len(batch["input_ids"]) / args.stand_in)

        print(f"device: a stand-in at {args.stand_in:,} passages/s")
    else:

        def device(batch: dict[str, Any]) -> Any:
            return model.forward(batch)

        with torch.inference_mode():
            for batch in features:  # warm-up: a batch length's first run costs more (kernel choice)
                device(batch)
            synchronise(args.device)
            start = time.perf_counter()
            for batch in features:
                device(batch)
            synchronise(args.device)
        print(
            f"device: batches tokenised beforehand: {len(texts) / (time.perf_counter() - start):,.0f} passages/s"
        )
    for threads in args.threads:
        start = time.perf_counter()
        with torch.inference_mode():
            for _ in run_ahead(batches, tokenise, device, threads):
                pass
            synchronise(args.device)
        print(
            f"pipeline, {threads} tokenising thread(s): {len(texts) / (time.perf_counter() - start):,.0f} passages/s"
        )
    return 0


def synchronise(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def collection_slice(args: argparse.Namespace) -> list[str]:
    """The texts (title prefixed) of ``args.passages`` passages with text of ``args.input``, from ``args.offset``."""
    from cast.index.collections import read_passages
    from cast.infra.text import passage_text

    passages = itertools.islice(
        (p for p in read_passages(args.input) if p.text.strip()), args.offset, args.offset + args.passages
    )
    return [passage_text(p, True) for p in passages]


def minilm_flops(tokens: int, layers: int = 6, hidden: int = 384, feed_forward: int = 1536) -> int:
    """Multiply-adds x 2 of encoding ``tokens`` tokens with a BERT encoder of the given shape (all-MiniLM-L6-v2's
    by default): the linear layers per token, and attention's two products over every pair of tokens."""
    linear = 2 * (4 * hidden * hidden + 2 * hidden * feed_forward)
    return layers * (tokens * linear + tokens * tokens * 2 * 2 * hidden)


def matrix_product_rate(threads: int, size: int = 1024, repeats: int = 5) -> float:
    """The best float32 matrix-product rate of ``repeats`` (FLOP/s) on ``threads`` BLAS threads."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = (rng.random((size, size), dtype=np.float32) for _ in range(2))
    best = 0.0
    with threadpool_limits(threads):
        a @ b
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(10):
                a @ b
            best = max(best, 10 * 2 * size**3 / (time.perf_counter() - start))
    return best


def command_bound(args: argparse.Namespace) -> int:
    import json
    from collections import defaultdict

    from tokenizers import Tokenizer

    from cast.core.records import Passage
    from cast.infra import jvm
    from cast.infra.encoder import bundled_minilm
    from cast.infra.text import passage_text

    ranked: dict[str, list[str]] = defaultdict(list)
    with args.run.open() as lines:
        for line in lines:
            qid, _, docid, rank, *_ = line.split()
            if int(rank) <= args.depth:
                ranked[qid].append(docid)
    distinct = sorted({docid for docids in ranked.values() for docid in docids})
    tokenizer = Tokenizer.from_file(str(Path(bundled_minilm()) / "tokenizer.json"))
    tokenizer.enable_truncation(args.max_seq_length)
    searcher = jvm.searcher(str(args.index))
    tokens = []
    for docid in distinct:
        fields = json.loads(searcher.doc(docid).raw())
        passage = Passage(id=docid, text=fields.get("contents", ""), title=fields.get("title", ""))
        tokens.append(len(tokenizer.encode(passage_text(passage, True)).ids))
    turns = len(ranked)
    flops = sum(minilm_flops(n) for n in tokens) / turns
    print(
        f"{turns} turns, {len(distinct):,} distinct passages in their top {args.depth} ({len(distinct) / turns:.1f} a "
        f"turn), {statistics.mean(tokens):.1f} tokens each: {flops / 1e9:.1f} GFLOP of float32 encoding a turn"
    )
    for threads in (1, 2):
        rate = matrix_product_rate(threads)
        print(
            f"float32 matrix product on {threads} thread(s): {rate / 1e9:.0f} GFLOP/s -> at least "
            f"{flops / rate:.2f} s a turn encoding"
        )
    return 0


def kendall_tau(order: Sequence[str], reference: Sequence[str]) -> float:
    from scipy.stats import kendalltau

    position = {docid: rank for rank, docid in enumerate(reference)}
    return float(kendalltau(range(len(order)), [position[d] for d in order]).statistic)


def command_rerank(args: argparse.Namespace) -> int:
    import ir_measures
    import numpy as np
    import torch
    from ir_measures import RR, nDCG

    from cast.core.pipeline import merge_head
    from cast.core.registry import build_stage
    from cast.evaluate.retrieval import ranked_run
    from cast.formats.topics import read_qrels
    from cast.infra.resources import Resources
    from cast.infra.text import passage_text

    torch.set_num_threads(args.torch_threads)
    config, resources = study_resources("offline", args.index, args.overrides)
    rewriter = build_stage("rewriter", stage_section(config, "rewriter", args.rewriter), resources)
    rewrites = rewrite_all(rewriter, load_conversations(args.topics))
    qids = list(rewrites)
    first_stage = build_stage("first_stage", config["first_stage"], resources)
    first = dict(zip(qids, first_stage.search_batch([rewrites[q].query for q in qids]), strict=True))
    items = [(rewrites[q].query, first[q][: args.depth]) for q in qids]
    section = {**config["reranker"], "depth": args.depth, "embeddings": "none"}
    texts = list(
        dict.fromkeys(passage_text(p.passage, section.get("with_title", True)) for _, h in items for p in h)
    )
    qrels = read_qrels(args.qrels)
    measures = [RR(rel=args.rel), nDCG @ 3]
    print(
        f"{len(qids)} turns ({args.rewriter} rewrites), {len(texts)} distinct passages in the LMD top {args.depth}"
    )
    print(f"re-ranker {section}; torch threads {args.torch_threads}")

    reference: dict[str, Any] = {}
    for spec in args.backends:
        # An in-memory cache per backend (cache_dir none): each encodes every passage itself.
        backend_resources = Resources({**config, "cache_dir": None, "encoder": backend_settings(spec)})
        reranker = build_stage("reranker", section, backend_resources)
        before = load_average()
        start = time.perf_counter()
        vectors = np.asarray(reranker.cached_embeddings(texts))
        rate = len(texts) / (time.perf_counter() - start)
        heads = reranker.rerank_batch(items)
        rankings = {q: merge_head(h, first[q]) for q, h in zip(qids, heads, strict=True)}
        scores = ir_measures.calc_aggregate(measures, qrels, ranked_run(rankings))
        orders = {q: [p.id for p in h] for q, h in zip(qids, heads, strict=True)}
        if not reference:
            reference = {"spec": spec, "vectors": vectors, "orders": orders, "scores": scores}
        taus = [kendall_tau(orders[q], reference["orders"][q]) for q in qids if len(orders[q]) > 1]
        print(
            f"{spec:<14} "
            + "  ".join(f"{m} {scores[m]:.4f} ({scores[m] - reference['scores'][m]:+.4f})" for m in measures)
            + f"  Kendall tau to {reference['spec']} mean {statistics.mean(taus):.4f} min {min(taus):.4f}"
            + f"  {cosines(vectors, reference['vectors'])}  {rate:.1f} passages/s ({before})",
            flush=True,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    speed = commands.add_parser("speed", help="passages per second per backend, side by side")
    host = commands.add_parser(
        "host", help="the host's tokenising rate beside the device's, and the pipeline's (torch)"
    )
    for command in (speed, host):
        command.add_argument(
            "--input", type=existing_path, default=str(WIKI), help="collection (default: %(default)s)"
        )
        command.add_argument(
            "--passages", type=int, default=1000, help="passages embedded per round (default 1000)"
        )
        command.add_argument("--offset", type=int, default=0, help="passages skipped first (default 0)")
        command.add_argument("--max-seq-length", type=int, default=256, help="tokens per text (default 256)")
        command.add_argument(
            "--device", choices=["cpu", "cuda"], default="cpu", help="where torch encodes (default cpu)"
        )
        command.add_argument(
            "--model", help="a sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2)"
        )
        command.add_argument("--torch-threads", type=int, default=2, help="torch CPU threads (default 2)")
    speed.add_argument(
        "--rounds", type=int, default=3, help="rounds, each backend once per round (default 3)"
    )
    speed.add_argument(
        "--batch-size",
        type=int,
        nargs="+",
        default=[64],
        help="texts per forward pass (default 64; several: compared)",
    )
    speed.add_argument(
        "--exports",
        type=Path,
        default=Path("~/.cache/cast-toolkit/encoders").expanduser(),
        help="where exported models are kept (default: %(default)s)",
    )
    speed.set_defaults(func=command_speed)
    host.add_argument("--batch-size", type=int, default=512, help="texts per forward pass (default 512)")
    host.add_argument(
        "--precision", choices=list(PRECISIONS), default="", help="fp16, bf16 (default: float32)"
    )
    host.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="tokenising threads (default 1 2)"
    )
    host.add_argument(
        "--stand-in",
        type=int,
        metavar="RATE",
        help="time the pipeline against a stand-in device of RATE passages/s (no GPU needed)",
    )
    host.set_defaults(func=command_host)
    weights = commands.add_parser(
        "random-model",
        help="a copy of a model folder with random weights of its shape (for timing without them)",
    )
    weights.add_argument(
        "source", type=Path, help="the model folder (its configuration and tokenizer suffice)"
    )
    weights.add_argument("out", type=Path, help="the new folder")
    weights.set_defaults(func=lambda args: print(random_weights_like(args.source, args.out)) or 0)
    rerank = commands.add_parser("rerank", help="re-ranking faithfulness per backend on CAsT 2022 dev")
    rerank.add_argument("--topics", type=existing_path, default=str(DEV_2022_TOPICS))
    rerank.add_argument("--qrels", type=existing_path, default=str(DEV_2022_QRELS))
    rerank.add_argument("--index", type=existing_path, default=DEFAULT_INDEX)
    rerank.add_argument("--rewriter", default="manual", help="rewriter of the turns (default manual)")
    rerank.add_argument("--depth", type=int, default=100, help="re-rank depth (default 100)")
    rerank.add_argument("--rel", type=int, default=1, help="lowest grade counted relevant by MRR (default 1)")
    rerank.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    rerank.set_defaults(func=command_rerank)
    bound = commands.add_parser(
        "bound", help="a cold run's encoding arithmetic against the cores' float32 rate"
    )
    bound.add_argument("--run", type=existing_path, required=True, help="a run file of the turns")
    bound.add_argument("--index", type=existing_path, required=True, help="the index the run was made over")
    bound.add_argument("--depth", type=int, default=100, help="re-rank depth (default 100)")
    bound.add_argument("--max-seq-length", type=int, default=256, help="tokens per text (default 256)")
    bound.set_defaults(func=command_bound)
    rerank.add_argument("--torch-threads", type=int, default=2, help="torch CPU threads (default 2)")
    for command in (speed, rerank):
        command.add_argument("--backends", nargs="+", default=["torch", "onnx", "onnx-int8", "openvino"])
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(run(main))
