"""The wikipedia linker's decision pieces by hand: overlapping mentions, anchor counts, casing, the model's
features."""

import json

import numpy as np
import pytest

from cast.entity.link.helpers import share_by_length
from cast.entity.link.linkers import entity_uri
from cast.entity.link.wikipedia import (
    FEATURES,
    MODEL_FILE,
    Anchors,
    Candidate,
    LinkerModel,
    decide,
    sentence_case,
)

PLAIN = {"title_coverage": 1.0, "is_title": 1.0, "is_redirect": 0.0, "entity_seen_before": 0.0}


def candidate(first, end, title, surface="x", **features):
    features = {**PLAIN, "qualifier_in_context": 0.0, **features}
    return Candidate(first, end, first, end, surface, title, entity_uri(title), features)


def test_decide_keeps_the_more_probable_of_overlapping_mentions():
    burger_king = candidate(0, 2, "burger king")
    king = candidate(1, 2, "king")
    stephen_king = candidate(1, 2, "stephen king")
    lunch = candidate(3, 4, "lunch")
    kept = decide([king, burger_king, stephen_king, lunch], np.array([0.5, 0.8, 0.6, 0.1]), threshold=0.2)
    assert [(c.title, p) for c, p in kept] == [("burger king", 0.8)]


def test_anchors_count_link_probability_and_commonness():
    found = [candidate(0, 1, "hockey", "hockey"), candidate(2, 3, "fun", "fun")]
    anchors = Anchors.count(
        [([("hockey", "Hockey")], found), ([], found[:1]), ([("Hockey", "Ice_hockey")], found)]
    )
    features = anchors.features(found[0])
    assert features == {"anchor_known": 1.0, "anchor_link_probability": 2 / 4, "anchor_commonness": 1 / 2}
    assert anchors.features(found[1])["anchor_link_probability"] == 0.0
    assert anchors.features(candidate(0, 1, "cheetos", "cheetos"))["anchor_known"] == 0.0


def test_sentence_case():
    assert sentence_case("heavy metal music") == "Heavy metal music"


def test_a_model_for_other_features_is_refused(tmp_path):
    data = json.loads(MODEL_FILE.read_text())
    data["features"] = data["features"][:-1]
    (tmp_path / "model.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="retrain"):
        LinkerModel.load(tmp_path / "model.json")


def test_share_by_length_keeps_every_item_once():
    shares = share_by_length([5, 1, 9, 3, 3, 7, 2], 3)
    assert sorted(n for share in shares for n in share) == list(range(7))
    totals = [sum([5, 1, 9, 3, 3, 7, 2][n] for n in share) for share in shares]
    assert totals == sorted(totals) and max(totals) - min(totals) <= 2
    assert share_by_length([4], 2) == [[0]]


def test_features_are_complete():
    assert len(set(FEATURES)) == len(FEATURES)
