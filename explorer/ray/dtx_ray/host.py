"""One measurement worker process (src/dtx/worker.py) run by a Ray actor.

The mechanics of the local pool's `WorkerProcess` (explorer/src/WorkerProcess.cpp), on the node:
the worker runs in its own process group and dies with its host (PR_SET_PDEATHSIG); a request is
written to it and its result read back against a deadline; its standard error is kept as a tail
that starts afresh with each request. What an outcome costs (a timeout, a death, a CUDA error)
and what is done next is decided by the scheduler, in explorer/src/MeasurementScheduler.cpp, for
the local pool and the Ray backend alike.

Uses only the standard library, so that it is tested without Ray.
"""
import collections
import ctypes
import json
import os
import selectors
import signal
import subprocess
import threading
import time

PR_SET_PDEATHSIG = 1
PROTOCOL = 1
_TIMEOUT, _CLOSED = object(), object()


def _die_with_parent():
    # Runs in the child between fork and exec: the worker gets SIGKILL when its host dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def describe_exit(code):
    """How a process ended, in the words of the local pool."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class WorkerStartError(Exception):
    """The worker did not start; the message says why."""


class WorkerProcess:
    """Starts, feeds and kills one worker process at a time. Not thread-safe: one caller at a time
    (a Ray actor runs one method at a time)."""

    def __init__(self, command, env=None, name="worker", stderr_tail_bytes=4096, log=None):
        self.command = list(command)
        self.env = dict(os.environ if env is None else env)
        self.name = name
        self.tail_bytes = stderr_tail_bytes
        self.log = log or (lambda line: None)
        self.proc = None
        self.started = 0  # workers started so far
        self._buffer = b""
        self._tail = collections.deque()
        self._tail_size = 0
        self._tail_lock = threading.Lock()
        self._appended = 0  # lines the drain thread has appended, ever

    # --- the process

    def start(self, timeout_s):
        """Starts a worker (killing any earlier one) and returns its hello. Raises
        WorkerStartError when it does not say hello within `timeout_s`."""
        self.kill()
        self._buffer = b""
        self._clear_tail()
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, start_new_session=True,
                preexec_fn=_die_with_parent)
        except OSError as e:
            self.proc = None
            raise WorkerStartError(f"cannot start `{self.command[0]}`: {e}") from None
        self.started += 1
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        line = self._read_line(time.monotonic() + timeout_s)
        if line is _TIMEOUT:
            self.kill()
            raise WorkerStartError("no hello from the worker within the startup timeout")
        if line is _CLOSED:
            raise WorkerStartError(f"the worker exited before its hello ({self._reap()})")
        try:
            hello = json.loads(line)
        except ValueError:
            hello = None
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            self.kill()
            raise WorkerStartError(f"the worker's first line is not a hello: {line[:200]}")
        if hello.get("protocol") != PROTOCOL:
            self.kill()
            raise WorkerStartError(f"the worker speaks protocol {hello.get('protocol')}, not "
                                   f"{PROTOCOL}")
        self.log(f"worker pid {hello.get('pid')} started")
        return hello

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL to the worker's process group, then reaps it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._close_pipes()

    def stderr_tail(self):
        with self._tail_lock:
            return b"".join(self._tail).decode("utf-8", "replace")

    def pid(self):
        return self.proc.pid if self.proc is not None else None

    # --- one request

    def exchange(self, request, timeout_s):
        """Writes `request` (a dict with an `id`) and reads until its result, for at most
        `timeout_s`. Returns `io`: `done` (with `reply`), `unsent` (the worker had ended before
        it read the request), `timeout` (no result in time; the worker still runs) or `closed`
        (it ended during the request); `how` it ended for the last two, and `tail`."""
        if not self.running():
            return self._ended("unsent")
        self._fresh_tail()
        deadline = time.monotonic() + timeout_s
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._ended("unsent")
        while True:
            line = self._read_line(deadline)
            if line is _TIMEOUT:
                return {"io": "timeout", "tail": self.stderr_tail()}
            if line is _CLOSED:
                return self._ended("closed")
            try:
                result = json.loads(line)
            except ValueError:
                result = None
            if isinstance(result, dict) and result.get("type") == "result" and \
                    result.get("id") == request.get("id"):
                return {"io": "done", "reply": result}
            self.log(f"ignored a line from the worker: {line[:200]!r}")

    def _ended(self, io):
        how = self._reap() if self.proc is not None else "not started"
        return {"io": io, "how": how, "tail": self.stderr_tail()}

    def _reap(self):
        """How the worker ended, once it closed its output: it is given a moment to exit."""
        try:
            self.proc.wait(timeout=5)
            how = describe_exit(self.proc.returncode)
        except subprocess.TimeoutExpired:
            self.kill()
            how = "closed its output without exiting; killed"
        self._close_pipes()
        return how

    def _close_pipes(self):
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    # --- pipes

    def _clear_tail(self):
        with self._tail_lock:
            self._tail.clear()
            self._tail_size = 0

    def _fresh_tail(self):
        """Starts the standard-error tail afresh for a request, as the local pool does: what the
        worker wrote before (the previous request's traceback, its start-up lines) is read off
        the pipe first, for up to 0.2 s, and dropped, so that a request's tail is its own
        output."""
        deadline = time.monotonic() + 0.2
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(self.proc.stderr, selectors.EVENT_READ)
                # An empty pipe is not enough: the drain thread may have read a line and not yet
                # appended it (seen on a loaded machine: the start-up line in the next request's
                # tail). Done once the pipe is empty and nothing was appended for 5 ms.
                seen = -1
                while time.monotonic() < deadline:
                    with self._tail_lock:
                        appended = self._appended
                    if not sel.select(0) and appended == seen:
                        break
                    seen = appended
                    time.sleep(0.005)
        except (ValueError, OSError):
            pass  # the pipe is closed: nothing is left to read
        self._clear_tail()

    def _read_line(self, deadline):
        """The next line of standard output (text), or _TIMEOUT, or _CLOSED at its end."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMEOUT
            try:
                with selectors.DefaultSelector() as sel:
                    sel.register(self.proc.stdout, selectors.EVENT_READ)
                    if not sel.select(min(left, 1.0)):
                        continue
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            except (ValueError, OSError):
                chunk = b""
            if not chunk:
                return _CLOSED
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def _drain(self, proc):
        for raw in iter(proc.stderr.readline, b""):
            with self._tail_lock:
                self._tail.append(raw)
                self._tail_size += len(raw)
                self._appended += 1
                while self._tail_size > self.tail_bytes and len(self._tail) > 1:
                    self._tail_size -= len(self._tail.popleft())
        try:
            proc.stderr.close()
        except OSError:
            pass
