"""Where the controller's CPU goes: a summary of a py-spy profile (collapsed stacks).

    .venv/bin/python bench/bench_compare.py --rows ours --sizes 100 --py-spy /tmp/prof
    .venv/bin/python bench/profile_summary.py /tmp/prof/ours-b-100.txt [--top 30]

py-spy's ``raw`` format is one line per distinct stack, ``frame;frame;...;frame count``, root
first, each frame ``function (file:line)``; idle threads are left out, so the samples are the
time the process was on a CPU (or holding the GIL). Each sample goes to the innermost frame that
matches a category (``CATEGORIES``, first match wins at a frame), else to "other". Also printed:
the functions with the most samples inclusive (anywhere on the stack) and self (the leaf).
Samples in the event loop's ``epoll_wait`` are idle time py-spy does not recognise as such: they
are counted apart and left out of every share.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# (category, pattern on one frame "function (file:line)"). The innermost matching frame of a
# stack decides; at one frame the first pattern that matches.
CATEGORIES: tuple[tuple[str, str], ...] = (
    (IDLE := "waiting in epoll (idle)", r"^(EpollSelector\.)?select \(.*selectors\.py"),
    ("JSON decoding (watch events, responses)",
     r"^(loads|decode|raw_decode) \(.*json/|^decode \(controller/runtime/client\.py"),
    ("logging (structlog)", r"\((.*/)?structlog/"),
    ("metrics (prometheus_client)", r"\((.*/)?prometheus_client/"),
    ("deep copies", r"^deepcopy \(|\(.*copy\.py:"),
    ("informer/cache updates", r"\(controller/runtime/(informer|store)\.py"),
    ("work queue", r"\(controller/runtime/(workqueue|ratelimit|clock)\.py"),
    ("status comparison / pacing", r"\(controller/jobset/(status|pacing)\.py"),
    ("building desired objects", r"\(controller/jobset/(construct|render)\.py"),
    ("decide (planning)", r"\(controller/jobset/(decide|children|suspend|startup|success|failure|"
     r"elastic|ttl|writefailures|expectations|placement)\.py"),
    ("volumes (planning)", r"\(controller/jobset/volumes/"),
    ("parsing the JobSet", r"\(controller/jobset/(model|invalid)\.py"),
    ("reconciler glue", r"\(controller/jobset/(reconciler|preflight|setup|wanted)\.py"),
    ("events recorder", r"\(controller/runtime/events\.py"),
    ("HTTP client (ours + kubernetes_asyncio + aiohttp)",
     r"\(controller/runtime/client\.py|\((.*/)?(kubernetes_asyncio|aiohttp|yarl|multidict|ssl)"
     r"(/|\.py)"),
    ("asyncio event loop", r"\((.*/)?asyncio/|selectors\.py"),
)  # fmt: skip

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in CATEGORIES)


def read_stacks(path: Path) -> Iterator[tuple[list[str], int]]:
    for line in path.read_text(errors="replace").splitlines():
        found = _LINE.match(line.strip())
        if found:
            yield found["stack"].split(";"), int(found["count"])


def _short(frame: str) -> str:
    """``function (file:line)`` with site-packages and the repository's root cut off."""
    return re.sub(r"\(.*?(site-packages/|/wt-[^/]+/|/main/)", "(", frame)


def category(stack: list[str]) -> str:
    for frame in reversed(stack):
        short = _short(frame)
        for name, pattern in _COMPILED:
            if pattern.search(short):
                return name
    return "other"


def _function(frame: str) -> str:
    """A frame without its line number: ``function (file)``."""
    return re.sub(r":\d+\)$", ")", _short(frame))


def summarise(path: Path, top: int) -> str:
    by_category: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for stack, count in read_stacks(path):
        total += count
        kind = category(stack)
        by_category[kind] += count
        if kind == IDLE:
            continue
        for function in {_function(f) for f in stack}:
            inclusive[function] += count
        leaf[_function(stack[-1])] += count
    if not total:
        return f"{path}: no samples\n"
    idle = by_category.pop(IDLE, 0)
    out = [
        f"{path}: {total} samples, {idle} of them waiting in epoll (py-spy counts a thread in"
        f" that syscall as active); shares below are of the other {total - idle}",
        "",
        "by category:",
    ]
    total -= idle
    out += [f"  {100 * c / total:5.1f}%  {name}" for name, c in by_category.most_common()]
    out += ["", f"top {top} inclusive:"]
    out += [f"  {100 * c / total:5.1f}%  {name}" for name, c in inclusive.most_common(top)]
    out += ["", f"top {top} self:"]
    out += [f"  {100 * c / total:5.1f}%  {name}" for name, c in leaf.most_common(top)]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profiles", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    for path in args.profiles:
        sys.stdout.write(summarise(path, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
