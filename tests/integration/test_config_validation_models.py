"""Bad settings that need a model library to be found: one clear line naming the setting to change."""

import pytest

from cast.core.registry import build_stage
from cast.errors import ModelUnavailableError
from cast.infra.resources import Resources


def test_a_model_not_in_the_cache_names_the_stage_s_allow_download_setting(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    section = {"name": "seq2seq", "model": "no-such-org/no-such-model", "device": "cpu"}
    with pytest.raises(ModelUnavailableError, match=r"--set summarizer.allow_download=true\)") as caught:
        build_stage("summarizer", section, Resources({}))
    assert "--set summarizer.model=/path/to/model" in str(caught.value)
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE forbids downloads"):
        build_stage("summarizer", {**section, "allow_download": True}, Resources({}))
