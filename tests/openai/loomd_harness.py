"""Starts real loomd processes on free loopback ports for the OpenAI API tests.

Single role, or a router in front of one worker; each is stopped with SIGTERM (and must
exit 0). Paths come from the command line (Bazel `$(location ...)`) and LOOM_MODEL.
"""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def model_path():
    """LOOM_MODEL, else the default model in the cache (as models/default_model.h)."""
    if os.environ.get("LOOM_MODEL"):
        return os.environ["LOOM_MODEL"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    cache = os.environ.get("LOOM_CACHE") or os.path.join(xdg, "loom")
    return os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def scratch_dir(name):
    base = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    path = os.path.join(base, name)
    os.makedirs(path, exist_ok=True)
    return path


class Loomd:
    """One loomd process; `http`, `grpc`, `metrics` are its ports."""

    def __init__(self, loomd, args, name):
        self.grpc, self.admin, self.metrics, self.http = (free_port() for _ in range(4))
        log_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or scratch_dir("logs")
        self.log_path = os.path.join(log_dir, "loomd-%s-%d.log" % (name, self.grpc))
        self.log = open(self.log_path, "w")
        argv = [loomd, "--port=%d" % self.grpc, "--admin_port=%d" % self.admin,
                "--metrics_port=%d" % self.metrics, "--http_port=%d" % self.http] + args
        if not any(a.startswith("--threads") for a in args):
            argv.append("--threads=2")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_healthy(self, path="/healthz", port=None, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("loomd exited %d; log:\n%s" % (self.proc.returncode,
                                                                    self.read_log()))
            if http_get(port or self.metrics, path, timeout=2)[0] == 200:
                return
            time.sleep(0.2)
        raise RuntimeError("loomd not healthy after %ds; log:\n%s" % (timeout, self.read_log()))

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def make_adapter(make_test_adapter, directory, seed):
    subprocess.run([make_test_adapter, "--base", model_path(), "--out", directory,
                    "--rank", "8", "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)


def write_keys(path, tenants):
    with open(path, "w") as f:
        json.dump({"tenants": tenants}, f)


def start_single(loomd, args):
    d = Loomd(loomd, ["--model=" + model_path()] + args, "single")
    d.wait_healthy()
    d.wait_healthy("/health", d.http)
    return [d]


def start_router(loomd, worker_args, router_args):
    """A worker, then a router over it; returns [router, worker] once the worker is up."""
    model = "--model=" + model_path()
    worker = Loomd(loomd, [model, "--role=worker"] + worker_args, "worker")
    worker.wait_healthy()
    router = Loomd(loomd, [model, "--role=router", "--workers=127.0.0.1:%d" % worker.grpc,
                           "--worker_admin_port_offset=%d" % (worker.admin - worker.grpc)] +
                   router_args, "router")
    router.wait_healthy()
    deadline = time.time() + 60
    while time.time() < deadline:
        status, text = http_get(router.metrics, "/metrics")
        if 'loom_worker_up{worker="127.0.0.1:%d"} 1' % worker.grpc in text:
            return [router, worker]
        time.sleep(0.2)
    raise RuntimeError("the router never saw its worker up; log:\n" + router.read_log())
