"""The real node's guardian: cleans up the host at once when the process that started the node
(the launcher) dies without stopping it: ``kill -9``, an OOM kill, a crash.

The launcher's children die with it (``PR_SET_PDEATHSIG``): containerd, the kubelet, CoreDNS, the
registry. The shims and the containers do not: containerd starts each shim as a daemon, so it is
re-parented to PID 1 and its containers run on, with their mounts, the bridge, the ``kubepods``
cgroups, the kubelet's iptables chains and the sysctls it changed. :class:`RealNode` starts this
process without ``PR_SET_PDEATHSIG``, in a session of its own, right after it took the host lock
and saved ``host-state.json``. It waits for one of two things:

- the launcher writes ``stopped`` on the pipe (``--stop-fd``): the node stopped cleanly, exit;
- the launcher dies (its pidfd becomes readable, or the pipe reaches end of file): kill what is
  left of the node, unmount, delete the bridge and cgroups, restore the host
  (:func:`localcluster.node.host.clean_host`), exit.

It holds the host lock (``--lock-fd``, the launcher's descriptor, inherited: the same open file
description, so the lock stays taken while either holds it) until then, so that the next real
node on this host starts on a clean host. If even the guardian is killed, the next start on the
same state directory cleans up (``RealNode.recover``).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time
from pathlib import Path

from localcluster.node.host import clean_host


def _say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message.strip()}", flush=True)


def _stopped_cleanly(stop_fd: int) -> bool:
    """Did the launcher write ``stopped`` before it went away? (Never blocks.)"""
    os.set_blocking(stop_fd, False)
    try:
        return os.read(stop_fd, 64).startswith(b"stopped")
    except BlockingIOError:
        return False  # nothing written, and a copy of the write end lives on somewhere


def _wait_for_launcher(launcher: int, stop_fd: int) -> None:
    """Return once the launcher has written on the pipe, closed it, or died."""
    try:
        pidfd = os.pidfd_open(launcher)
    except ProcessLookupError:
        return
    # Started by the launcher, we are its child until it dies (then PID 1 or a subreaper
    # adopts us): a launcher that died before pidfd_open is seen here, not missed.
    if os.getppid() != launcher:
        return
    select.select([pidfd, stop_fd], [], [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.guardian", description=__doc__)
    parser.add_argument("--launcher", type=int, required=True, help="the pid to watch")
    parser.add_argument("--stop-fd", type=int, required=True, help="read end of the stop pipe")
    parser.add_argument("--lock-fd", type=int, required=True, help="the host lock, held to exit")
    parser.add_argument("directory", type=Path, help="the node's directory")
    args = parser.parse_args(argv)
    # A session of our own: no terminal signal reaches us; a SIGHUP (a closed session) must not
    # end us before the cleanup either.
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    _say(f"guarding the node in {args.directory} for pid {args.launcher}")
    _wait_for_launcher(args.launcher, args.stop_fd)
    if _stopped_cleanly(args.stop_fd):
        _say("the node was stopped cleanly; nothing to do")
        return 0
    began = time.monotonic()
    _say(f"pid {args.launcher} died without stopping the node: cleaning up the host")
    clean_host(args.directory, _say)
    # The host lock is released by our exit, not before: whoever waits for it (the next node,
    # a test checking that nothing is left) must not find this process still there.
    _say(f"host cleaned up in {time.monotonic() - began:.1f}s; exiting releases the host lock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
