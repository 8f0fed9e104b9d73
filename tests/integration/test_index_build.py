"""Index builds (one JVM per test process; builds shared through session fixtures): counts, Krovetz analysis,
LMD ranking over the built index, the stored raw document, overwrite refusal, atomic replacement, the CLI."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from cast.commands import index as cli
from cast.core.records import Passage
from cast.errors import CastError, DataFormatError
from cast.index.build import IndexSummary, build_index, index_stats
from cast.infra.resources import Resources
from cast.rank.first_stage import LMDFirstStage

# The fixture's five non-empty passages hold 38 tokens after analysis (stop words removed, Krovetz stems);
# galileo-1 and newton-1 have 9 tokens each; "orbit" occurs in 3 passages once each, "jupiter" once.
FIELD_TOKENS = 38


def lmd_term(tf: int, doc_len: int, ctf: int, mu: float = 1000.0) -> float:
    """Lucene's Dirichlet term score: log(1 + tf / (mu p(t|C))) + log(mu / (|d| + mu)), floored at 0,
    with p(t|C) = (ctf + 1) / (field tokens + 1)."""
    p = (ctf + 1) / (FIELD_TOKENS + 1)
    return max(0.0, math.log(1 + tf / (mu * p)) + math.log(mu / (doc_len + mu)))


@pytest.fixture(scope="session")
def fixture_index(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[IndexSummary, Path]:
    index_dir = tmp_path_factory.mktemp("index") / "passages"
    summary = build_index([fixtures / "index" / "passages.jsonl"], index_dir, progress=False)
    return summary, index_dir


@pytest.fixture(scope="session")
def lmd(fixture_index: tuple[IndexSummary, Path]) -> LMDFirstStage:
    return LMDFirstStage(Resources({"index": str(fixture_index[1])}), mu=1000)


def test_summary_counts_indexed_and_skipped_empty_passages(fixture_index: tuple[IndexSummary, Path]) -> None:
    summary, index_dir = fixture_index
    assert (summary.indexed, summary.skipped, summary.path) == (5, 2, index_dir)
    assert summary.seconds > 0
    stats = index_stats(index_dir)
    assert (stats["documents"], stats["total_terms"]) == (5, FIELD_TOKENS)
    assert not [
        p for p in index_dir.parent.iterdir() if p.name.startswith(".")
    ]  # no temporary directories left


def test_passages_fed_through_python_index_the_same(fixtures: Path, tmp_path: Path) -> None:
    empty_duplicates = tmp_path / "duplicates.txt"
    empty_duplicates.write_text("")
    # A duplicate list sends JSON lines through the Python reader instead of Anserini's IndexCollection.
    summary = build_index(
        [fixtures / "index" / "passages.jsonl"],
        tmp_path / "index",
        duplicates=empty_duplicates,
        progress=False,
    )
    assert (summary.indexed, summary.skipped, summary.duplicates_left_out) == (5, 2, 0)
    stats = index_stats(tmp_path / "index")
    assert (stats["documents"], stats["total_terms"]) == (5, FIELD_TOKENS)


def test_lmd_ranking_and_scores_over_the_built_index(lmd: LMDFirstStage) -> None:
    ranking = lmd.search("planets orbiting Jupiter")
    assert [sp.id for sp in ranking] == ["galileo-1", "newton-1", "kepler-1"]
    # Anserini rounds scores to about 4 decimals, hence the tolerance.
    assert ranking[0].score == pytest.approx(2 * lmd_term(1, 9, 3) + lmd_term(1, 9, 1), abs=1e-4)
    assert ranking[1].score == pytest.approx(2 * lmd_term(1, 9, 3), abs=1e-4)
    assert ranking[2].score == 0.0  # kepler-1 (10 tokens): both term scores are floored at 0


def test_stored_raw_document_gives_text_and_title(lmd: LMDFirstStage) -> None:
    top = lmd.search("Jupiter")[0]
    assert top.passage == Passage(
        id="galileo-1",
        text="Galileo observed the moons of Jupiter orbiting the planet through his telescope.",
        title="Galileo Galilei",
    )
    assert lmd.search("morning")[0].passage.title is None


def test_krovetz_conflates_inflections_but_not_porter_stems(lmd: LMDFirstStage) -> None:
    assert {sp.id for sp in lmd.search("orbit")} == {"galileo-1", "newton-1", "kepler-1"}  # orbits, orbiting
    assert [sp.id for sp in lmd.search("moon telescopes")] == ["galileo-1"]
    # Porter would stem both to "run"; Krovetz keeps them apart.
    assert [sp.id for sp in lmd.search("runs")] == ["marathon-1"]
    assert [sp.id for sp in lmd.search("running")] == ["jogging-1"]


def test_overwrite_replaces_the_old_index(fixtures: Path, tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "segments_1").write_text("old")  # (--overwrite replaces only what looks like a Lucene index)
    (target / "old.txt").write_text("old")
    summary = build_index([fixtures / "index" / "collection.tsv"], target, overwrite=True, progress=False)
    assert summary.indexed == 3
    assert not (target / "old.txt").exists()
    assert index_stats(target)["documents"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["index"]


def test_failed_build_leaves_nothing_behind(fixtures: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "contents": "fine"}\n{"id": "b"}\n')
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2"):
        build_index([bad], tmp_path / "index", progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]


def test_cli_build_prints_summary_and_stats(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="cast")
    cli.add_parser(parser.add_subparsers(dest="command"))
    folder = fixtures / "index"
    args = parser.parse_args(
        ["index", "build", "--input", str(folder / "collection.tsv"), str(folder / "wapo.jsonl"), "--index",
         str(tmp_path / "ix"), "--duplicates", str(folder / "duplicates.txt"), "--threads", "1"]
    )  # fmt: skip
    assert args.func(args) == 0
    out = capsys.readouterr()
    assert "indexed 5 passages into" in out.out
    assert "(1 empty skipped, 2 listed duplicates left out)" in out.out
    assert "passages/s" in out.out
    args = parser.parse_args(["index", "stats", "--index", str(tmp_path / "ix")])
    assert args.func(args) == 0
    assert "documents: 5" in capsys.readouterr().out


def test_shards_merged_into_one_index_rank_as_the_index_of_all_their_passages(
    fixtures: Path, fixture_index: tuple[IndexSummary, Path], lmd: LMDFirstStage, tmp_path: Path
) -> None:
    from cast.index.build import merge_indexes
    from cast.index.record import build_record

    lines = (fixtures / "index" / "passages.jsonl").read_text().splitlines(keepends=True)
    parts = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    parts[0].write_text("".join(lines[:3]))
    parts[1].write_text("".join(lines[3:]))
    shards = [build_index([part], tmp_path / f"shard-{part.stem}", progress=False).path for part in parts]
    code = cli.merge_main(
        argparse.Namespace(shards=[str(s) for s in shards], index=str(tmp_path / "merged"), overwrite=False)
    )
    assert code == 0
    merged = LMDFirstStage(Resources({"index": str(tmp_path / "merged")}), mu=1000)
    for query in ("planets orbiting Jupiter", "orbit", "morning runs"):
        assert [(p.id, p.score, p.passage) for p in merged.search(query)] == [
            (p.id, p.score, p.passage) for p in lmd.search(query)
        ]
    record = build_record(tmp_path / "merged")
    assert (record["documents"], record["empty"]) == (5, 2) and record["inputs"] == [
        str(p.resolve()) for p in parts
    ]
    with pytest.raises(CastError, match="indexed into both"):
        merge_indexes([shards[0], shards[0]], tmp_path / "twice")
    with pytest.raises(CastError, match="at least two shards"):
        merge_indexes([shards[0]], tmp_path / "one")
    with pytest.raises(CastError, match="merged already exists"):
        merge_indexes(shards, tmp_path / "merged")
