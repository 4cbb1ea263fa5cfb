"""Line up the harness logs of one `fuseci run` and say how the GPU's turns went.

Run the command with ``FUSECI_LOG=DEBUG`` (each harness log then starts with its clock, and says
when it took and gave back the GPU), then::

    python tools/gpu_timeline.py fuseci-out            # the run's --report-dir
    python tools/gpu_timeline.py fuseci-out --events   # and every line of every log, in order

It prints each turn on the GPU (start, end, length, process), the time the GPU was held, and
the time it sat idle between turns: what is left to win by overlapping more.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"fuseci-harness:\s+(\d+) ms (.*)")
CLOCK = re.compile(r"clock: (\d+(?:\.\d+)?) s since the epoch")


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the epoch
    process: str  # the log's name: ``<suite>.<harness|timing>``
    message: str


def events(report_dir: Path) -> list[Event]:
    """Every line of the harness logs in ``report_dir`` that carry a clock line, in time order."""
    found: list[Event] = []
    for log in sorted(report_dir.glob("*.log")):
        if log.name.endswith(".ncu.log"):
            continue
        rows = [
            (int(m.group(1)), m.group(2)) for m in map(LINE.match, log.read_text(errors="replace").splitlines()) if m
        ]
        start = next((float(c.group(1)) - ms / 1000 for ms, msg in rows if (c := CLOCK.match(msg))), None)
        if start is not None:
            found += [Event(start + ms / 1000, log.name.removesuffix(".log"), msg) for ms, msg in rows]
    return sorted(found, key=lambda e: e.at)


def turns(found: list[Event]) -> list[tuple[float, float, str]]:
    """Each turn on the GPU: (taken, given back, process)."""
    taken: dict[str, float] = {}
    out = []
    for e in found:
        if e.message == "GPU taken":
            taken[e.process] = e.at
        elif e.message == "GPU given back" and e.process in taken:
            out.append((taken.pop(e.process), e.at, e.process))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--events", action="store_true", help="print every log line, in time order")
    args = parser.parse_args(argv)
    found = events(args.report_dir)
    held = turns(found)
    if not held:
        print(f"{args.report_dir}: no harness log with turns on the GPU (run with FUSECI_LOG=DEBUG)", file=sys.stderr)
        return 1
    t0 = found[0].at
    if args.events:
        for e in found:
            print(f"{e.at - t0:8.3f}  {e.process:28s} {e.message}")
        print()
    for a, b, who in held:
        print(f"{a - t0:8.3f} {b - t0:8.3f} {b - a:6.2f}  {who}")
    busy = sum(b - a for a, b, _ in held)
    idle = sum(max(0.0, held[i + 1][0] - held[i][1]) for i in range(len(held) - 1))
    print(
        f"GPU held {busy:.2f} s in {len(held)} turns, idle {idle:.2f} s between them; first taken "
        f"{held[0][0] - t0:.2f} s after the first harness started, last given back at {held[-1][1] - t0:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
