"""Where the benchmark scripts write their results: sections of ``docs/benchmarks.md``.

Each script owns one section between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``
markers and replaces it whole, so the document always shows each script's latest run.
"""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of section ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(name: str, text: str, path: Path = DOC) -> None:
    """Replace section ``name`` of ``path`` with ``text`` (which carries the markers), or
    append it when the document has no such section yet."""
    begin, end = markers(name)
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        updated = head + text + rest.split(end, 1)[1]
    else:
        updated = current.rstrip("\n") + "\n\n" + text + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(updated)
