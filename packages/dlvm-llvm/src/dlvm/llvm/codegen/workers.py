"""Compiling the parts of a module in worker processes, in parallel with this one.

llvmlite serializes all of LLVM behind one lock, so threads cannot compile in parallel;
processes can. The workers run `compile_worker.py` as a script (not through
multiprocessing, which would import the user's main module again in each of them, and
whose `fork` would copy this process's threads and locks). They are started once per
process, in the background, when the first JIT engine is made (each executable has one:
`prewarm`), and kept (an idle one holds about 60 MB); a worker exits when this process
closes its stdin (or ends).

An idle worker takes a part (one still starting answers after its start-up); parts beyond
the idle workers are compiled here, so that a busy pool never makes a compile wait for
another's. A worker that fails (it died, or its pipe broke) is dropped and its part
compiled here.

`DLVM_COMPILE_WORKERS` sets the number of worker processes (0: none); by default, one per
usable core beyond this process's, at most 3.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from .compile_worker import UNROLL_FLAG, emit_single, read_exactly

WORKERS_ENV = "DLVM_COMPILE_WORKERS"
MAX_WORKERS = 3
SCRIPT = Path(__file__).with_name("compile_worker.py")


class WorkerError(RuntimeError):
    """LLVM's error for a part a worker compiled (as compiling it here would raise)."""


def count() -> int:
    """How many worker processes to use (none where no Python executable is known, as in
    an embedded interpreter)."""
    if not sys.executable:
        return 0
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            raise ValueError(f"{WORKERS_ENV} must be a whole number of processes, not "
                             f"'{value}'") from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return min(MAX_WORKERS, cores - 1)


class Worker:
    """One compile process and its pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            # -P: the script's folder holds modules named like the standard library's
            [sys.executable, "-P", "-u", str(SCRIPT)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, close_fds=True)
        self.started = threading.Event()  # it said it is ready, or it ended first
        self.busy = False
        self.dead = False

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def wait_ready(self) -> None:
        """Block until the worker says it is ready (in a background thread); one that ends
        first stops the starting of workers in this process."""
        global _failed
        try:
            ok = read_exactly(self.stdout, 1) == b"R"
        except (OSError, ValueError):
            ok = False
        if not ok:
            with _lock:
                _failed = True
                if self in _workers:
                    _workers.remove(self)
            self.dead = True
        self.started.set()

    def send(self, text: str, opt: int, unroll: bool) -> None:
        data = text.encode("utf-8")
        flags = opt | (UNROLL_FLAG if unroll else 0)
        self.stdin.write(flags.to_bytes(4, "little") + len(data).to_bytes(8, "little"))
        self.stdin.write(data)
        self.stdin.flush()

    def receive(self) -> bytes:
        self.started.wait()
        if self.dead:
            raise OSError("the compile worker did not start")
        head = read_exactly(self.stdout, 9)
        if head is None:
            raise OSError("the compile worker ended")
        payload = read_exactly(self.stdout, int.from_bytes(head[1:], "little"))
        if payload is None:
            raise OSError("the compile worker ended")
        if head[0]:
            raise WorkerError(payload.decode("utf-8", "replace"))
        return payload

    def close(self, wait: bool = True) -> None:
        """Close its stdin, which ends it; `wait`: also reap it (killed if it lingers)."""
        self.dead = True
        with contextlib.suppress(OSError):
            self.stdin.close()
        if not wait:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.wait(timeout=1)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_workers: list[Worker] = []
_failed = False  # a worker could not start: none is started again
_exit_hook = False
_pid = os.getpid()  # a forked child must not share its parent's pipes
_lock = threading.Lock()


def _forget_if_forked() -> None:
    """In a process forked from the one that started the workers, forget them (their
    pipes are the parent's); called with `_lock` held."""
    global _pid, _failed
    if os.getpid() != _pid:
        _pid, _failed = os.getpid(), False
        _workers.clear()


def prewarm() -> None:
    """Start the missing workers; they get ready in the background (a Python start-up and
    an import of llvmlite each)."""
    global _exit_hook, _failed
    started = []
    with _lock:
        _forget_if_forked()
        if _failed:
            return
        missing = count() - len(_workers)
        try:
            for _ in range(missing):
                started.append(Worker())
        except OSError:
            _failed = True
        _workers.extend(started)
        if started and not _exit_hook:
            _exit_hook = True
            atexit.register(shutdown)
    for w in started:
        threading.Thread(target=w.wait_ready, name="dlvm-compile-worker", daemon=True).start()


def shutdown() -> None:
    """Stop the workers (at exit: without waiting for them, which end when they read the
    end of their stdin)."""
    with _lock:
        _forget_if_forked()
        workers = list(_workers)
        _workers.clear()
    for w in workers:
        w.close(wait=False)


def take() -> Worker | None:
    """An idle worker (now marked busy), or None. One still starting is taken too: it
    answers after its start-up (about a tenth of a second), less than a part takes."""
    with _lock:
        _forget_if_forked()
        for w in _workers:
            if not w.busy and not w.dead:
                w.busy = True
                return w
    return None


def give_back(w: Worker, failed: bool) -> None:
    with _lock:
        w.busy = False
        if failed and w in _workers:
            _workers.remove(w)
    if failed:
        w.close()


def compile_object(text: str, opt: int, unroll: bool = True) -> bytes:
    obj = emit_single(text, "obj", opt, unroll)
    assert isinstance(obj, bytes)
    return obj


def compile_all(parts: list[str], opt: int, unroll: bool = True) -> list[bytes]:
    """The object code of each part: the largest here, the others in idle workers (or
    here when none is)."""
    prewarm()
    order = sorted(range(len(parts)), key=lambda k: -len(parts[k]))
    sent: dict[int, Worker] = {}
    for k in order[1:]:
        w = take()
        if w is None:
            break
        try:
            w.send(parts[k], opt, unroll)
        except OSError:
            give_back(w, failed=True)
            continue
        sent[k] = w
    out: dict[int, bytes] = {}
    errors: list[Exception] = []
    for k in order:
        if k not in sent:
            try:
                out[k] = compile_object(parts[k], opt, unroll)
            except Exception as e:  # raised below, once every worker has answered
                errors.append(e)
                break
    for k, w in sent.items():
        try:
            out[k] = w.receive()
        except OSError:
            give_back(w, failed=True)
            if not errors:
                out[k] = compile_object(parts[k], opt, unroll)
            continue
        except WorkerError as e:
            errors.append(e)
        give_back(w, failed=False)
    if errors:
        raise errors[0]
    return [out[k] for k in range(len(parts))]
