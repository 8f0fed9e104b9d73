"""Answer generation latency: seconds per answer for the paper's generators, at their real shapes.

Each model is built from its architecture's configuration with random weights (nothing is downloaded): T5-base,
BART-large and PEGASUS-large. An answer reads ``--input-tokens`` tokens (3 passages: about 512) and writes exactly
``--output-tokens`` tokens (100: ``min_length`` = ``max_length``, so random weights cannot stop early), with the
paper's decoding: 4 beams, no repeated trigram, early stopping. Reported: the median wall-clock time of
``generate()`` per answer (encoder included), after warm-up, on the chosen device.

``--decoding`` times the summarizer's ways of decoding (``cast.infra.decoding.BeamDecoder``) on the same weights and
inputs: ``plain`` (transformers' ``generate()``), ``static`` (a fixed-shape KV cache), ``graphed`` (BART: the whole
beam-search step as one CUDA graph) and ``compiled`` (the fixed-shape cache with the decoder step compiled: CUDA
graphs on a GPU). Each is checked against ``plain``: the row says whether its tokens are identical. ``first s`` is
the first call, which compiles (and records CUDA graphs). ``--profile`` runs one more answer per decoding under
torch's profiler and prints where its time goes: kernels launched, the device's busy time against the wall
time, host waits for the device, and the host operations that take longest.

With ``--offline``, it times the offline profile's generator instead (``entity_extractive``): turns of the CAsT
2022 dev topics answered from 3 of the provenance passages each, for each ``--relevance`` (``overlap``: pure
Python; ``dense``: sentence embeddings on the CPU, in an empty in-memory cache, so the first pass encodes every
sentence and later passes find them cached; both are reported).

Usage:
    .venv/bin/python bench/generation_latency.py                          # all three, on CUDA if present
    .venv/bin/python bench/generation_latency.py --offline                # the offline generator, on real text
    .venv/bin/python bench/generation_latency.py --offline --relevance dense
    .venv/bin/python bench/generation_latency.py --device cpu --models bart-large --repeats 3
    .venv/bin/python bench/generation_latency.py --batch-size 8           # per-answer time in batches of 8
    python bench/generation_latency.py --device cuda --models bart-large --decoding plain static compiled
    python bench/generation_latency.py --device cuda --models bart-large --dtype float32 --decoding plain graphed \
        --profile
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from cast.benchmark.scripts import (
    DEV_2022_PASSAGES,
    DEV_2022_TOPICS,
    existing_path,
    require_paths,
    run,
)
from cast.infra.decoding import DECODINGS, BeamDecoder
from cast.testing import PUBLISHED_SHAPES, published_shape_model


def build_model(shape: str, device: str, dtype: Any) -> Any:
    """A randomly initialised model of ``shape`` (a key of :data:`cast.testing.PUBLISHED_SHAPES`) in eval mode."""
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        model = published_shape_model(shape)
    return model.to(dtype).eval()


def time_generation(
    shape: str,
    device: str,
    dtype: Any,
    *,
    decodings: tuple[str, ...] = ("plain",),
    input_tokens: int = 512,
    output_tokens: int = 100,
    num_beams: int = 4,
    batch_size: int = 1,
    repeats: int = 3,
    warmup: int = 2,
    profile: bool = False,
) -> list[dict[str, Any]]:
    """Median seconds per answer with the paper's decoding, for each of ``decodings``, on random inputs.

    All decodings run on the same model and inputs; ``plain`` runs first (it is the reference: untimed if not
    asked for) and ``compiled`` last, as it compiles the model in place.
    """
    import torch

    model = build_model(shape, device, dtype)
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(1)
    # Ids above 10 avoid the special tokens of all three vocabularies.
    input_ids = torch.randint(10, vocab, (batch_size, input_tokens), generator=generator).to(device)
    attention_mask = torch.ones_like(input_ids)
    length = output_tokens + 1  # the decoder's start token counts
    max_lengths = torch.full((batch_size,), length, device=device)
    settings = dict(num_beams=num_beams, no_repeat_ngram_size=3, early_stopping=True, min_length=length)
    # The summarizer's input limit, which sizes the fixed-shape cache: the position table, else T5's 512.
    limit = getattr(model.config, "max_position_embeddings", None) or 512

    def run(decoder: BeamDecoder) -> tuple[float, Any]:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = decoder(input_ids, attention_mask, max_lengths, **settings)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        assert output.shape[1] == length, f"{shape}: expected {length} tokens, got {output.shape[1]}"
        return time.perf_counter() - start, output

    rows = []
    reference = None
    for decoding in [d for d in DECODINGS if d in decodings or d == "plain"]:
        if decoding == "graphed" and model.config.model_type != "bart":
            print(f"{shape}: graphed decodes BART models only; skipped")
            continue
        decoder = BeamDecoder(model, decoding, limit)
        first, output = run(decoder)
        if decoding not in decodings:
            reference = output
            continue
        for _ in range(warmup - 1):
            run(decoder)
        runs = [run(decoder) for _ in range(repeats)]
        reference = output if reference is None else reference
        differing = sum(a != b for a, b in zip(output.tolist(), reference.tolist(), strict=True))
        differing += sum(
            a != b for _, out in runs for a, b in zip(out.tolist(), reference.tolist(), strict=True)
        )
        times = [t / batch_size for t, _ in runs]
        rows.append(
            {
                "model": shape,
                "device": device,
                "dtype": str(dtype).removeprefix("torch."),
                "decoding": decoding,
                "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
                "batch_size": batch_size,
                "first_seconds": first,
                "seconds_per_answer": statistics.median(times),
                "times": times,
                "answers_differing_from_plain": differing,
                "answers": batch_size * (1 + repeats),
                "profile": profiled(lambda: run(decoder)) if profile else [],  # noqa: B023 (called at once)
            }
        )
    return rows


def profiled(answer: Any) -> list[str]:
    """Where one answer's time goes, from torch's profiler: lines to print."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        wall, _ = answer()
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.self_device_time_total for e in kernels) / 1e6
    calls = {e.key: e.count for e in events}
    waits = sum(
        calls.get(k, 0)
        for k in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::_local_scalar_dense")
    )
    lines = [
        f"  profile: wall {wall:.3f} s, {sum(e.count for e in kernels):,} kernels, device busy {busy:.3f} s "
        f"({busy / wall:.0%}), {calls.get('cudaLaunchKernel', 0):,} launches, {calls.get('cudaGraphLaunch', 0):,} "
        f"graph replays, {waits:,} host waits for the device",
        "  host operations by own time:",
    ]
    host = sorted(
        (e for e in events if e.device_type != torch.autograd.DeviceType.CUDA),
        key=lambda e: -e.self_cpu_time_total,
    )
    lines += [
        f"    {e.key[:60]:<60} {e.count:>7,} calls {e.self_cpu_time_total / 1e3:>9.1f} ms" for e in host[:10]
    ]
    if kernels:
        lines.append("  device kernels by time:")
        kernels.sort(key=lambda e: -e.self_device_time_total)
        lines += [
            f"    {e.key[:60]:<60} {e.count:>7,} calls {e.self_device_time_total / 1e3:>9.1f} ms"
            for e in kernels[:6]
        ]
    return lines


def time_offline_generator(
    topics: Path, passages: Path, words: int = 50, repeats: int = 5, relevance: str = "overlap"
) -> dict[str, Any]:
    """Milliseconds per answer of ``entity_extractive`` on each turn's query and 3 provenance passages: the
    first pass and the median of all passes."""
    from cast.core.records import ScoredPassage, Selection
    from cast.core.registry import build_stage
    from cast.errors import CastError
    from cast.formats.topics import load_topics
    from cast.index.collections import read_passages
    from cast.infra.resources import Resources

    pool = [ScoredPassage(p, 1.0) for p in read_passages(passages, "jsonl")]
    if not pool:
        raise CastError(
            f"{passages} holds no passages to answer from; give --passages a JSON lines collection"
        )
    turns = {t.qid: t for c in load_topics(topics) for t in c.turns}
    items = [
        (
            turn.manual_rewrite or turn.utterance,
            Selection(tuple(pool[(3 * k + j) % len(pool)] for j in range(3)), "o"),
        )
        for k, turn in enumerate(turns.values())
    ]
    summarizer = build_stage(
        "summarizer",
        {"name": "entity_extractive", "words": words, "relevance": relevance},
        Resources({"device": "cpu", "cache_dir": None}),
    )
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        answers = summarizer.summarize_batch(items)
        times.append((time.perf_counter() - start) / len(items) * 1000)
    return {
        "turns": len(items),
        "first_ms_per_answer": times[0],
        "ms_per_answer": statistics.median(times),
        "average_words": statistics.mean(len(a.text.split()) for a in answers),
        "input_words": statistics.mean(
            sum(len(p.passage.text.split()) for p in s.passages) for _, s in items
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--models", nargs="+", default=list(PUBLISHED_SHAPES), choices=list(PUBLISHED_SHAPES))
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    parser.add_argument(
        "--dtype", default="auto", help="auto (float32 on CPU, bfloat16 on a GPU) or a torch dtype"
    )
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=100)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument(
        "--decoding",
        nargs="+",
        default=["plain"],
        choices=DECODINGS,
        help="ways of decoding to time, each checked against plain's tokens (default: plain)",
    )
    parser.add_argument("--batch-size", type=int, default=1, help="answers generated together")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--warmup", type=int, default=2, help="untimed calls first (the 1st compiles, the 2nd records graphs)"
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--profile", action="store_true", help="profile one more answer per decoding")
    parser.add_argument(
        "--offline", action="store_true", help="time the offline generator (entity_extractive)"
    )
    parser.add_argument(
        "--topics",
        type=Path,
        default=DEV_2022_TOPICS,
        help="with --offline: topics whose turns are answered (default: %(default)s)",
    )
    parser.add_argument(
        "--passages",
        type=existing_path,
        default=DEV_2022_PASSAGES,  # a Path, checked by --offline alone: a GPU box needs no data
        help="with --offline: JSON lines passages (id, contents) answers are made from (default: %(default)s)",
    )
    parser.add_argument(
        "--relevance",
        nargs="+",
        default=["overlap", "dense"],
        choices=["overlap", "dense"],
        help="with --offline: the generator's query-match settings to time (default: both)",
    )
    args = parser.parse_args(argv)

    if args.offline:
        require_paths(parser, args, "passages")
        for relevance in args.relevance:
            row = time_offline_generator(
                args.topics, args.passages, repeats=args.repeats, relevance=relevance
            )
            print(
                f"entity_extractive, relevance {relevance}: {row['ms_per_answer']:.2f} ms per answer (median of "
                f"{args.repeats} passes; first pass {row['first_ms_per_answer']:.2f} ms) over {row['turns']} "
                f"turns ({row['input_words']:.0f} input words, {row['average_words']:.1f} answer words on average)"
            )
        return 0

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    dtype_name = ("float32" if device == "cpu" else "bfloat16") if args.dtype == "auto" else args.dtype
    dtype = getattr(torch, dtype_name)
    where = (
        torch.cuda.get_device_name()
        if device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(
        f"# {where}; torch {torch.__version__}; {args.input_tokens} input tokens, {args.output_tokens} output "
        f"tokens, {args.beams} beams, no_repeat_ngram_size 3, batch {args.batch_size}"
    )
    print(f"{'model':<14} {'params (M)':>10} {'dtype':>9} {'decoding':>9} {'first s':>8} {'s/answer':>9}  "
          "same tokens as plain  runs")  # fmt: skip
    for shape in args.models:
        rows = time_generation(
            shape,
            device,
            dtype,
            decodings=tuple(args.decoding),
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            num_beams=args.beams,
            batch_size=args.batch_size,
            repeats=args.repeats,
            warmup=args.warmup,
            profile=args.profile,
        )
        for row in rows:
            runs = " ".join(f"{t:.3f}" for t in row["times"])
            differing = row["answers_differing_from_plain"]
            same = "yes" if not differing else f"NO: {differing} of {row['answers']} answers differ"
            print(
                f"{shape:<14} {row['parameters_m']:>10.0f} {row['dtype']:>9} {row['decoding']:>9} "
                f"{row['first_seconds']:>8.2f} {row['seconds_per_answer']:>9.3f}  {same:<20}  {runs}"
            )
            for line in row["profile"]:
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(main))
