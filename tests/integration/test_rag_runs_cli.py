"""`cast run --format trec-rag24` on the fixture index, and `cast validate` over what it wrote (the format's own
rules: tests/unit/test_rag_runs.py)."""

from __future__ import annotations

from fast_pipeline import FAST, cli_sets

from cast.cli import main as cast_main
from cast.formats.rag_runs import rag24_run_path, read_rag24_run


def test_cast_run_writes_it_and_cast_validate_accepts_it(core_index, fixtures, tmp_path, capsys):
    topics = fixtures / "core" / "conversations.json"
    output = tmp_path / "fast"
    sets = cli_sets(f"index={core_index}", "rewriter.name=manual", *FAST, "summarizer.words=12")
    assert (
        cast_main(["run", "--topics", str(topics), "--output", str(output), "--format", "trec-rag24", *sets])
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "not MS MARCO v2.1 segment ids" in err
    )  # the fixture's ids: written, but said not to be a submission
    path = rag24_run_path(output)
    entries = read_rag24_run(path)
    assert [e["topic_id"] for e in entries] == ["1_1", "1_2", "1_3", "2_1", "2_2"]
    assert all(e["run_id"] == "offline" and e["answer"] and e["references"] for e in entries)
    validate = ["validate", "--format", "trec-rag24", str(path), "--topics", str(topics)]
    assert cast_main(validate + ["--any-ids"]) == 0
    assert cast_main(validate) == 1  # a track submission cites MS MARCO v2.1 segments
