"""Child processes of the local control plane: start, wait until ready, stop, never orphan.

Every child is started with ``PR_SET_PDEATHSIG = SIGKILL``, so if the launcher itself dies (even by
``kill -9``) the kernel kills its children: no etcd or kube-apiserver is ever left behind.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

_PR_SET_PDEATHSIG = 1


class LaunchError(RuntimeError):
    """The control plane could not start; the message names what failed and how to fix it."""


def run_tool(
    argv: Sequence[str], *, what: str, timeout: float, input_text: str | None = None
) -> str:
    """Run a command-line client to completion; its stdout, or ``LaunchError`` with its stderr."""
    result = subprocess.run(
        list(argv), input=input_text, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise LaunchError(f"{what} failed: {result.stderr.strip()}")
    return result.stdout


# What the API server answers when it could not finish a request in its deadline (60 s): on the
# 2-core test machine, with four test groups at once, an apply of the JobSet admission policy
# (about 4 CPU-seconds of CEL type-checking in the API server) can take longer. Idempotent writes
# (apply) are simply sent again.
SERVER_TIMEOUT = "request did not complete within requested timeout"
APPLY_ATTEMPTS = 3


def run_apply(
    argv: Sequence[str], *, what: str, timeout: float, input_text: str | None = None
) -> str:
    """``run_tool`` for an idempotent ``kubectl apply``: sent again when the API server timed
    out (``SERVER_TIMEOUT``), up to ``APPLY_ATTEMPTS`` times."""
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        try:
            return run_tool(argv, what=what, timeout=timeout, input_text=input_text)
        except LaunchError as err:
            if SERVER_TIMEOUT not in str(err) or attempt == APPLY_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


class StopSignal(Exception):
    """SIGTERM or SIGHUP arrived (see :func:`stop_on_signals`)."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise StopSignal(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP :class:`StopSignal`, whatever was
    inherited, so that a program unwinds into its cleanup (stopping what it started).

    SIGINT explicitly too: a program started from a background job (``make test &`` in a script,
    any ``&`` of a non-interactive shell) inherits SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler: Ctrl-C or ``kill -INT`` would do nothing and leave every process
    of the control plane running.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGHUP, _raise_stop)


def die_with_parent() -> None:
    """``PR_SET_PDEATHSIG = SIGKILL``: a ``preexec_fn``, run in the child between fork and exec."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# Listening ports are drawn below Linux's ephemeral range (32768-60999 by default): a port the
# kernel picks for bind(0) is free only until something else asks, and every outgoing connection
# takes one from that range too, so two components of one cluster could be handed the same port
# (seen: kube-scheduler refused "address already in use" on the kube-apiserver's port). A random
# port outside it, never handed out twice by this process, that binds right now, is not.
_LISTEN_PORTS = range(20000, 32768)
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A port on 127.0.0.1 that is free now and that this process has not handed out before."""
    with _handed_out_lock:
        for _ in range(1000):
            port = random.choice(_LISTEN_PORTS)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise LaunchError(
        f"no free port on 127.0.0.1 between {_LISTEN_PORTS.start} and {_LISTEN_PORTS.stop - 1} "
        f"after 1000 tries ({len(_handed_out)} handed out by this process)"
    )


def ensure_port_free(port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as err:
            raise LaunchError(
                f"port {port} on 127.0.0.1, asked for {what}, is already in use ({err.strerror}). "
                f"Stop whatever listens there (`ss -ltnp 'sport = :{port}'` shows it) or choose "
                "another port, or pass 0 to pick a free one."
            ) from err


@dataclass
class ManagedProcess:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    # Only for a process that must outlive us (the real node's guardian, which cleans up after
    # our death): no PR_SET_PDEATHSIG, a session of its own (a terminal's Ctrl-C or a kill of our
    # process group does not reach it), and the descriptors it inherits.
    outlives_us: bool = False
    pass_fds: tuple[int, ...] = ()
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        # PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process:
        # a child started from a short-lived thread (asyncio.to_thread, a thread pool) would be
        # killed when that thread goes away. Only the main thread lives as long as we do.
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(f"start {self.name} from the main thread (see PR_SET_PDEATHSIG)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self.popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    preexec_fn=None if self.outlives_us else die_with_parent,
                    start_new_session=self.outlives_us,
                    pass_fds=self.pass_fds,
                )
            except OSError as err:
                raise LaunchError(f"could not start {self.name} ({self.argv[0]}): {err}") from err

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after the grace period; always reaps the child."""
        proc = self.popen
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.popen = None

    def kill(self) -> None:
        """SIGKILL at once (for tests that simulate a crash)."""
        proc = self.popen
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self.popen = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(f"    {line}" for line in text[-lines:])


def tls_client_context(
    ca: Path | None = None, cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    """A client TLS context trusting ``ca`` (None: any certificate, for the components' own
    self-signed serving certificates), presenting ``cert`` (certificate, key) if given."""
    if ca is not None:
        context = ssl.create_default_context(cafile=str(ca))
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def https_get(
    url: str,
    *,
    ca: Path | None = None,
    cert: tuple[Path, Path] | None = None,
    timeout: float = 2.0,
) -> tuple[int, str]:
    """GET an URL, returning (status, body); (0, error) when nothing answered."""
    context = tls_client_context(ca, cert) if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as err:
        return 0, str(err)


def wait_ready(
    process: ManagedProcess,
    probe: Callable[[], tuple[int, str]],
    timeout: float,
    report: Callable[[str], None],
) -> None:
    """Poll ``probe`` until it returns 200; fail fast if the process exits meanwhile."""
    started = time.monotonic()
    last: tuple[int, str] = (0, "")
    next_report = started + 10
    while time.monotonic() - started < timeout:
        if not process.running():
            code = process.popen.returncode if process.popen else None
            raise LaunchError(
                f"{process.name} exited with code {code} while starting. Last lines of "
                f"{process.log_path}:\n{process.log_tail()}"
            )
        last = probe()
        if last[0] == 200:
            return
        now = time.monotonic()
        if now >= next_report:
            next_report = now + 10
            report(f"  waiting for {process.name} ({now - started:.0f}s) ...")
        time.sleep(0.2)
    raise LaunchError(
        f"{process.name} did not become ready within {timeout:.0f}s (last answer: "
        f"{last[0]} {last[1][:200]!r}). Last lines of {process.log_path}:\n{process.log_tail()}"
    )


def stop_all(processes: Sequence[ManagedProcess]) -> None:
    """Stop in reverse start order, so clients go before the servers they talk to."""
    for process in reversed(processes):
        process.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
