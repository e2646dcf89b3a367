"""Start vLLM's OpenAI server (the CPU build) on a local port, drive a little load, collect its log and
/metrics, stop it. Used by tests/engine (marker `engine`) and by tools/engine_fixtures.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class EngineRun:
    started: bool
    log: str
    metrics: str
    returncode: int | None
    seconds: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict, timeout: float = 120) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def drive(port: int, model: str, requests: int, prompt_words: int, max_tokens: int, concurrency: int) -> None:
    """Send `requests` completions (`concurrency` at a time) and wait for them."""
    words = ("ban ken lot mis ret sun tol " * (prompt_words // 7 + 1)).split()[:prompt_words]
    prompt = " ".join(words)
    url = f"http://127.0.0.1:{port}/v1/completions"
    errors = []

    def one() -> None:
        try:
            _post(url, {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                        "ignore_eos": True})
        except Exception as err:  # collected: the caller decides
            errors.append(err)

    pending = list(range(requests))
    while pending:
        batch = [threading.Thread(target=one) for _ in pending[:concurrency]]
        pending = pending[concurrency:]
        for t in batch:
            t.start()
        for t in batch:
            t.join(300)
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]}")


def run_engine(python: str, model: str, args: list[str], log_path: Path, *, kv_cache_space_gib: float | None = None,
               load: dict | None = None, timeout: float = 420) -> EngineRun:
    port = free_port()
    env = dict(os.environ)
    if kv_cache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_space_gib)
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port),
           "--host", "127.0.0.1", "--enforce-eager", *args]
    start = time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=False)
        started = False
        try:
            while time.time() - start < timeout:
                if proc.poll() is not None:
                    break
                if "Application startup complete" in log_path.read_text(errors="replace"):
                    started = True
                    break
                time.sleep(1)
            metrics = ""
            if started:
                if load:
                    drive(port, model, **load)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                    metrics = response.read().decode()
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
    return EngineRun(started=started, log=log_path.read_text(errors="replace"), metrics=metrics,
                     returncode=proc.returncode, seconds=time.time() - start)
