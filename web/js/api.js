// The page's client of dtxd's API (server/openapi.json). Errors carry the API's code, message,
// field and details so that views can show them where they belong.

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `the server answered ${status}`);
    this.status = status;
    this.code = e.code || "http_" + status;
    this.field = e.field;
    this.details = e.details;
  }
}

const TOKEN_KEY = "dtx-token";

export function token() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(t) {
  if (t) localStorage.setItem(TOKEN_KEY, t);
  else localStorage.removeItem(TOKEN_KEY);
}

async function request(method, path, body, signal) {
  const headers = { Accept: "application/json" };
  // dtxd takes a POST only as JSON (a cross-site page cannot send that without a preflight).
  if (method === "POST" && body === undefined) body = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token()) headers.Authorization = `Bearer ${token()}`;
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, { error: { code: "unreachable", message: "dtxd does not answer: is it running?" } });
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const err = new ApiError(res.status, json);
    if (res.status === 401) window.dispatchEvent(new CustomEvent("dtx-unauthorized"));
    throw err;
  }
  return json;
}

export const api = {
  get: (path, signal) => request("GET", path, undefined, signal),
  post: (path, body, signal) => request("POST", path, body ?? {}, signal),
};

/// Follows an exploration's server-sent events: onProgress(progress) while it runs, onDone(x)
/// once. Returns a function that stops listening. When the events cannot be had (a server
/// that wants a token for reads: EventSource sends no header), it polls instead.
export function follow(id, { onProgress, onDone }) {
  let closed = false;
  let timer = null;
  let source = null;
  const poll = async () => {
    if (closed) return;
    try {
      const x = await api.get(`/v1/explorations/${id}`);
      if (x.state === "queued" || x.state === "running") {
        if (x.progress) onProgress(x.progress);
        timer = setTimeout(poll, 2000);
      } else {
        closed = true;
        onDone(x);
      }
    } catch {
      timer = setTimeout(poll, 5000);
    }
  };
  if (token() || typeof EventSource === "undefined") {
    poll();
  } else {
    source = new EventSource(`/v1/explorations/${id}/events`);
    source.addEventListener("progress", (e) => onProgress(JSON.parse(e.data)));
    source.addEventListener("done", (e) => {
      source.close();
      if (closed) return;
      closed = true;
      onDone(JSON.parse(e.data));
    });
    source.onerror = () => {
      // The stream ended without `done` (a restart, a proxy): poll the stored state.
      source.close();
      if (!closed) timer = setTimeout(poll, 1000);
    };
  }
  return () => {
    closed = true;
    if (source) source.close();
    clearTimeout(timer);
  };
}
