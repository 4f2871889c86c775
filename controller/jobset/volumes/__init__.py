"""Volumes: the claims a JobSet needs, how its Jobs mount them, who owns them, what to keep.

One module per concern, all pure (the reconciler performs the writes):

- ``model``: the parsed policies' data and the names of the labels and annotations we write;
- ``spec``: parsing and validating the JobSet's policies into a ``VolumeModel``, once;
- ``desired``: claim names and objects, and the pod volumes that mount them;
- ``podscope``: the placeholder claim name of Pod scope and its resolution (admission policy);
- ``admission``: that admission policy as shipped, and whether the installed one can work;
- ``observed``: typed, frozen views of existing claims and storage classes;
- ``ownership``: which claims are the JobSet's, which it may adopt (with proof), the patches;
- ``annotations``: the user's adopt-claims and replace-lost-claims entries, and which are rejected;
- ``record``: the uids of the claims the JobSet had, kept in its status;
- ``lifecycle``: each desired claim's state and the writes of this pass, retention included;
- ``gating``: what the claims allow the Jobs: to be created, resumed, resized, or kept running;
- ``snapshots``: retention to a VolumeSnapshot, pruning to historyLimit, restore from one;
- ``deletion``: retention when the JobSet is deleted, read from the stored object whatever its
  spec (deletion must not depend on parsing it);
- ``status``: what the status and conditions say about the claims;
- ``io``: the reads of the caches and the claim writes a reconcile pass makes for them.

The package exports what the rest of the controller uses (``__all__``); anything else is
imported from the module that defines it.
"""

from __future__ import annotations

from controller.jobset.volumes.lifecycle import VolumePlan
from controller.jobset.volumes.model import FINALIZER, POD_SCOPE_LABEL
from controller.jobset.volumes.observed import ClaimView, StorageClasses, views
from controller.jobset.volumes.snapshots import Snapshots
from controller.jobset.volumes.spec import VolumeModel, model
from controller.jobset.volumes.storage import Storage, storage

__all__ = [
    "FINALIZER",
    "POD_SCOPE_LABEL",
    "ClaimView",
    "Snapshots",
    "Storage",
    "StorageClasses",
    "VolumeModel",
    "VolumePlan",
    "model",
    "storage",
    "views",
]
