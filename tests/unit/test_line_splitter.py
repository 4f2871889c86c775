"""The watch stream's line splitter: any cut of the stream into chunks gives the same lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.runtime.client import LineSplitter


def _split(chunks: list[bytes]) -> list[bytes]:
    splitter = LineSplitter()
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    rest = splitter.rest()
    return lines + ([rest] if rest is not None else [])


def test_events_across_and_within_chunks() -> None:
    assert _split([b'{"a":1}\n{"b"', b":2}\n", b'{"c":3}']) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert _split([b'{"a":1}\n\n  \n{"b":2}\n']) == [b'{"a":1}', b'{"b":2}']  # blanks dropped
    assert _split([b"{", b'"big"', b":", b"1}", b"\n"]) == [b'{"big":1}']
    assert _split([]) == [] and _split([b"\n", b" "]) == []


lines = st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b), max_size=20)


@given(lines, st.lists(st.integers(min_value=0, max_value=400), max_size=10), st.booleans())
def test_any_chunking_gives_the_lines_that_are_not_blank(
    events: list[bytes], cuts: list[int], final_newline: bool
) -> None:
    stream = b"\n".join(events) + (b"\n" if final_newline else b"")
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _split([c for c in chunks if c]) == [e for e in events if not e.isspace()]
