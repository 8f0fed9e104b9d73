import subprocess
import sys

HEAVY = ("torch", "transformers", "jnius", "pyserini", "spacy", "sentence_transformers", "matplotlib")


def test_help_imports_nothing_heavy():
    code = f"import sys, cast.cli; cast.cli.build_parser();print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_the_commands():
    out = subprocess.run(
        [sys.executable, "-m", "cast.cli", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("demo", "run", "answer", "index", "eval"):
        assert command in out.stdout


def test_errors_are_one_line_without_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cast.cli",
            "run",
            "--topics",
            str(tmp_path / "missing.json"),
            "--output",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "missing.json" in proc.stderr
