"""The real iKAT topic files and PTKB judgements of ../shared/data."""

from __future__ import annotations

import pytest

from cast.formats.topics import load_topics


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "n_conversations", "n_turns"),
    [
        ("2023_train_topics.json", 11, 95),
        ("2023_test_topics_9-14.json", 12, 147),
        ("2024_test_topics.json", 17, 218),
        ("2025_test_topics.json", 17, 188),
    ],
)
def test_the_real_ikat_files_load(shared_data, name, n_conversations, n_turns):
    conversations = load_topics(shared_data / "ikat" / name)
    assert len(conversations) == n_conversations
    assert sum(len(c.turns) for c in conversations) == n_turns
    assert all(c.ptkb for c in conversations)


@pytest.mark.integration
def test_nist_ptkb_judgements_use_the_topic_files_qids(shared_data):
    from cast.formats.topics import read_qrels

    qids = {t.qid for c in load_topics(shared_data / "ikat" / "2023_test_topics_9-14.json") for t in c.turns}
    assert set(read_qrels(shared_data / "ikat" / "2023_test_9-14.ptkb_rel_nist")) <= qids
