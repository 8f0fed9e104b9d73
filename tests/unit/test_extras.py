"""A feature whose extra is not installed stops with one line naming the `pip install 'cast-toolkit[EXTRA]'` that
adds it, before any other work (the extra's module is hidden from the import system here)."""

import sys
from pathlib import Path

import pytest

from cast.cli import main
from cast.infra.encoder import EncoderSettings
from cast.infra.extras import EXTRAS, MissingExtraError, require_extra


def hide(monkeypatch, *modules):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # `import module` and find_spec now find nothing


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_every_extra_is_declared_in_pyproject():
    import tomllib

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) <= set(declared)
    assert set(EXTRAS) <= {e for e in declared["all"][0].partition("[")[2].rstrip("]").split(",")}


def test_an_installed_extra_passes():
    require_extra("irds", "--topics irds:...")  # make setup installs every extra


def test_ray(monkeypatch, capsys, tmp_path, fixtures):
    hide(monkeypatch, "ray")
    topics = fixtures / "core" / "conversations.json"
    code = main(
        ["run", "--topics", str(topics), "--index", str(tmp_path), "--output", str(tmp_path / "o")]
        + ["--ray"]
    )
    assert code == 1
    assert one_error_line(capsys) == (
        "cast run: error: --ray needs ray, which is not installed: pip install 'cast-toolkit[ray]'"
    )
    assert not list(tmp_path.glob("o.*"))


def test_openvino(monkeypatch):
    hide(monkeypatch, "openvino")
    with pytest.raises(MissingExtraError, match=r"pip install 'cast-toolkit\[openvino\]'$"):
        EncoderSettings.from_config({"backend": "openvino"})
    EncoderSettings.from_config({"backend": "onnx"})  # the core install's backends need no extra


def test_explorer(monkeypatch, capsys):
    hide(monkeypatch, "fastapi", "uvicorn")
    assert main(["explore"]) == 1
    assert one_error_line(capsys) == (
        "cast explore: error: cast explore needs fastapi, uvicorn, which are not installed: "
        "pip install 'cast-toolkit[explorer]'"
    )


def test_irds(monkeypatch):
    from cast.formats.topics import load_topics, read_qrels

    hide(monkeypatch, "ir_datasets")
    for read in (load_topics, read_qrels):
        with pytest.raises(
            MissingExtraError, match=r"^irds:\.\.\. needs ir_datasets, .*'cast-toolkit\[irds\]'$"
        ):
            read("irds:trec-cast/v1/2019")


def test_pyterrier(monkeypatch):
    import importlib

    hide(monkeypatch, "pyterrier")
    monkeypatch.delitem(sys.modules, "cast.pyterrier", raising=False)
    with pytest.raises(
        MissingExtraError, match=r"^cast.pyterrier needs pyterrier, .*'cast-toolkit\[pyterrier\]'$"
    ):
        importlib.import_module("cast.pyterrier")
