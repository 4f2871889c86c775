"""Feature gates: upstream JobSet's alpha features, off by default as upstream.

Upstream checks its gates in its webhook and its controller. Here admission is the CRD's schema and
CEL rules, which cannot read a flag: a gate that changes what the API server accepts is therefore
baked into the CRD when it is generated (``make crd`` writes the default CRD, every gate off, to
``manifests/crd/`` and one with every alpha gate on to
``manifests/components/alpha-features/``), and the controller's
``--feature-gates`` flag must name the same gates as the installed CRD (a JobSet that uses a
feature the controller's gates leave off gets a condition and an Event, never silence). The CRD
records its gates in the annotation ``CRD_ANNOTATION``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

RESTART_JOB = "RestartJob"
ELASTIC_JOBSET = "ElasticJobSet"
# Upstream's gate for in-place restarts: known, so that naming it gets a precise refusal.
IN_PLACE_RESTART = "InPlaceRestart"

CRD_ANNOTATION = "jobset.sigs.k8s.io/feature-gates"


class FeatureGateError(ValueError):
    """A --feature-gates value this controller cannot honour; the message says why."""


@dataclass(frozen=True)
class FeatureGates:
    """The state of every gate this controller knows (``_FIELDS`` maps upstream's names)."""

    restart_job: bool = False
    elastic_jobset: bool = False

    def enabled(self, name: str) -> bool:
        return bool(getattr(self, _FIELDS[name]))

    def flag(self) -> str:
        """The ``--feature-gates`` value naming every gate, e.g. ``ElasticJobSet=false,...``."""
        return ",".join(f"{name}={str(self.enabled(name)).lower()}" for name in sorted(_FIELDS))


# Upstream's gate name → the field above.
_FIELDS = {RESTART_JOB: "restart_job", ELASTIC_JOBSET: "elastic_jobset"}
assert set(_FIELDS.values()) == {f.name for f in fields(FeatureGates)}

DEFAULT = FeatureGates()
ALPHA = FeatureGates(restart_job=True, elastic_jobset=True)


def parse(text: str) -> FeatureGates:
    """``RestartJob=true,ElasticJobSet=false`` → FeatureGates; unnamed gates keep their default."""
    values: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip().lower()
        if not sep or raw not in ("true", "false"):
            raise FeatureGateError(f"expected Name=true or Name=false, got {item!r}")
        if name == IN_PLACE_RESTART:
            if raw == "true":
                raise FeatureGateError(
                    "InPlaceRestart is not supported: this controller restarts a JobSet by "
                    "recreating its Jobs (restartStrategy Recreate or BlockingRecreate)"
                )
            continue
        if name not in _FIELDS:
            known = ", ".join(sorted([*_FIELDS, IN_PLACE_RESTART]))
            raise FeatureGateError(f"unknown feature gate {name!r} (known: {known})")
        if _FIELDS[name] in values:
            raise FeatureGateError(f"feature gate {name} is given twice")
        values[_FIELDS[name]] = raw == "true"
    return FeatureGates(**values)
