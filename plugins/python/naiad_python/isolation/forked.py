"""The server's side of the template process (:mod:`naiad_python.isolation.template`): asking it for
workers, and a handle on each worker it forked that behaves as ``subprocess.Popen`` does for what
the instance needs (``pid``, ``poll``, ``wait``, ``kill``), its exit status relayed by the template.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import Future

from naiad_python.isolation.channel import Channel, ChannelClosed

_log = logging.getLogger("naiad.python")

FORK_TIMEOUT_S = 30.0


class ForkedWorker:
    """A worker the template forked: its pid, and its exit status once the template reported it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status (``-N``: killed by signal N); ``subprocess.TimeoutExpired`` after ``timeout``."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"python worker {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def ended(self, status: int) -> None:
        self.returncode = status
        self._ended.set()


class Template:
    """One running template process and the workers it forked."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [sys.executable, "-m", "naiad_python.isolation.template", str(theirs.fileno())]
        try:
            self.process = subprocess.Popen(command, pass_fds=[theirs.fileno()], start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._channel = Channel(ours)
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._forks: dict[int, Future[int]] = {}
        self._workers: dict[int, ForkedWorker] = {}
        self._early: dict[int, int] = {}  # statuses of workers whose handle is not made yet
        self._abandoned: set[int] = set()  # workers forked after their fork had timed out: killed
        self.alive = True
        threading.Thread(target=self._read, name="naiad-python-template", daemon=True).start()

    def fork(self, fds: list[int], level: int) -> ForkedWorker:
        """A new worker serving the sockets ``fds`` (work, control); ChannelClosed when the template is gone."""
        future: Future[int] = Future()
        with self._lock:
            if not self.alive:
                raise ChannelClosed("the template process is gone")
            token = next(self._tokens)
            self._forks[token] = future
        request = {"op": "fork", "token": token, "level": level, "environ": dict(os.environ), "cwd": os.getcwd()}
        self._channel.send(request, fds)
        try:
            pid = future.result(FORK_TIMEOUT_S)
        except TimeoutError:
            with self._lock:
                answered = self._forks.pop(token, None) is None  # else a late worker is killed when it is announced
            if not answered:
                raise OSError(
                    f"the python backend's template process (pid {self.process.pid}) did not fork a worker within "
                    f"{FORK_TIMEOUT_S:g} s: the machine may be out of memory or of processes (check `free -m` and "
                    "`ulimit -u`), or the template is stuck (restarting the server starts a new one)"
                ) from None
            pid = future.result()  # the answer came as the wait ended
        with self._lock:
            worker = self._workers[pid] = ForkedWorker(pid)
            status = self._early.pop(pid, None)
        if status is not None:
            self._ended(pid, status)
        return worker

    def _read(self) -> None:
        try:
            while True:
                message, _fds = self._channel.receive()
                if message["op"] in ("forked", "failed"):
                    with self._lock:
                        future = self._forks.pop(message["token"], None)
                    if future is None:  # its fork timed out: nobody waits for this worker
                        if message["op"] == "forked":
                            self._abandon(message["pid"])
                    elif message["op"] == "forked":
                        future.set_result(message["pid"])
                    else:
                        future.set_exception(OSError(f"the template process could not fork: {message['message']}"))
                elif message["op"] == "exited":
                    self._ended(message["pid"], message["status"])
        except ChannelClosed:
            pass
        self._gone()

    def _abandon(self, pid: int) -> None:
        with self._lock:
            self._abandoned.add(pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def _ended(self, pid: int, status: int) -> None:
        with self._lock:
            if pid in self._abandoned:
                self._abandoned.discard(pid)
                return
            worker = self._workers.pop(pid, None)
            if worker is None:
                self._early[pid] = status
                return
        worker.ended(status)

    def _gone(self) -> None:
        """The template died: its workers can no longer be waited for, so they are stopped now."""
        with self._lock:
            self.alive = False
            forks, self._forks = self._forks, {}
            workers, self._workers = self._workers, {}
        for future in forks.values():
            future.set_exception(ChannelClosed("the template process is gone"))
        for worker in workers.values():
            worker.kill()
            worker.ended(-signal.SIGKILL)
        if workers:
            _log.error("the python backend's template process died; its %d worker(s) were stopped", len(workers))
        self._channel.close()


_template: Template | None = None
_template_lock = threading.Lock()


def fork_worker(fds: list[int], level: int) -> ForkedWorker:
    """A worker forked from this server's template process, started (again) when it is not running."""
    global _template
    with _template_lock:
        if _template is None or not _template.alive:
            _template = Template()
        template = _template
    return template.fork(fds, level)
