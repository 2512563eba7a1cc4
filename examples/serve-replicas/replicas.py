"""Starting `layerstream serve` replicas on 127.0.0.1 and an existing gateway
in front of them: SGLang's router (`sglang-router` on PyPI) or LiteLLM's
Router (in-process, `hosted_vllm/` backends). Shared by start.py and load.py;
standard library only (the gateways come from the virtual environment that
start.py --setup makes under build/).
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_VENV = os.path.join(REPO, "build", "replicas-venv")
GATEWAY_PACKAGES = ["sglang-router", "litellm", "openai"]


def setup_venv(venv=DEFAULT_VENV):
    """A virtual environment with the gateways (never the system Python)."""
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import sglang_router, litellm"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", *GATEWAY_PACKAGES], check=True)
    return py


def get(url, timeout=5):
    """(status, body text) of a GET; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


def metrics(url):
    """/metrics of a replica as {name or name{labels}: value}."""
    status, text = get(url + "/metrics")
    out = {}
    if status == 200:
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out


def wait_healthy(url, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode} before it was healthy")
        if get(url + "/health")[0] == 200:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url}/health did not answer 200 within {timeout}s")


class Replica:
    """`layerstream serve MODEL --port PORT ARGS...`, its log in a temp file."""

    def __init__(self, cli, model, port, args):
        self.url = f"http://127.0.0.1:{port}"
        self.model_id = model_id_of(model)
        self.log = tempfile.NamedTemporaryFile(prefix=f"replica-{port}-", suffix=".log", delete=False)
        cmd = [cli, "serve", model, "--host", "127.0.0.1", "--port", str(port), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)

    def sigterm(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout=120):
        self.sigterm()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class SglangRouter:
    """SGLang's model gateway over the replicas' URLs: it adds a worker on a
    2xx /health, marks it unhealthy on a non-2xx one, retries a request that
    got a 5xx on another worker, and power_of_two polls /get_load."""

    def __init__(self, python, worker_urls, policy, port):
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.NamedTemporaryFile(prefix="sglang-router-", suffix=".log", delete=False)
        cmd = [python, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
               "--worker-urls", *worker_urls, "--policy", policy,
               "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
               "--retry-max-retries", "5", "--request-timeout-secs", "600", "--log-level", "warn"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sglang-router exited with {self.proc.returncode}: see {self.log.name}")
            if get(self.url + "/v1/models")[0] == 200:
                return
            time.sleep(0.3)
        raise RuntimeError(f"sglang-router did not answer within {timeout}s: see {self.log.name}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def litellm_model_list(worker_urls, model_id, served_ids=None):
    """LiteLLM Router deployments: one `hosted_vllm/` backend per replica (it
    speaks the OpenAI API as vLLM does), all under one public model name.
    `served_ids`: the id each replica serves (default `model_id` for all)."""
    served_ids = served_ids or [model_id] * len(worker_urls)
    return [{"model_name": model_id,
             "litellm_params": {"model": "hosted_vllm/" + served, "api_base": url + "/v1", "api_key": "unused"}}
            for url, served in zip(worker_urls, served_ids)]


def tagged_models(model, n, directory):
    """Per replica a symbolic link to `model` named STEM.rI.gguf: replica I
    then serves the model as `STEM.rI` (the id is the file's stem), so the
    "model" of each response names the replica that answered it."""
    stem = model_id_of(model)
    links = []
    for i in range(n):
        link = os.path.join(directory, f"{stem}.r{i}.gguf")
        os.symlink(os.path.abspath(model), link)
        links.append(link)
    return links


def start_replicas(cli, model, n, base_port, per_replica_args, health_timeout=600, models=None):
    """`n` replicas on base_port, base_port+1, ...; waits for every /health 200.
    `models`: one model file per replica (default `model` for all)."""
    models = models or [model] * n
    replicas = [Replica(cli, models[i], base_port + i, per_replica_args[i % len(per_replica_args)]) for i in range(n)]
    try:
        for r in replicas:
            wait_healthy(r.url, r.proc, health_timeout)
    except Exception:
        for r in replicas:
            r.stop(10)
        raise
    return replicas


def parser_with_cli_and_model(doc):
    """The scripts' argument parser: --cli LAYERSTREAM and --model FILE."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="the layerstream executable")
    ap.add_argument("--model", required=True, help="the GGUF model every replica serves")
    return ap


def model_id_of(model):
    return os.path.splitext(os.path.basename(model))[0]
