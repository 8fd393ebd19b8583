"""A client for dtxd's HTTP/JSON API (docs/server.md, server/openapi.json)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import tempfile
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

JSON = dict[str, Any]


class DtxError(Exception):
    """An error answer of dtxd: its HTTP status, its `code`, its message, the request field it
    names (or None) and its `details`."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 details: list[Any] | None = None) -> None:
        super().__init__(f"{message} (HTTP {status}, {code}" +
                         (f", field {field!r})" if field else ")"))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.details = details or []


class BadRequest(DtxError):
    """400, 413 or 422: the request was refused; `field` says which field, where one is at fault."""


class AuthError(DtxError):
    """401 or 403: no token, or one the daemon does not accept."""


class NotFound(DtxError):
    """404: no such exploration, schedule or route, or no best schedule known."""


class Conflict(DtxError):
    """409: the request does not fit the exploration's state."""


class ServerError(DtxError):
    """5xx: the daemon could not do it (stopping, unhealthy, an internal error)."""


def _error_class(status: int) -> type[DtxError]:
    if status in (401, 403):
        return AuthError
    if status == 404:
        return NotFound
    if status == 409:
        return Conflict
    if status >= 500:
        return ServerError
    return BadRequest


def load_module(text: str, name: str | None = None) -> types.ModuleType:
    """A generated module's text imported as a module (written to a file first, so that Triton
    can read its kernels' source)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    name = name or f"dtx_module_{digest}"
    directory = Path(tempfile.gettempdir()) / "dtx_modules"
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the module written to {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _shape_text(shape: Mapping[str, int] | str) -> str:
    if isinstance(shape, str):
        return shape
    for label, size in shape.items():
        if not isinstance(size, int) or isinstance(size, bool):
            raise TypeError(f"shape: the size of {label!r} must be an int, not {size!r}")
    return ",".join(f"{label}={size}" for label, size in shape.items())


class Client:
    """dtxd at `url` (e.g. "http://127.0.0.1:8080"), with a bearer `token` where it asks for one.
    Every method raises a DtxError subclass for an error answer, carrying the daemon's message
    and the field it names."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"Client: {url!r} is not an http(s) URL such as http://host:port")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: JSON | None = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode() or "null")
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                error = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                error = {"code": "http_error", "message": text.strip() or str(e.reason)}
            raise _error_class(e.code)(e.code, error.get("code", "http_error"),
                                       error.get("message", ""), error.get("field"),
                                       error.get("details")) from None

    def explore(self, template: str | Path | None = None, **fields: Any) -> JSON:
        """Starts explorations: from the fields of a template file (docs/server.md: kernel,
        algorithm, schedule, shapes, dtype, settings...) given as keywords, or from a template
        file's path (YAML, read by the daemon's rules: pass its fields instead when the daemon
        cannot read it), keywords overriding. Returns {id, url, explorations: [{id, url,
        shape}]}."""
        body: JSON = {}
        if template is not None:
            body.update(_read_template(Path(template)))
        body.update(fields)
        if not body:
            raise ValueError("explore: give a template file or the fields of one")
        return dict(self._request("POST", "/v1/explorations", body))

    def exploration(self, id: int) -> JSON:
        """One exploration: its state, counts, best so far and live `progress`."""
        return dict(self._request("GET", f"/v1/explorations/{int(id)}"))

    def explorations(self, kernel: str | None = None, state: str | None = None,
                     offset: int = 0, limit: int = 50) -> JSON:
        """Explorations, newest first."""
        query: dict[str, Any] = {"offset": offset, "limit": limit}
        query.update({k: v for k, v in (("kernel", kernel), ("state", state)) if v is not None})
        return dict(self._request("GET", "/v1/explorations?" + urllib.parse.urlencode(query)))

    def wait(self, id: int, timeout: float = 600.0, poll: float = 0.2) -> JSON:
        """The exploration once it has finished (done, failed or cancelled)."""
        deadline = time.monotonic() + timeout
        while True:
            e = self.exploration(id)
            if e["state"] not in ("queued", "running"):
                return e
            if time.monotonic() > deadline:
                raise TimeoutError(f"exploration {id} is still {e['state']} after {timeout} s")
            time.sleep(poll)

    def cancel(self, id: int) -> JSON:
        """Cancels an exploration (409 Conflict when it is not running)."""
        return dict(self._request("POST", f"/v1/explorations/{int(id)}/cancel", {}))

    def results(self, id: int, status: str | None = None, shape: Mapping[str, int] | str | None
                = None, offset: int = 0, limit: int = 100) -> JSON:
        """An exploration's ranked schedules with their measurements, and its baselines."""
        query: dict[str, Any] = {"offset": offset, "limit": limit}
        if status is not None:
            query["status"] = status
        if shape is not None:
            query["shape"] = _shape_text(shape)
        return dict(self._request(
            "GET", f"/v1/explorations/{int(id)}/schedules?" + urllib.parse.urlencode(query)))

    def schedule(self, id: int) -> JSON:
        """One schedule: canonical text, program, module and every measurement of it."""
        return dict(self._request("GET", f"/v1/schedules/{int(id)}"))

    def best_result(self, kernel: str, shape: Mapping[str, int] | str, dtype: str | None = None,
                    device: str | None = None) -> JSON:
        """The best correct schedule known for kernel at shape: its times and module text."""
        query = {"kernel": kernel, "shape": _shape_text(shape)}
        query.update({k: v for k, v in (("dtype", dtype), ("device", device)) if v is not None})
        return dict(self._request("GET", "/v1/best?" + urllib.parse.urlencode(query)))

    def best(self, kernel: str, shape: Mapping[str, int] | str, dtype: str | None = None,
             device: str | None = None) -> types.ModuleType:
        """The module of the best correct schedule for kernel at shape, imported."""
        return load_module(self.best_result(kernel, shape, dtype, device)["module"])


def _read_template(path: Path) -> JSON:
    try:
        import yaml
    except ImportError:
        raise RuntimeError("explore: reading a template file needs PyYAML; pass its fields "
                           "as keywords instead") from None
    fields = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(fields, dict):
        raise ValueError(f"explore: {path} is not a template file (a YAML mapping)")
    base = path.parent
    for key in ("algorithm", "source"):  # a file name beside the template: its text
        value = fields.get(key)
        if isinstance(value, str) and "\n" not in value and (base / value).is_file():
            fields[key] = (base / value).read_text(encoding="utf-8")
    return fields
