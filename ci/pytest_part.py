#!/usr/bin/env python3
"""Split tests/python into N parts of about equal GPU time, for ci/gpu.sh's TETHER_PYTEST_PART.

    ci/pytest_part.py K N [TEST_DIR]         print the test files of part K of N, one per line
    ci/pytest_part.py --times-from JUNIT...  print a new ci/gpu_pytest_seconds.txt from junit files

Each file weighs what ci/gpu_pytest_seconds.txt says its tests took (0 for a file without GPU
tests; a file it does not name, a new one, weighs the median of its files that took any time);
the files go,
heaviest first, each to the part with the least weight so far (ties: the lower part), which
makes every part's weight at most the even share plus the heaviest file. The order is fixed by
the weights and names alone, so every call of a run computes the same parts.
"""

from __future__ import annotations

import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECONDS = ROOT / "ci" / "gpu_pytest_seconds.txt"
HEADER = """\
# Seconds that each file's gpu-marked tests took in a GPU run (pytest -m gpu, junit times; 0.0:
# no GPU tests): ci/pytest_part.py balances TETHER_PYTEST_PART by them. Refresh from a run's
# pytest-junit*.xml with: ci/pytest_part.py --times-from $OUT/pytest-junit*.xml
"""


def read_seconds(path: Path = SECONDS) -> dict[str, float]:
    """{file name: seconds} from a seconds file ("SECONDS NAME" lines, '#' comments)."""
    seconds: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            value, name = line.split(None, 1)
            seconds[name.strip()] = float(value)
    return seconds


def parts(files: list[str], seconds: dict[str, float], n: int) -> list[list[str]]:
    """The files (names) in n parts of about equal weight; each part sorted by name."""
    if n < 1:
        raise ValueError(f"N must be at least 1, not {n}")
    timed = [s for s in seconds.values() if s > 0]
    typical = statistics.median(timed) if timed else 1.0
    weight = {f: seconds.get(f, typical) for f in files}
    load = [0.0] * n
    out: list[list[str]] = [[] for _ in range(n)]
    for f in sorted(files, key=lambda f: (-weight[f], f)):
        k = min(range(n), key=lambda i: (load[i], i))
        out[k].append(f)
        load[k] += weight[f]
    return [sorted(p) for p in out]


def times_from(junit_files: list[str], test_dir: Path = ROOT / "tests" / "python") -> str:
    """A seconds file's text: each test file's total junit time (0.0 for one of test_dir's files
    that the junit files do not name: it has no GPU tests)."""
    total: dict[str, float] = {p.name: 0.0 for p in test_dir.glob("test_*.py")}
    for junit in junit_files:
        for case in ET.parse(junit).getroot().iter("testcase"):
            module = next((p for p in case.get("classname", "").split(".") if p.startswith("test_")), None)
            if module is not None:
                name = module + ".py"
                total[name] = total.get(name, 0.0) + float(case.get("time", 0.0))
    rows = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    return HEADER + "".join(f"{s:.1f} {name}\n" for name, s in rows)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--times-from":
        sys.stdout.write(times_from(argv[1:]))
        return 0
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        k, n = int(argv[0]), int(argv[1])
    except ValueError:
        print(f"pytest_part.py: K and N must be whole numbers, not {argv[0]!r} and {argv[1]!r}", file=sys.stderr)
        return 2
    if not 1 <= k <= n:
        print(f"pytest_part.py: K must be between 1 and N ({n}), not {k}", file=sys.stderr)
        return 2
    test_dir = Path(argv[2]) if len(argv) == 3 else ROOT / "tests" / "python"
    files = sorted(p.name for p in test_dir.glob("test_*.py"))
    for name in parts(files, read_seconds(), n)[k - 1]:
        print(test_dir / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
