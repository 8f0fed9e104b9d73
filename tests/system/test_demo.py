"""`cast demo`, the README's main job, end to end: sample index and the linker's knowledge base built on first use,
every turn answered."""

import json
import subprocess
import sys

import pytest

from cast.commands.demo import SAMPLE_CONVERSATION
from cast.infra.text import sentences

# Per turn of the sample conversation, words of which the first sentence of its answer must hold one: it answers
# the question there, not after something else. None: not answered yet. Turn 1's passages (chosen by the entity
# graph) hold no sentence that says who she was; turn 3's answer ("named after ... Poland") opens on "Also
# tentatively called", which reads as a reference to what came before.
ANSWER_BEARING = (
    None,  # Who was Marie Curie? ("physicist", "chemist")
    ("polonium", "radium"),  # Which elements did she discover?
    None,  # Why did she name the first one that way? ("poland")
    ("pierre", "becquerel"),  # Who did she share her first Nobel Prize with?
    ("accident", "carriage", "wagon", "run over", "struck", "killed"),  # How did her husband die?
    ("cancer", "radiotherapy", "treatment", "medicine"),  # Is the other element still used to treat cancer?
)


def first_sentences(stdout: str, turns: int) -> list[str]:
    """The first sentence of each answer the demo printed (the line after each ``Q<n>:`` line)."""
    lines = stdout.splitlines()
    found = []
    for number in range(1, turns + 1):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"Q{number}: "))
        found.append(sentences(lines[at + 1])[0])
    return found


# About 3 min: indexes the sample, builds the Wikipedia knowledge base (as on a fresh machine), loads the models;
# make test (CI) runs it.
@pytest.mark.slow
def test_demo_builds_once_and_answers_every_turn(tmp_path):
    def demo():
        return subprocess.run(
            [
                *(sys.executable, "-m", "cast.cli", "demo", "--set", f"cache_dir={tmp_path}"),
                *("--set", f"linker.kb_path={tmp_path / 'wikipedia-kb.sqlite'}"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )

    first = demo()
    assert first.returncode == 0, first.stderr
    turns = json.loads(SAMPLE_CONVERSATION.read_text())["turns"]
    for number, turn in enumerate(turns, start=1):
        assert f"Q{number}: {turn['utterance']}" in first.stdout
    assert "building the sample index" in first.stdout
    assert "building the Wikipedia knowledge base" in first.stdout
    assert "No answer was found" not in first.stdout
    # The answers read the sample's passages, which are cited with their titles.
    assert "polonium" in first.stdout.lower() and "] Marie Curie" in first.stdout
    # Each answer answers its question in its first sentence.
    for number, (sentence, words) in enumerate(
        zip(first_sentences(first.stdout, len(turns)), ANSWER_BEARING, strict=True), 1
    ):
        assert words is None or any(word in sentence.lower() for word in words), f"Q{number}: {sentence}"

    again = demo()
    assert again.returncode == 0, again.stderr
    assert "building the sample index" not in again.stdout
    assert "building the Wikipedia knowledge base" not in again.stdout
