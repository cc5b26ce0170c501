"""The template process: ``python -m naiad_python.isolation.template CHANNEL_FD``.

Started once per server (on the first worker with the server's own interpreter), it imports what a
worker needs and then forks a worker for each request of the server's, so a worker starts in
milliseconds instead of paying for a new interpreter and its imports. It stays single-threaded, which
makes the fork safe. Each request brings the worker's two sockets and the server's current
environment, working directory and log level; the template answers with the worker's pid, reaps its
workers and reports how each ended. It exits when the server's end of its channel closes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from naiad_python.isolation import worker  # imported once here, for every worker forked
from naiad_python.isolation.channel import Channel, ChannelClosed, Message


def main(argv: Sequence[str]) -> None:
    channel = Channel(socket.socket(fileno=int(argv[0])))
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _signal, _frame: None)  # the wakeup fd tells the loop
    selector = selectors.DefaultSelector()
    selector.register(channel.sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    try:
        while True:
            for key, _events in selector.select():
                if key.fileobj is wake_read:
                    _drain(wake_read)
                    continue
                message, fds = channel.receive()
                try:
                    pid = os.fork()
                except OSError as error:  # no memory or process slot: this worker fails, the others stay
                    for fd in fds:
                        os.close(fd)
                    channel.send({"op": "failed", "token": message["token"], "message": str(error)})
                    continue
                if pid == 0:
                    selector.close()
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    channel.sock.close()
                    _become_worker(message, fds)
                for fd in fds:
                    os.close(fd)
                channel.send({"op": "forked", "token": message["token"], "pid": pid})
            _reap(channel)
    except ChannelClosed:
        pass  # the server went away; its workers notice on their own sockets and exit


def _become_worker(request: Message, fds: list[int]) -> NoReturn:
    """Run a worker in this forked child, as ``python -m naiad_python.isolation.worker`` would; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["environ"])
        _reseed_numpy()
        arguments = [*map(str, fds), str(request["level"])]
        sys.argv = [worker.__file__ or "worker", *arguments]
        worker.main(arguments)
        atexit._run_exitfuncs()  # what the model registered runs, as at a worker's normal exit
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed stream
                stream.flush()
        os._exit(code)


def _reseed_numpy() -> None:
    """A forked worker must not draw the same legacy ``numpy.random`` numbers as its siblings."""
    random = sys.modules.get("numpy.random")
    if random is not None:
        random.seed()


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def _reap(channel: Channel) -> None:
    """Report every worker that ended, with Popen's convention for its status (-N: killed by signal N)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel.send({"op": "exited", "pid": pid, "status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    main(sys.argv[1:])
