"""One engine process: vLLM imported once in ``.venv-engine``, answering one check per command line.

The process is :mod:`hyperpod_dpd.oracle.vllm_checks` in ``serve`` mode. It is started once for each GPU
model (the import fakes the platform), warms up on a small model, then forks a child for every check, so a
check costs milliseconds after a 10-20 s start. Whatever goes wrong (no engine venv, a start that fails or
hangs, a child that crashes or times out) is a :class:`Verdict` with ``ok`` None, never a pass.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from hyperpod_dpd.contracts.vllm import VLLM_VERSION
from hyperpod_dpd.errors import DpdError
from hyperpod_dpd.oracle.gpus import FakeGpu

ENGINE_VENV = ".venv-engine"
ENGINE_PYTHON_ENV = "HYPERPOD_DPD_ENGINE_PYTHON"
INSTALL_COMMAND = "make engine"
STUB_DIR = "stub"
SCRIPT = Path(__file__).with_name("vllm_checks.py")
# Seconds for the import and the warm-up (6-20 s measured; more under load), and for one check (5-85 ms).
START_TIMEOUT = 300.0
CHECK_TIMEOUT = 60.0
# The warm-up model: a small dense Llama, which loads the parser, the config classes and the attention backends.
WARM_UP_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
                  "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                  "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 4096,
                  "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}


class EngineUnavailable(DpdError, RuntimeError):
    """The engine venv is missing or its process would not start; the message says why and how to fix it."""


@dataclass(frozen=True)
class Verdict:
    """vLLM's answer to one command line: ``ok`` True (accepted), False (refused) or None (could not run)."""

    ok: bool | None
    stage: str | None = None
    error_type: str | None = None
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        return self.ok is False

    @property
    def could_not_run(self) -> bool:
        return self.ok is None

    def describe(self) -> str:
        if self.ok:
            return "accepted"
        if self.ok is None:
            return f"the engine check could not run: {self.error}"
        return f"refused at {self.stage}: {self.error_type}: {self.error}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        ok = data.get("ok")
        return cls(ok=ok if isinstance(ok, bool) else None, stage=data.get("stage"),
                   error_type=data.get("error_type"), error=data.get("error"), summary=data.get("summary") or {})


def engine_python() -> Path | None:
    """The engine venv's interpreter: ``$HYPERPOD_DPD_ENGINE_PYTHON``, else ``.venv-engine`` in the source tree
    this package runs from (an editable install), else in the working directory; None when there is none."""
    given = os.environ.get(ENGINE_PYTHON_ENV)
    if given:
        return Path(given) if Path(given).exists() else None
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        python = root / ENGINE_VENV / "bin" / "python"
        if python.exists():
            return python
    return None


def unavailable_message() -> str:
    return (f"vLLM {VLLM_VERSION}'s own checks need its engine venv ({ENGINE_VENV}), which is not installed. "
            f"Fix: run '{INSTALL_COMMAND}' in the hyperpod-dpd source tree (about 8 GB on disk, 3-5 minutes; a C "
            f"compiler is needed once), or point {ENGINE_PYTHON_ENV} at a Python with vllm=={VLLM_VERSION}")


class EngineOracle:
    """vLLM ``serve``'s checks for one GPU model, in one long-lived process; use it as a context manager."""

    def __init__(self, gpu: FakeGpu, *, python: Path | None = None, check_timeout: float = CHECK_TIMEOUT,
                 start_timeout: float = START_TIMEOUT) -> None:
        found = python or engine_python()
        if found is None:
            raise EngineUnavailable(unavailable_message())
        self.gpu, self.python = gpu, found
        self.check_timeout, self.start_timeout = check_timeout, start_timeout
        self._scratch = tempfile.TemporaryDirectory(prefix="hyperpod-dpd-engine-")
        self._process: subprocess.Popen[str] | None = None
        self._log: Any = None
        self._next_id = 0
        self.vllm_version: str | None = None

    @property
    def scratch(self) -> Path:
        return Path(self._scratch.name)

    def __enter__(self) -> EngineOracle:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def model_dir(self, config: dict[str, Any], name: str = "model") -> Path:
        """A folder holding only ``config.json``: all vLLM reads before loading weights."""
        folder = self.scratch / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        return folder

    def start(self) -> None:
        stub = self.python.parent.parent / STUB_DIR
        if not (stub / "libcuda.so.1").exists():
            raise EngineUnavailable(f"the engine venv has no stub CUDA driver ({stub}/libcuda.so.1). "
                                    f"Fix: run '{INSTALL_COMMAND}'")
        warm_up = self.model_dir(WARM_UP_CONFIG, "warm-up")
        self._log = (self.scratch / "engine.log").open("w+", encoding="utf-8")
        command = [str(self.python), "-I", str(SCRIPT), "serve", "--stub", str(stub), "--cache",
                   str(self.scratch / "cache"), "--gpu-name", self.gpu.name,
                   "--capability", ".".join(map(str, self.gpu.capability)), "--memory-gib", f"{self.gpu.memory_gib:g}",
                   "--gpus", str(self.gpu.count), "--timeout", f"{self.check_timeout:g}",
                   "--expect-version", VLLM_VERSION, "--warm-up-model", str(warm_up)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                         text=True, bufsize=1, cwd=self.scratch, start_new_session=True)
        ready = self._read_line(self.start_timeout)
        if ready is None or not ready.get("ready"):
            why = (ready or {}).get("error") or self._exit_reason("did not start")
            self.close()
            raise EngineUnavailable(f"the engine check could not run: vLLM's process {why}")
        self.vllm_version = ready.get("vllm")

    def check(self, argv: Sequence[str], *, gpus: int | None = None, timeout: float | None = None) -> Verdict:
        """vLLM's verdict on ``vllm serve ARGV`` with ``gpus`` GPUs visible (default: the oracle's count);
        a check running longer than ``timeout`` seconds (default: the oracle's) is killed: ``ok`` None."""
        process = self._process
        if process is None or process.poll() is not None or process.stdin is None:
            return Verdict(ok=None, stage="oracle", error=self._exit_reason("is not running"))
        self._next_id += 1
        limit = self.check_timeout if timeout is None else timeout
        request = {"id": self._next_id, "argv": list(argv), "gpus": gpus if gpus is not None else self.gpu.count,
                   "timeout": limit}
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except OSError as error:
            return Verdict(ok=None, stage="oracle", error=f"vLLM's process took no request ({error})")
        answer = self._read_line(limit + 30)
        if answer is None:
            why = self._exit_reason("gave no answer in time")
            self.close()
            return Verdict(ok=None, stage="oracle", error=f"vLLM's process {why}")
        return Verdict.from_json(answer)

    def _read_line(self, timeout: float) -> dict[str, Any] | None:
        process = self._process
        if process is None or process.stdout is None:
            return None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                line = process.stdout.readline()
                if not line:
                    return None
                try:
                    parsed: dict[str, Any] = json.loads(line)
                except ValueError:
                    continue  # not an answer: a stray line some library printed before the split
                return parsed
        return None

    def _exit_reason(self, what: str) -> str:
        process = self._process
        code = None if process is None else process.poll()
        tail = ""
        if self._log is not None and not self._log.closed:
            self._log.flush()
            self._log.seek(0)
            lines = [line for line in self._log.read().splitlines() if line.strip()]
            tail = f"; its last output: {lines[-1][:300]}" if lines else ""
        status = "" if code is None else f" (exit status {code})"
        return f"{what}{status}{tail}"

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._scratch.cleanup()
