"""What the parts that run beside a local control plane need of it: :class:`ControlPlane`.

The real node (``localcluster/node``), Kueue (``kueue.py``), Trainer (``trainer.py``), the
JobSet API installer (``jobsetapi.py``), upstream JobSet's manager (``upstreamjobset.py``) and
the smoke run (``smoke.py``) take a ``ControlPlane``, not a
:class:`localcluster.cluster.LocalCluster`: ``cluster.py`` starts them, so they must not import
it back. ``LocalCluster`` has every member (mypy checks it where ``cluster.py`` passes itself to
them). The layers, one way:

    __main__, demo, nodecheck  ->  cluster  ->  node, kueue, trainer, jobsetapi  ->  controlplane

(Kueue's and Trainer's managers share ``webhooked.WebhookedManager``.)

``tests/unit/test_layering.py`` keeps ``localcluster`` free of import circles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from localcluster import pki as pkimod
from localcluster.processes import ManagedProcess, ensure_port_free, free_port


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @staticmethod
    def allocate(apiserver: int = 0) -> Ports:
        if apiserver:
            ensure_port_free(apiserver, "kube-apiserver")
        return Ports(
            etcd_client=free_port(),
            etcd_peer=free_port(),
            apiserver=apiserver or free_port(),
            controller_manager=free_port(),
            scheduler=free_port(),
            kwok=free_port(),
        )


class ControlPlane(Protocol):
    """A local control plane, started or starting (its API server answers)."""

    @property
    def state_dir(self) -> Path:
        """Its directory: logs under ``logs/``, a part's own files in a directory of its own."""
        ...

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig."""
        ...

    @property
    def server(self) -> str:
        """The API server's URL (``https://127.0.0.1:<port>``)."""
        ...

    @property
    def ports(self) -> Ports | None:
        """Its components' ports (None before it starts)."""
        ...

    @property
    def pki(self) -> pkimod.Pki:
        """Its CA, to issue client and serving certificates from."""
        ...

    @property
    def processes(self) -> list[ManagedProcess]:
        """The processes it stops when it stops (``start_process`` adds to them)."""
        ...

    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        """Run kubectl as the admin; its output (``LaunchError`` if it fails)."""
        ...

    def start_process(self, process: ManagedProcess, probe: Callable[[], tuple[int, str]]) -> None:
        """Start one more process of the control plane (stopped with it) and wait for ``probe``."""
        ...
