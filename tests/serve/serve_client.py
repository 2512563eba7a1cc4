"""Starting `layerstream serve` for a test and talking to it over 127.0.0.1
(shared by serve_test.py and bench/serve/load.py)."""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time


class Server:
    """`layerstream serve MODEL --port 0 ARGS...`, started and waited for."""

    def __init__(self, cli, model, *args, timeout=180):
        self.log = tempfile.NamedTemporaryFile(prefix="serve-", suffix=".log", delete=False)
        cmd = [cli, "serve", model, "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = None
        found = {}

        def read_first_line():
            line = self.proc.stdout.readline()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                found["port"] = int(m.group(1))

        t = threading.Thread(target=read_first_line, daemon=True)
        t.start()
        t.join(timeout)
        if "port" not in found:
            self.stop(signal.SIGKILL)
            raise RuntimeError(f"the server did not start within {timeout}s:\n{self.stderr()}")
        self.port = found["port"]
        self.base = f"http://127.0.0.1:{self.port}"

    def stderr(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signals the server and returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the server did not exit within {timeout}s of signal {sig}:\n{self.stderr()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            code = self.stop()
            if exc[0] is None:
                assert code == 0, f"the server exited {code} on SIGTERM:\n{self.stderr()}"
        if exc[0] is not None:
            print("server log (tail):\n" + self.stderr())
        os.unlink(self.log.name)


def request(port, method, path, body=None, headers=None, timeout=120):
    """(status, parsed JSON or text) of one request to 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read().decode("utf-8", errors="replace")
    conn.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def stream(port, path, body, headers=None, timeout=120):
    """Sends a streaming request; returns (status, events, t_first, t_end):
    the parsed `data:` payloads (without [DONE]) and the seconds to the first
    content and to the end (from the request)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body), headers=headers or {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        data = r.read().decode("utf-8", errors="replace")
        conn.close()
        return r.status, [json.loads(data)], None, time.monotonic() - t0
    events, t_first, done = [], None, False
    for raw in r:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data: "):
            continue
        payload = line[6:]
        if payload == "[DONE]":
            done = True
            break
        ev = json.loads(payload)
        events.append(ev)
        if t_first is None and ev.get("choices"):
            c = ev["choices"][0]
            if c.get("text") or (c.get("delta") or {}).get("content"):
                t_first = time.monotonic() - t0
    conn.close()
    if not done:
        raise RuntimeError("the stream ended without [DONE]")
    return 200, events, t_first, time.monotonic() - t0


def metrics(port, headers=None):
    """/metrics as {name or name{labels}: value}."""
    status, text = request(port, "GET", "/metrics", headers=headers)
    assert status == 200, text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out
