"""A real node next to the local control plane: containerd 2.x + runc + a kubelet (issue 13).

What :class:`RealNode` does (the ``node`` profile of :class:`LocalCluster` starts one after the
control plane, instead of KWOK's nodes, and stops it first):

- takes the host lock (``HOST_LOCK``: one real node per host), saves the host sysctls and the
  kubelet's iptables chains (``host-state.json``) and starts the guardian;
- makes the CNI bridge with the pods' gateway address, starts the local image registry
  (``localcluster.registry``: the locally built busybox and pause images; containerd's
  ``certs.d`` sends every docker.io and registry.k8s.io pull there, so unchanged manifests and the
  ``Always`` pull policy work) and CoreDNS on the gateway (``localcluster.dns``: the JobSets'
  headless Service names);
- writes a containerd 2.x configuration (version 3) with its own root, state and socket under the
  node's directory, the Debian ``runc`` as the only runtime (cgroupfs, no systemd), the Debian CNI
  plugins (``/usr/lib/cni``) and a conflist of ours (bridge + host-local + loopback);
- issues a ``system:node:<name>`` client certificate from the control plane's CA and starts the
  kubelet (cgroup v1 allowed with ``failCgroupV1: false``, cgroupfs, swap tolerated, webhook
  authentication/authorization, ``clusterDNS`` = the gateway, no host search domains);
- stops everything it started: the kubelet, every task and container in containerd's ``k8s.io``
  namespace, containerd, the registry and CoreDNS, then :func:`clean_host`: any shim naming our
  socket and any process in a ``kubepods`` cgroup killed, what is left under the node's directory
  unmounted (pods' netns included), the CNI bridge and the kubelet's ``kubepods`` cgroups and
  iptables chains deleted, the host sysctls the kubelet and the bridge plugin change restored.

If the launcher dies without stopping the node (``kill -9``), its children die with it
(``PR_SET_PDEATHSIG``) but shims and containers are re-parented and run on: the node's guardian
(``localcluster/guardian.py``, outliving the launcher on purpose) runs :func:`clean_host` at once.
If the guardian was killed too, the next start on the same state directory does
(:meth:`RealNode.recover`), before it deletes the directory. Proven by
``tests/node/test_node_lifecycle.py``.

The package, by concern (each module imports only the ones above it; none imports ``cluster.py``,
which starts the node, nor anything that does: the node takes a
:class:`localcluster.controlplane.ControlPlane`):

- ``host.py``: what the host must have (:func:`host_checks`, :func:`require_host`) and what a node
  leaves on it, undone (:class:`HostState`, :func:`clean_host`); the guardian needs only this;
- ``realnode.py``: the node's processes (:class:`RealNode`) and their binaries
  (:func:`node_binaries`: containerd, the kubelet and CoreDNS, in ``build.NODE_COMPONENTS``).

``python -m localcluster.nodecheck`` (``localcluster/nodecheck.py``, above ``cluster.py``) starts
the ``node`` profile, runs one busybox ``echo hello`` pod, prints its log, checks pod-to-pod
traffic by IP (``--pods N``: start latency over N pods, RSS) and stops it all. Docs:
docs/development.md, "The real node".
"""

from localcluster.node.host import (
    BRIDGE,
    HOST_LOCK,
    HOST_SYSCTLS,
    HostState,
    clean_host,
    host_checks,
    require_host,
)
from localcluster.node.realnode import GUARDIAN, NodeBinaries, RealNode, node_binaries

__all__ = [
    "BRIDGE",
    "GUARDIAN",
    "HOST_LOCK",
    "HOST_SYSCTLS",
    "HostState",
    "NodeBinaries",
    "RealNode",
    "clean_host",
    "host_checks",
    "node_binaries",
    "require_host",
]
