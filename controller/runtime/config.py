"""What the runtime reads of the process's configuration: its own contract, not the app's.

The manager (API client, leader election, metrics and health servers, informers, workers) reads
these attributes and nothing else; the app's ``controller.config.Config`` has them (and more that
only the app's controllers read), so it satisfies the protocol as it is. A program other than
this controller, a test's sample controller for one, passes any object that has them.
"""

from __future__ import annotations

from typing import Protocol


class RuntimeConfig(Protocol):
    @property
    def kubeconfig(self) -> str | None: ...  # None: in-cluster service account
    @property
    def service_account_dir(self) -> str: ...
    @property
    def identity(self) -> str: ...  # this replica's: the Lease holder, the User-Agent's suffix
    @property
    def namespaces(self) -> tuple[str, ...]: ...  # () for every namespace
    @property
    def workers(self) -> int: ...
    @property
    def kube_api_qps(self) -> float: ...
    @property
    def kube_api_burst(self) -> int: ...
    @property
    def leader_elect(self) -> bool: ...
    @property
    def leader_election_id(self) -> str: ...
    @property
    def leader_election_namespace(self) -> str: ...
    @property
    def lease_duration(self) -> float: ...
    @property
    def renew_deadline(self) -> float: ...
    @property
    def retry_period(self) -> float: ...
    @property
    def metrics_bind_address(self) -> str: ...
    @property
    def health_probe_bind_address(self) -> str: ...
    @property
    def metrics_secure(self) -> bool: ...
    @property
    def metrics_cert_path(self) -> str: ...
    @property
    def metrics_cert_name(self) -> str: ...
    @property
    def metrics_cert_key(self) -> str: ...
    @property
    def metrics_auth(self) -> bool: ...
    @property
    def tls_min_version(self) -> str: ...  # VersionTLS12 or VersionTLS13
    @property
    def tls_cipher_suites(self) -> tuple[str, ...]: ...  # Go's names; () for OpenSSL's defaults
    @property
    def shutdown_timeout(self) -> float: ...

    def address(self, value: str) -> tuple[str, int] | None:
        """``host:port`` → (host, port); None disables the endpoint."""
        ...
