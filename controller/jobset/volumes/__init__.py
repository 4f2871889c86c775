"""Volumes: the claims a JobSet needs, how its Jobs mount them, who owns them, what to keep.

One module per concern, all pure but the edge (``watches``, ``io``; the reconciler orders the
writes):

- ``model``: the parsed policies' data and the names of the labels and annotations we write;
- ``spec``: parsing and validating the JobSet's policies into a ``VolumeModel``, once;
- ``desired``: claim names and objects, and the pod volumes that mount them;
- ``podscope``: the placeholder claim name of Pod scope and its resolution (admission policy);
- ``admission``: that admission policy as shipped, and whether the installed one can work;
- ``observed``: typed, frozen views of existing claims, storage classes and CSIDrivers;
- ``ownership``: which claims are the JobSet's, which it may adopt (with proof), the patches;
- ``annotations``: the user's adopt-claims and replace-lost-claims entries, and which are rejected;
- ``record``: the uids of the claims the JobSet had, kept in its status;
- ``lifecycle``: each desired claim's state and the writes of this pass, retention included;
- ``rejections``: why entries of those annotations were not accepted;
- ``gating``: what the claims allow the Jobs: to be created, resumed, resized, or kept running;
- ``attach``: whether a claim's storage attaches its volumes to a node (class, CSIDriver);
- ``singlenode``: keeping on one node the pods that share a ReadWriteOnce claim at once, where
  their storage attaches;
- ``snapshots``: retention to a VolumeSnapshot, pruning to historyLimit, restore from one;
- ``deletion``: retention when the JobSet is deleted, read from the stored object whatever its
  spec (deletion must not depend on parsing it);
- ``suspension``: retention while suspended, through a snapshot, and the resume from it;
- ``status``: what the status and conditions say about the claims;
- ``storage``: the one object ``decide`` asks (``storage(...)`` → ``Storage``);
- ``watches``: the informers the volumes read or watch, and which JobSets each event brings back;
- ``io``: the informers, the reads of the caches, the retention of a JobSet being deleted, and the
  claim and snapshot writes a reconcile pass makes (``VolumeIO``).

The rest of the controller uses only what the package exports (``__all__``), never a module of it
(``tests/unit/test_layering.py``): the model (``model`` → ``VolumeModel``); what a pass observes
(``ClaimView``, ``StorageClasses``, ``Snapshots``, and ``Blocked``: why Pod-scope pods cannot get
their claims now); the decisions (``storage`` → ``Storage``, whose ``plan`` is a ``VolumePlan``);
the edge (``VolumeIO``); the retention finalizer (``FINALIZER``); and a pod as the Pod-scope
admission policy admits it (``admitted_pod``, for ``render``). Decisions about the volumes are
made inside the package, behind those. The one exception is a generator: ``make crd`` writes the
shipped admission policy of ``admission`` into ``manifests/pod-scope/``
(``controller.api.admissiongen``).
"""

from __future__ import annotations

from controller.jobset.volumes.admission import Blocked
from controller.jobset.volumes.io import VolumeIO
from controller.jobset.volumes.lifecycle import VolumePlan
from controller.jobset.volumes.model import FINALIZER
from controller.jobset.volumes.observed import ClaimView, StorageClasses
from controller.jobset.volumes.podscope import admitted_pod
from controller.jobset.volumes.snapshots import Snapshots
from controller.jobset.volumes.spec import VolumeModel, model
from controller.jobset.volumes.storage import Storage, storage

__all__ = [
    "FINALIZER",
    "Blocked",
    "ClaimView",
    "Snapshots",
    "Storage",
    "StorageClasses",
    "VolumeIO",
    "VolumeModel",
    "VolumePlan",
    "admitted_pod",
    "model",
    "storage",
]
