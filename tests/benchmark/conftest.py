"""Real genai-bench runs against a local streaming server, shared by every test of this folder.

Each run is bounded (8 requests per level, one minute at most) and takes a few seconds; the result
folders are what genai-bench really wrote. The tokenizer is a word-level one built here and saved
as ``tokenizer.json``, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import load_module

HERE = Path(__file__).resolve().parent
LEVELS = (2, 4)
ISL, OSL = 64, 16
REQUESTS = 8


fake_openai = load_module("fake_openai", HERE / "fake_openai.py")
kube_fakes = load_module("kube_fakes", HERE / "kube_fakes.py")
Behaviour = fake_openai.Behaviour


@pytest.fixture
def fakes() -> ModuleType:
    """The recorded-Kubernetes builders (test modules cannot import a sibling module)."""
    return kube_fakes


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word-level tokenizer over a few hundred common words; anything else is one [UNK] token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    common = ("the of and to in a is that it for as with was on be by this thou thy thee my love shall not but all "
              "which so when me doth his her time beauty eye heart sweet fair day")
    words = ["[UNK]", *sorted(set(common.split(" ")))]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    folder = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 100000}))
    return folder


@dataclass(frozen=True)
class Run:
    """One genai-bench run: its exit code, the folder it wrote, and how many requests the server saw."""

    returncode: int
    folder: Path
    served: int
    stderr: str

    def files(self) -> dict[str, str]:
        return {path.name: path.read_text(encoding="utf-8") for path in sorted(self.folder.glob("*.json"))}


def _genai_bench() -> list[str]:
    # find_spec, not import: importing genai-bench monkey-patches threading with gevent.
    if importlib.util.find_spec("genai_bench") is None:
        pytest.skip("the bench extra is not installed: pip install '.[bench]'")
    script = Path(sys.executable).parent / "genai-bench"
    return [str(script)] if script.exists() else [sys.executable, "-c", "from genai_bench.cli.cli import cli; cli()"]


def run_genai_bench(behaviour: Any, tokenizer: Path, base: Path, name: str) -> Run:
    """genai-bench 0.0.5 exactly as the Job runs it (the vllm backend, a local tokenizer, offline)."""
    command = _genai_bench()
    with fake_openai.serving(behaviour) as server:
        port = server.server_address[1]
        args = ["benchmark", "--api-backend", "vllm", "--api-base", f"http://127.0.0.1:{port}", "--api-key", "unused",
                "--api-model-name", "/opt/ml/model", "--model-tokenizer", str(tokenizer), "--model", "test-model",
                "--task", "text-to-text", "--traffic-scenario", f"D({ISL},{OSL})",
                *[arg for level in LEVELS for arg in ("--num-concurrency", str(level))],
                "--max-requests-per-run", str(REQUESTS), "--max-time-per-run", "1", "--server-engine", "vLLM",
                "--experiment-base-dir", str(base), "--experiment-folder-name", name, "--log-dir", str(base / "logs")]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HOME": str(base / "hf"), "MPLCONFIGDIR": str(base / "mpl"), "TRANSFORMERS_VERBOSITY": "error"}
        done = subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=240, check=False,
                              cwd=base)
        served = server.requests
    return Run(done.returncode, base / name, served, done.stderr[-4000:])


def _run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, name: str, behaviour: Any) -> Iterator[Run]:
    base = tmp_path_factory.mktemp(name)
    yield run_genai_bench(behaviour, tokenizer_dir, base, name)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def healthy_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every request answered: 20 ms to the first token, then 5 ms per token."""
    yield from _run(tmp_path_factory, tokenizer_dir, "healthy", Behaviour(first_token_s=0.02, per_token_s=0.005))


@pytest.fixture(scope="session")
def erroring_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every third request gets HTTP 500."""
    yield from _run(tmp_path_factory, tokenizer_dir, "erroring",
                    Behaviour(first_token_s=0.02, per_token_s=0.005, fail_every=3, fail_status=500))


@pytest.fixture(scope="session")
def failing_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every request gets HTTP 404, as from a wrong router URL."""
    yield from _run(tmp_path_factory, tokenizer_dir, "failing", Behaviour(fail_all=True, fail_status=404))


@pytest.fixture(scope="session")
def short_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """The server stops after 4 tokens, as a router that drops ignore_eos would let it."""
    yield from _run(tmp_path_factory, tokenizer_dir, "short",
                    Behaviour(first_token_s=0.02, per_token_s=0.005, max_output_tokens=4))
