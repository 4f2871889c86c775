"""Semantic equality of replicated jobs, as upstream JobSet's webhook compares them.

Upstream decodes both objects into its Go types and compares them with Kubernetes' semantic
equality (``equality.Semantic.DeepEqual``): an empty list equals an absent one, so does an empty
map, a scalar field that is not a pointer equals its zero value (``hostNetwork: false`` is no
``hostNetwork``), a struct field that is not a pointer equals ``{}`` (``resources: {}``), and
quantities compare by value (``1Gi`` equals ``1024Mi``). Clients that round-trip a JobSet
through those Go types write it back that way: Kueue's admission patch leaves ``env: []`` and
``hostNetwork: false`` out and adds ``resources: {}``. A rule that compared the JSON exactly
refused that patch, and the JobSet stayed suspended while its Workload said Admitted.

So the immutability rules compare replicated jobs after normalizing each value the way the Go
types decode it: ``normalized`` here, and its CEL twin ``cel_same`` in the rules. Each value is
read with its place, ``<parent>.<field>`` (the JSON names of the field and of the field holding
its object; list items are held by the list's field), whose class comes from the Go types
themselves (:mod:`controller.api.gofields`, generated):

- ``s``: zero (``false``, ``""``, ``0``) is absent;
- ``t`` and ``m``: ``{}`` (once normalized) is absent;
- ``Q``: a quantity, compared by value;
- anything else (pointers, which keep a zero value, and unknown names): compared as it is;
- empty lists are absent everywhere; lists become maps from index to item (an item is never
  dropped, so ``[{}]`` still differs from ``[]``).

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.api.gofields import CLASSES
from controller.jobset.quantity import quantity

# Where a replicated job's own fields sit (``spec.replicatedJobs[]``).
ROOT = "replicatedJobs"
# The map of classes, bound once in the CEL.
_TABLE = "F"


def place(path: str) -> tuple[str, str]:
    """A compared CEL path below a replicated job (``template.?spec.?parallelism``) as its place:
    (parent, field)."""
    parts = [p.removeprefix("?") for p in path.split(".")]
    return (parts[-2] if len(parts) > 1 else ROOT, parts[-1])


def _class(parent: str, name: str, classes: Mapping[str, str]) -> str:
    return classes.get(f"{parent}.{name}", classes.get(f"{parent}.*", ""))


def _zero(value: object) -> bool:
    return value is False or value == "" or (type(value) in (int, float) and value == 0)


def normalized(
    value: Any, parent: str, name: str, depth: int, classes: Mapping[str, str] = CLASSES
) -> Any:
    """``value`` (None: absent) as the Go types hold it at ``parent.name``, to ``depth`` levels
    of lists and objects (below that, as it is: the CEL cannot recurse)."""
    if value is None or depth == 0:
        return value
    kind = _class(parent, name, classes)
    if isinstance(value, list):
        if not value:
            return None
        return {i: normalized(v, parent, name, depth - 1, classes) for i, v in enumerate(value)}
    if isinstance(value, dict):
        out = {
            k: n
            for k, v in value.items()
            if (n := normalized(v, name, str(k), depth - 1, classes)) is not None
        }
        return None if not out and kind in ("t", "m") else out
    if kind == "s" and _zero(value):
        return None
    if kind == "Q":
        amount = quantity(value)
        return ("quantity", amount) if amount is not None else value
    return value


def same(new: Sequence[Any], old: Sequence[Any], paths: Sequence[str], depth: int) -> bool:
    """Whether two replicated jobs are semantically equal in ``paths``, given the values each
    holds there (None where absent): the twin of ``cel_same``."""

    def values(read: Sequence[Any]) -> list[Any]:
        return [
            normalized(value, *place(path), depth) for value, path in zip(read, paths, strict=True)
        ]

    return values(new) == values(old)


# ----------------------------------------------------------------------------- CEL


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table(classes: Mapping[str, str] = CLASSES) -> str:
    """The classes as a CEL map literal."""
    return "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in sorted(classes.items())) + "}"


def _level(t: str, depth: int) -> str:
    """CEL: the normalized value of the triple ``t`` = [value, parent, field], to ``depth``
    levels (the same steps as ``normalized``). Each level binds its values to fresh names
    (one-element comprehensions), so the text grows linearly with the depth."""
    if depth == 0:
        return f"{t}[0]"
    c, k, v, u, m, a, w = (f"{x}{depth}" for x in "ckvumaw")
    lookup = f"{_TABLE}[?({t}[1] + '.' + {t}[2])].orValue({_TABLE}[?({t}[1] + '.*')].orValue(''))"
    child = (
        f"[[{v}, type({k}) == string ? {t}[2] : {t}[1], type({k}) == string ? {k} : {t}[2]]]"
        f".map({u}, {_level(u, depth - 1)})[0]"
    )
    container = (
        f"[{t}[0].transformMap({k}, {v}, {child})]"
        f".map({m}, type({t}[0]) == map ? {m}.transformMap({a}, {w}, {w} != null, {w}) : {m})"
        f".map({m}, size({m}) == 0 && (type({t}[0]) == list || {c} in ['t', 'm'])"
        f" ? null : dyn({m}))"
        "[0]"
    )
    return (
        f"[{lookup}].map({c}, "
        f"{t}[0] == null ? null : "
        f"type({t}[0]) == list || type({t}[0]) == map ? {container} : "
        f"{c} == 's' && ({t}[0] == false || {t}[0] == '' || {t}[0] == 0) ? null : "
        f"{c} == 'Q' && isQuantity(string({t}[0])) ? quantity(string({t}[0])) : "
        f"{t}[0])[0]"
    )


def _triples(node: str, paths: Iterable[str]) -> str:
    out = []
    for path in paths:
        parent, name = place(path)
        if "?" in path:
            value = f"[{node}.{path}].map(o, o.hasValue() ? dyn(o.value()) : null)[0]"
        else:
            value = f"dyn({node}.{path})"
        out.append(f"[{value}, dyn({_quote(parent)}), dyn({_quote(name)})]")
    return "[" + ", ".join(out) + "]"


def cel_same(new: str, old: str, paths: Sequence[str], depth: int) -> str:
    """CEL: the replicated jobs ``new`` and ``old`` are semantically equal in ``paths`` (the
    twin of ``same``)."""
    normalize = f"L.map(t, {_level('t', depth)})"
    compare = (
        f"[[{_triples(new, paths)}, {_triples(old, paths)}].map(L, {normalize})]"
        ".all(R, R[0] == R[1])"
    )
    return f"[{table()}].all({_TABLE}, {compare})"
