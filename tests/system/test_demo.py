"""`cast demo`, the README's main job, end to end: sample index and the linker's knowledge base built on first use,
every turn rewritten by the offline profile's own rewriter and answered on topic."""

import json
import re
import subprocess
import sys

import pytest

from cast.commands.demo import SAMPLE_CONVERSATION
from cast.infra.text import split_sentences

# Per turn, words an answer holds in its first two sentences, where a reader looks for the answer (any one of each
# group): what the sample's passages say. Q1 reads first the passage that defines her (re-ranked 9th of the 10
# candidates: the selector's `definitions`); "he" (Q3) is her husband: the question is resolved with an entity of the
# pronoun's gender; "She named ... polonium" (Q4) answers "Which chemical elements did she discover?" on its own; Q6
# is answered by the page "Polonium" ("It was Curie's hope that naming the element after her native land would
# publicize its lack of independence"): its sentences hold their page title's word "polonium".
ANSWER_WORDS = [
    [("physicist", "chemist")],  # Who was Marie Curie?
    [("pierre",)],  # Who was her husband?
    [("accident", "killed")],  # How did he die?
    [("polonium",), ("radium",)],  # Which chemical elements did she discover?
    [("anemia", "radiation")],  # How did she die?
    [("hope", "independen")],  # Why did she name polonium that way?
]


def turns_of(output: str) -> list[dict[str, str]]:
    """Each turn the demo printed: its rewrite, manual rewrite (with --manual) and answer."""
    turns = []
    for block in re.split(r"^Q\d+: .*$", output, flags=re.MULTILINE)[1:]:
        lines = block.strip("\n").splitlines()
        fields = {"rewrite": lines[0].removeprefix("  rewrite: ")}
        if lines[1].startswith("  manual:  "):
            fields["manual"] = lines.pop(1).removeprefix("  manual:  ")
        fields["answer"] = lines[1]
        turns.append(fields)
    return turns


# About 3 min: indexes the sample, builds the Wikipedia knowledge base (as on a fresh machine), loads the models;
# make test (CI) runs it.
@pytest.mark.slow
def test_demo_builds_once_and_answers_every_turn_on_topic_with_its_own_rewrites(tmp_path):
    def demo(*flags: str):
        return subprocess.run(
            [
                *(sys.executable, "-m", "cast.cli", "demo", "--set", f"cache_dir={tmp_path}"),
                *("--set", f"linker.kb_path={tmp_path / 'wikipedia-kb.sqlite'}", *flags),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )

    first = demo()
    assert first.returncode == 0, first.stderr
    assert "building the sample index" in first.stdout
    assert "building the Wikipedia knowledge base" in first.stdout
    assert "rewriter: term_selection," in first.stdout  # the offline profile's own
    assert "No answer was found" not in first.stdout
    conversation = json.loads(SAMPLE_CONVERSATION.read_text())["turns"]
    turns = turns_of(first.stdout)
    assert len(turns) == len(conversation) == len(ANSWER_WORDS)
    for number, (turn, shown, groups) in enumerate(
        zip(conversation, turns, ANSWER_WORDS, strict=True), start=1
    ):
        assert f"Q{number}: {turn['utterance']}" in first.stdout
        assert shown["rewrite"].endswith(turn["utterance"]) and "manual" not in shown
        answer = " ".join(s.text for s in split_sentences(shown["answer"])[:2]).lower()
        for group in groups:
            assert any(word in answer for word in group), (number, group, shown["answer"])
    # "she", "her" and "he" resolved from the earlier utterances.
    assert "Curie" in turns[1]["rewrite"] and "husband" in turns[2]["rewrite"]
    assert "] Marie Curie" in first.stdout  # the answers cite the sample's passages with their titles

    # Another rewriter, chosen on the command line, with the manual rewrites shown beside.
    again = demo("--set", "rewriter.name=hqe", "--manual")
    assert again.returncode == 0, again.stderr
    assert "building the sample index" not in again.stdout
    assert "building the Wikipedia knowledge base" not in again.stdout
    assert "rewriter: hqe," in again.stdout
    shown = turns_of(again.stdout)
    assert [t["manual"] for t in shown] == [t["manual_rewrite"] for t in conversation]
    assert all(t["answer"] for t in shown)
