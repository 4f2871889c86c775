"""A controller manager run beside a local control plane whose admission webhooks call it back
(Kueue's, Kubeflow Trainer's): what starting and stopping one has in common.

Its webhook configurations point at the local process by URL with ``failurePolicy: Fail``, so
they go before the process does: a webhook nobody answers would refuse every later write of the
objects it covers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import yaml

from localcluster.controlplane import ControlPlane
from localcluster.processes import ManagedProcess


@dataclass
class WebhookedManager:
    """One such manager for one local cluster; subclasses name their webhook configurations and
    start it (their ``start``)."""

    # The names of its Mutating- and ValidatingWebhookConfiguration.
    MUTATING: ClassVar[str]
    VALIDATING: ClassVar[str]

    cluster: ControlPlane
    report: Callable[[str], None]
    process: ManagedProcess | None = None
    webhook_port: int = 0
    health_port: int = 0

    def apply(self, objects: list[dict[str, Any]]) -> None:
        """Server-side apply, as ``kubectl apply --server-side`` (large CRDs need it)."""
        self.cluster.kubectl(
            "apply", "--server-side", "-f", "-", input_text=yaml.safe_dump_all(objects)
        )

    def stop(self) -> None:
        """Webhook configurations first, then the manager (the cluster goes on without it;
        ``start`` brings it back)."""
        self.remove_webhooks()
        if self.process is not None:
            self.process.stop()
            if self.process in self.cluster.processes:
                self.cluster.processes.remove(self.process)
            self.process = None

    def remove_webhooks(self) -> None:
        """Delete the webhook configurations (before the manager stops)."""
        self.cluster.kubectl(
            "delete",
            "--ignore-not-found",
            f"mutatingwebhookconfiguration/{self.MUTATING}",
            f"validatingwebhookconfiguration/{self.VALIDATING}",
        )
