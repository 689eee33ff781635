"""A Gradescope export, read: its folder, the submitters of each submission and Gradescope's scores.

EXPORT is Gradescope's "Export Submissions" folder, unzipped: one folder per submission
(``submission_123456/``) and ``submission_metadata.yml`` (YAML) naming its submitters; the folder above it
(holding only that folder) is accepted too. A missing or malformed file exits with a message that names it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

META = "submission_metadata.yml"
NOT_SUBMISSIONS = {"regrade", "__MACOSX"}     # our results folder; macOS's zip leftovers


def subfolders(folder: Path) -> list[Path]:
    """The folders of ``folder`` that may be submissions (no hidden ones, no NOT_SUBMISSIONS)."""
    return sorted(p for p in folder.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_SUBMISSIONS)


def export_folder(path: Path) -> Path:
    """The folder holding submission_metadata.yml: ``path`` itself or its only subfolder.

    Gradescope's zip unzips to one folder (``assignment_123_export/``); a TA may
    pass that folder or the one above it. Anything else exits with a message.
    """
    if (path / META).is_file():
        return path
    inner = subfolders(path) if path.is_dir() else []
    if len(inner) == 1 and (inner[0] / META).is_file():
        return inner[0]
    raise SystemExit(f"{META} not found in {path} or in its only subfolder: "
                     f"pass the unzipped Gradescope export")


def load_yaml(path: Path):
    """``path`` parsed by yaml.safe_load; a missing or malformed file exits naming it."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} not found: pass the unzipped Gradescope export") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SystemExit(f"{path} is not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None


def as_text(value) -> str:
    """A metadata value as text: sids may be numbers, absent values are empty."""
    return "" if value is None else str(value)


def submitters(entry) -> list[dict]:
    """[{"name", "sid", "email"}] from one submission's entry; its other keys (:results:...) are ignored."""
    people = entry.get(":submitters") if isinstance(entry, dict) else None
    return [{k: as_text(p.get(f":{k}")) for k in ("name", "sid", "email")}
            for p in people or [] if isinstance(p, dict)]


def read_metadata(path: Path) -> dict:
    """{submission folder: [{"name", "sid", "email"}]} from Gradescope's submission_metadata.yml.

    Only each submission's ``:submitters:`` are read. Exits with a message when
    the file is missing, is not valid YAML or lists no submissions.
    """
    data = load_yaml(path)
    if not isinstance(data, dict) or not data:
        raise SystemExit(f"{path} lists no submissions: pass the unzipped Gradescope export")
    return {str(folder): submitters(entry) for folder, entry in data.items()}


def number(value):
    """A score from the metadata as a float, or None."""
    try:
        return None if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        return None


def gradescope_scores(path: Path) -> dict:
    """{submission folder: (Gradescope's score, {item number: its points there})} from the export's metadata:
    each submission's ``:score:`` and the tests of its ``:results:`` (None and {} where absent)."""
    data = load_yaml(path)
    out = {}
    for folder, entry in (data or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        results = entry.get(":results") if isinstance(entry.get(":results"), dict) else {}
        items = {}
        for t in results.get("tests") or []:
            if isinstance(t, dict) and number(t.get("score")) is not None and t.get("number") not in (None, "0"):
                item = str(t["number"]).split(".")[0]
                items[item] = items.get(item, 0.0) + number(t["score"])
        score = number(entry.get(":score"))
        out[str(folder)] = (score if score is not None else number(results.get("score")), items)
    return out


def warn(message: str):
    print(f"warning: {message}", file=sys.stderr)


def submissions(export: Path) -> list[tuple[str, Path, list]]:
    """(folder name, folder, submitters) for every submission folder of the export.

    A folder the metadata does not list is graded all the same (no name, sid or
    email); a listed submission without a folder cannot be, but keeps its place, with
    ``None`` for its folder, so that its students still get a CSV row saying so. Both
    are warned about.
    """
    meta = read_metadata(export / META)
    folders = subfolders(export)
    on_disk = {p.name for p in folders}
    for name in sorted(on_disk - set(meta)):
        warn(f"{name} is not in {META}: graded, with no name, sid or email")
    for name in sorted(set(meta) - on_disk):
        warn(f"{META} lists {name} but {export} has no such folder: not graded")
    found = [(p.name, p, meta.get(p.name, [])) for p in folders]
    return sorted(found + [(name, None, meta[name]) for name in set(meta) - on_disk], key=lambda s: s[0])
