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


def cpu_times() -> tuple[int, int]:
    """(all CPU time, the time the hypervisor gave other guests: steal), in the clock
    ticks of Linux's ``/proc/stat``; (0, 0) where there is no such file."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return 0, 0
    ticks = [int(f) for f in fields[:8]]
    return sum(ticks), ticks[7] if len(ticks) > 7 else 0


def noise_note(start: tuple[int, int], end: tuple[int, int]) -> str:
    """A sentence on how busy the machine's other tenants kept it between two
    ``cpu_times`` readings: the stolen share of CPU time and the load average."""
    total, steal = end[0] - start[0], end[1] - start[1]
    if total <= 0:
        return ""
    import os

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"During the run the hypervisor gave {100 * steal / total:.1f} % of the CPU "
            f"time to other guests (steal); load average at the end {load:.2f}. On a "
            "machine shared with other tenants the (!) flags and the rounds' spread say "
            "how far a figure is to be trusted.")
