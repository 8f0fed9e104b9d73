"""The README's links into the repository lead somewhere: each names an existing file, and a link to a heading of a
docs page names one that page has (the docs site's own links are checked by `mkdocs build --strict`)."""

import re
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchor(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {heading_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_heading_anchor_is_mkdocs_slug():
    assert heading_anchor("The pooled development benchmark, and the rule for changing a default") == (
        "the-pooled-development-benchmark-and-the-rule-for-changing-a-default"
    )
    assert (
        heading_anchor("A live system's view: earlier (2026-11-22)")
        == "a-live-systems-view-earlier-2026-11-22"
    )


def test_readme_links_name_existing_files_and_headings():
    targets = [t for t in LINK.findall((REPO / "README.md").read_text(encoding="utf-8")) if "://" not in t]
    assert targets, "the README links to the docs"
    for target in targets:
        path, _, anchor = target.partition("#")
        assert (REPO / path).is_file(), f"README.md links to {path}, which does not exist"
        if anchor:
            assert anchor in anchors(REPO / path), f"README.md links to {target}: no such heading"
