"""Kueue: the condition an older release set on JobSets Kueue could not admit, cleared.

Kueue admits a queued JobSet by patching it from upstream JobSet's Go types, which leave empty
lists and zero values out and add ``resources: {}``. Earlier builds compared a suspended
JobSet's pod templates exactly, refused that patch, and said so with ``KueueIncompatible=True``
(``EmptyListsInPodTemplate``). The rules now compare templates as upstream does
(:mod:`controller.api.semantic`), so the patch is accepted: a JobSet that still carries the
condition gets it set to False once, and no JobSet gets it anew. Pure.
"""

from __future__ import annotations

CONDITION = "KueueIncompatible"
REASON_COMPATIBLE = "Compatible"
MESSAGE_COMPATIBLE = (
    "the admission rules compare pod templates as upstream JobSet does (an empty list equals an "
    "absent one), so Kueue's admission patch is accepted"
)
