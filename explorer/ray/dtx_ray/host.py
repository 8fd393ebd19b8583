"""One measurement worker process (explorer/worker/dtx_worker.py) run by a Ray actor.

The same worker, the same protocol (docs/worker-protocol.md) and the same fault rules as the
local pool's `WorkerProcess` (explorer/src/WorkerProcess.cpp): the worker runs in its own
process group and dies with its host (PR_SET_PDEATHSIG); a request that gets no reply within its
time kills the worker (`timeout`); a worker that dies during a request costs that request
(`crashed`); a worker that died while idle, or exits after a CUDA error, is replaced before the
next request. So a kernel that crashes or hangs its worker costs one candidate and leaves the
actor, and the GPU it holds, serving.

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


def _die_with_parent():
    # Runs in the child between fork and exec: the worker gets SIGKILL when its host dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def describe_exit(code):
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def pool_result(request_id, status, message, tail=""):
    """A result the host makes itself (`timeout`, `crashed`), shaped as a worker's."""
    return {"type": "result", "id": request_id, "status": status, "message": message,
            "compile_s": 0.0, "import_s": 0.0, "wall_s": 0.0, "stderr_tail": tail}


class WorkerHost:
    """Starts, feeds and replaces one worker process. Not thread-safe: one caller at a time
    (a Ray actor runs one method at a time)."""

    def __init__(self, command, env=None, name="worker", stderr_tail_bytes=4096,
                 startup_timeout_s=300.0, log=None):
        self.command = list(command)
        self.env = dict(os.environ if env is None else env)
        self.name = name
        self.tail_bytes = stderr_tail_bytes
        self.startup_timeout_s = startup_timeout_s
        self.log = log or (lambda line: None)
        self.proc = None
        self.hello = None
        self.started = 0  # workers started so far
        self._buffer = b""
        self._tail = collections.deque()
        self._tail_size = 0
        self._tail_lock = threading.Lock()
        self._last_runtime_error = False

    # --- the process

    def start(self):
        """Starts a worker and waits for its hello. Raises RuntimeError with the reason (and the
        end of its standard error) when it cannot."""
        self.kill()
        self._buffer = b""
        with self._tail_lock:
            self._tail.clear()
            self._tail_size = 0
        self.proc = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, start_new_session=True, preexec_fn=_die_with_parent)
        self.started += 1
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout_s
        line = self._read_line(deadline)
        if line is None:
            self.kill()
            why = "no hello within the startup timeout" if self.proc.returncode is None or \
                self.proc.returncode == -signal.SIGKILL else \
                f"the worker {describe_exit(self.proc.returncode)} before its hello"
            raise RuntimeError(f"{self.name}: {why}\n{self.stderr_tail()}")
        try:
            hello = json.loads(line)
        except ValueError:
            hello = None
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            self.kill()
            raise RuntimeError(f"{self.name}: the worker's first line is not a hello: "
                               f"{line[:200]!r}")
        self.hello = hello
        self._last_runtime_error = False
        self.log(f"worker pid {hello.get('pid')} started")
        return hello

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
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
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def stderr_tail(self):
        with self._tail_lock:
            return b"".join(self._tail).decode("utf-8", "replace")

    def pid(self):
        return self.proc.pid if self.proc is not None else None

    # --- one request

    def request(self, message, timeout_s):
        """Sends one request (a dict with an `id`) and returns its result (a dict): the worker's,
        or `timeout` / `crashed` made here."""
        request_id = message.get("id")
        line = (json.dumps(message) + "\n").encode()
        for attempt in range(2):
            if self.proc is not None and not self.running():
                self.log(f"worker pid {self.proc.pid} {describe_exit(self.proc.returncode)}; "
                         "starting a new one")
                self.proc = None
            if self.proc is None:
                try:
                    self.start()
                except (RuntimeError, OSError) as e:
                    return pool_result(request_id, "crashed", f"worker did not start: {e}",
                                       self.stderr_tail())
            self._fresh_tail()
            deadline = time.monotonic() + timeout_s
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                if attempt == 0:  # died while idle (after a CUDA error it exits)
                    self.kill()
                    self.proc = None
                    continue
                return self._died(request_id)
            while True:
                reply = self._read_line(deadline)
                if reply is None:
                    break
                try:
                    result = json.loads(reply)
                except ValueError:
                    result = None
                if isinstance(result, dict) and result.get("type") == "result" and \
                        result.get("id") == request_id:
                    self._last_runtime_error = result.get("status") == "runtime_error"
                    return result
                self.log(f"ignored a line from the worker: {reply[:200]!r}")
            if self.running():  # the deadline passed
                pid = self.proc.pid
                self.kill()
                self.proc = None
                self.log(f"request {request_id} timed out; worker pid {pid} killed")
                return pool_result(request_id, "timeout",
                                   f"no reply within {timeout_s:g} s; the worker was killed",
                                   self.stderr_tail())
            if self._last_runtime_error and attempt == 0:
                # It was exiting after its previous request's CUDA error: not this request's.
                self._last_runtime_error = False
                self.kill()
                self.proc = None
                continue
            return self._died(request_id)
        return self._died(request_id)

    def _died(self, request_id):
        self.kill()
        how = describe_exit(self.proc.returncode if self.proc is not None else None)
        pid = self.proc.pid if self.proc is not None else "?"
        self.proc = None
        self.log(f"worker pid {pid} died during request {request_id}: {how}")
        return pool_result(request_id, "crashed", f"the worker died: it {how}",
                           self.stderr_tail())

    # --- pipes

    def _fresh_tail(self):
        """Starts the standard-error tail afresh for a request, as the local pool does: what the
        worker wrote before (the previous request's traceback, its start-up lines) is read off
        the pipe first, for up to 0.2 s, and dropped, so that a timeout or crash carries only
        its own request's output."""
        deadline = time.monotonic() + 0.2
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(self.proc.stderr, selectors.EVENT_READ)
                while sel.select(0) and time.monotonic() < deadline:
                    time.sleep(0.005)  # the drain thread has not read it all yet
        except (ValueError, OSError):
            pass  # the pipe is closed: nothing is left to read
        with self._tail_lock:
            self._tail.clear()
            self._tail_size = 0

    def _read_line(self, deadline):
        """The next line of standard output (text), or None at the deadline or end of output."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with selectors.DefaultSelector() as sel:
                sel.register(self.proc.stdout, selectors.EVENT_READ)
                if not sel.select(min(left, 1.0)):
                    continue
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def _drain(self, proc):
        for raw in iter(proc.stderr.readline, b""):
            with self._tail_lock:
                self._tail.append(raw)
                self._tail_size += len(raw)
                while self._tail_size > self.tail_bytes and len(self._tail) > 1:
                    self._tail_size -= len(self._tail.popleft())
        try:
            proc.stderr.close()
        except OSError:
            pass
