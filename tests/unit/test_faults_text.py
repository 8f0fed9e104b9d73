"""Text that reads alike in every tool or not at all: lines end at ``\\n`` only, a byte-order mark is dropped (or a
UTF-16 one refused), a NUL is refused, grades and scores are ASCII numbers, ids hold no whitespace, control or
format character, JSON keys appear once, and an utterance has something to search. Each case is one the third
reliability audit met: a finished run lost to a line separator, scores changed by a byte-order mark, ``1_0`` read
as 10, a NUL in a qid."""

from __future__ import annotations

import json
import os
import weakref
from pathlib import Path

import pytest
from test_cli_audit import cast, one_error_line
from test_faults import write

from cast.errors import CastError, DataFormatError, EmptyUtteranceError
from cast.evaluate.retrieval import evaluate_run
from cast.formats.outputs import RunOutputs
from cast.formats.runfile import read_run
from cast.formats.textfiles import json_lines, read_json
from cast.formats.topics import load_topics, read_qrels, read_rewrites

EVAL = Path(__file__).parent.parent / "fixtures" / "eval"
# Characters str.splitlines() ends a line at that JSON leaves unescaped in a record (both occur in Wikipedia passages).
LINE_SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e"]


def sample(utterance: str = "Who was Marie Curie?", topic_id: object = "t") -> str:
    return json.dumps({"topic_id": topic_id, "turns": [{"utterance": utterance}]})


# --- 1. a record holding a line separator ---------------------------------------------------------------------------


@pytest.mark.parametrize("separator", LINE_SEPARATORS)
def test_a_record_holding_a_line_separator_is_resumed_and_finished(tmp_path, separator):
    from cast.core.records import Passage, ScoredPassage

    utterance = f"What is radium{separator}used for?"
    outputs = RunOutputs(tmp_path / "r", "t")
    ranking = [ScoredPassage(Passage("p1", f"Radium{separator}glows."), 2.0)]
    outputs.append("1_1", ranking, {"qid": "1_1", "utterance": utterance})
    assert outputs.completed() == {
        "1_1": {"qid": "1_1", "utterance": utterance}
    }  # as an interrupted run resumes
    outputs.append("1_2", ranking, {"qid": "1_2", "utterance": "And then?"})
    outputs.finalize(["1_1", "1_2"])
    records = [record for _, record in json_lines(outputs.answers_path)]
    assert [r["utterance"] for r in records] == [utterance, "And then?"]
    assert list(read_run(outputs.run_path)) == ["1_1", "1_2"]


@pytest.mark.parametrize("reader", ["trec-rag24", "ikat2025"])
def test_run_files_of_json_lines_are_split_at_line_ends_only(tmp_path, reader):
    from cast.formats.ikat_runs import read_ikat_run
    from cast.formats.rag_runs import read_rag24_run

    lines = [{"topic": f"radium{separator}glows", "n": n} for n, separator in enumerate(LINE_SEPARATORS)]
    path = write(
        tmp_path / "run.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    )
    read = read_rag24_run if reader == "trec-rag24" else lambda p: read_ikat_run(p, "ikat2025")
    assert read(path) == lines


def test_qrels_and_rewrites_are_split_at_line_ends_only(tmp_path):
    rewrites = write(tmp_path / "r.tsv", "1_1\tWhat is radium\u2028used for?\r\n1_2\tAnd\u0085then?\n")
    assert read_rewrites(rewrites) == {"1_1": "What is radium\u2028used for?", "1_2": "And\u0085then?"}
    qrels = write(tmp_path / "q.txt", "1_1 0 d\u2028x 1\n")
    with pytest.raises(DataFormatError, match=r"q\.txt:1: docid 'd\\u2028x' holds U\+2028 \(a space\)"):
        read_qrels(qrels)


# --- 2. byte-order marks and NULs -----------------------------------------------------------------------------------

BOM = "\ufeff".encode()


def test_a_byte_order_mark_changes_no_score(tmp_path):
    plain = evaluate_run(read_run(EVAL / "a.run"), read_qrels(EVAL / "toy.qrels")).per_turn
    run = write(tmp_path / "a.run", BOM + (EVAL / "a.run").read_bytes())
    qrels = write(tmp_path / "toy.qrels", BOM + (EVAL / "toy.qrels").read_bytes())
    assert list(read_run(run)) == list(read_run(EVAL / "a.run"))
    assert read_qrels(qrels) == read_qrels(EVAL / "toy.qrels")
    assert evaluate_run(read_run(run), read_qrels(qrels)).per_turn.equals(plain)


@pytest.mark.parametrize(
    "name",
    ["topics.json", "rewrites.tsv", "answers.jsonl", "config.yaml"],
)
def test_a_byte_order_mark_is_dropped_from_every_kind_of_input(tmp_path, name):
    from cast.core.config import load_config
    from cast.formats.answers import read_answers

    content, read, expected = {
        "topics.json": (sample(), lambda p: load_topics(p)[0].topic_id, "t"),
        "rewrites.tsv": ("t_1\tWho?\n", lambda p: list(read_rewrites(p)), ["t_1"]),
        "answers.jsonl": ('{"qid": "t_1", "answer": {"text": "x", "source_ids": []}}\n', lambda p: list(read_answers(p).records), ["t_1"]),
        "config.yaml": ("base: offline\ntag: mine\n", lambda p: load_config(p)["tag"], "mine"),
    }[name]  # fmt: skip
    assert read(write(tmp_path / name, BOM + content.encode())) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("\ufeffq1 0 d1 1\n".encode("utf-16"), r"UTF-16 or UTF-32 text .*; save it as UTF-8"),
        (b"q1 0 d1 1\nq1 0 d\x002 1\n", r"q\.txt:2: a NUL byte at column 7: not text"),
    ],
)
def test_utf16_and_nul_bytes_are_refused_naming_the_line(tmp_path, content, message):
    with pytest.raises(DataFormatError, match=message):
        read_qrels(write(tmp_path / "q.txt", content))


def test_a_nul_in_a_whole_file_names_its_line_and_column(tmp_path):
    path = write(tmp_path / "t.json", b'{"topic_id": "t",\n "turns": [\x00]}')
    with pytest.raises(DataFormatError, match=r"t\.json: a NUL byte at line 2, column 12: not text"):
        load_topics(path)


# --- 3. numbers in qrels and run files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grade", ["1_0", "\u0663", "\uff14", "99999999999999999999999999", "101", "1.0", "+-1"]
)
def test_a_grade_that_is_not_an_ascii_integer_in_range_is_refused(tmp_path, grade):
    path = write(tmp_path / "q.txt", f"1_1 0 d1 1\n1_1 0 d2 {grade}\n")
    with pytest.raises(
        DataFormatError, match=r"q\.txt:2: relevance .* is not a grade: an integer from -100 to 100"
    ):
        read_qrels(path)


def test_grades_of_every_trec_scale_are_read(tmp_path):
    path = write(tmp_path / "q.txt", "1_1 0 d1 -2\n1_1 0 d2 +4\n1_1 0 d3 100\n")
    assert read_qrels(path) == {"1_1": {"d1": -2, "d2": 4, "d3": 100}}


@pytest.mark.parametrize("score", ["1_0", "\u0663", "\uff14", "nan", "inf", "1e999", "0x1p3"])
def test_a_score_that_is_not_an_ascii_finite_number_is_refused(tmp_path, score):
    path = write(tmp_path / "r.run", f"1_1 Q0 d1 1 {score} t\n")
    with pytest.raises(DataFormatError, match=r"r\.run:1: score .* is not a finite number in ASCII digits"):
        read_run(path)


def test_scores_as_trec_eval_reads_them_are_read(tmp_path):
    path = write(tmp_path / "r.run", "1_1 Q0 d1 1 -3.2e-4 t\n1_1 Q0 d2 2 .5 t\n1_1 Q0 d3 3 +7. t\n")
    assert read_run(path) == {"1_1": {"d1": -3.2e-4, "d2": 0.5, "d3": 7.0}}


# --- 4. ids ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic_id", "message"),
    [
        (None, "found None"),
        (True, "found True"),
        ([1], r"found \[1\]"),
        ("a\x00b", r"qid 'a\\x00b_1' holds U\+0000 \(a control character\)"),
        ("a\u200bb", r"qid 'a\\u200bb_1' holds U\+200B \(an invisible format character\)"),
        ("\ufeffa", r"holds U\+FEFF"),
    ],
)
def test_a_topic_id_that_is_no_id_is_refused(tmp_path, topic_id, message):
    with pytest.raises(DataFormatError, match=message) as caught:
        load_topics(write(tmp_path / "t.json", sample(topic_id=topic_id)))
    assert "\n" not in str(caught.value)


def test_a_cast_number_in_other_digits_is_refused(tmp_path):
    topics = [{"number": "\u0663", "turn": [{"number": 1, "raw_utterance": "Who?"}]}]
    with pytest.raises(DataFormatError, match="topic #1 has 'number' '\u0663'; expected e.g. 3"):
        load_topics(write(tmp_path / "t.json", json.dumps(topics)))


@pytest.mark.parametrize(
    "text",
    [
        '{"topic_id": "t", "topic_id": "u", "turns": [{"utterance": "Who?"}]}',
        '{"topic_id": "t", "turns": [{"utterance": "Who?", "utterance": "What?"}]}',
    ],
)
def test_a_json_key_given_twice_is_refused(tmp_path, text):
    with pytest.raises(DataFormatError, match=r"not valid JSON: key '(topic_id|utterance)' appears twice"):
        load_topics(write(tmp_path / "t.json", text))
    with pytest.raises(
        DataFormatError, match="appears twice"
    ):  # every JSON input, the toolkit's own records too
        read_json(write(tmp_path / "r.json", text), 1 << 20, "record")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1_1\x01 0 d1 1", r"qid '1_1\\x01' holds U\+0001 \(a control character\)"),
        ("1_1 0 d\u200b1 1", r"docid 'd\\u200b1' holds U\+200B"),
        (
            "1_1 0 d1\xa0 1",
            r"docid 'd1\\xa0' holds U\+00A0 \(a space\)",
        ),  # trec_eval splits at ASCII spaces only
    ],
)
def test_qrels_ids_that_tools_would_read_otherwise_are_refused(tmp_path, line, message):
    with pytest.raises(DataFormatError, match=r"q\.txt:2: " + message):
        read_qrels(write(tmp_path / "q.txt", f"1_1 0 d0 1\n{line}\n"))


def test_run_file_ids_that_tools_would_read_otherwise_are_refused(tmp_path):
    path = write(tmp_path / "r.run", "1_1 Q0 d\u200b1 1 2.0 t\n")
    with pytest.raises(DataFormatError, match=r"r\.run:1: docid 'd\\u200b1' holds U\+200B"):
        read_run(path)


# --- 5. an utterance with nothing to search -----------------------------------------------------------------------


@pytest.mark.parametrize("utterance", ["?!", "\u200b\u200b", "\u0301\u0301", "\x00", "... --- ..."])
def test_an_utterance_with_no_letter_or_digit_is_refused_naming_the_turn(tmp_path, utterance):
    path = write(tmp_path / "t.json", sample(utterance))
    with pytest.raises(EmptyUtteranceError, match=r"t\.json: turn t_1's utterance .* has no letter or digit"):
        load_topics(path)


def test_a_run_in_which_no_turn_retrieved_anything_is_not_written(tmp_path):
    outputs = RunOutputs(tmp_path / "r", "t")
    outputs.append("1_1", [], {"qid": "1_1", "query": "the of and"})
    with pytest.raises(CastError, match=r"no turn retrieved a passage \(turn 1_1's query was 'the of and'\)"):
        outputs.finalize(["1_1"])
    assert not outputs.run_path.exists() and not outputs.answers_path.exists()
    assert outputs.answers_partial.exists()  # the answered turns are kept


# --- 6. what a run keeps of each turn -------------------------------------------------------------------------------


class Answered:
    """A stand-in for a turn's result (its ranking, in a run), to watch whether anything keeps it."""

    def __init__(self, qid: str):
        self.qid = qid

    def past_turn(self):
        from cast.core.records import PastTurn, Turn

        return PastTurn(turn=Turn(self.qid, "t", "1", "Who?"), query="Who?")


def test_a_walk_keeps_no_result_once_it_is_handed_on_and_takes_bounded_batches():
    from cast.conversation.walker import MAX_BATCH_TURNS, walk
    from cast.core.records import Conversation, Turn

    conversations = [
        Conversation(f"c{n}", tuple(Turn(f"c{n}_{t}", f"c{n}", str(t), "Who?") for t in range(1, 4)))
        for n in range(MAX_BATCH_TURNS * 2 + 1)
    ]
    batches, handed = [], []

    def take(steps):
        batches.append(len(steps))
        assert all(item() is None for item in handed), "an earlier batch's result is still held"
        return [Answered(step.turn.qid) for step in steps]

    kept = walk(
        conversations, take, Answered.past_turn, on_item=lambda item: handed.append(weakref.ref(item))
    )
    assert kept == [] and len(handed) == 3 * len(conversations)
    assert max(batches) == MAX_BATCH_TURNS and sum(batches) == len(handed)


# --- 10. whole inputs that are not files ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["device", "FIFO", "folder"])
def test_cast_eval_says_what_a_run_that_is_not_a_file_is(capsys, tmp_path, kind):
    run = {"device": Path("/dev/zero"), "FIFO": tmp_path / "fifo", "folder": tmp_path}[kind]
    if kind == "FIFO":
        os.mkfifo(run)
    code, _, err = cast(capsys, "eval", "retrieval", "--run", run, "--qrels", EVAL / "toy.qrels")
    assert (
        code == 1
        and f"{run}: is a {kind if kind != 'FIFO' else 'FIFO (named pipe)'}, not a file"
        in one_error_line(err)
    )
