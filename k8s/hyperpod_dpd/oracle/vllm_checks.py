"""vLLM's own start-up checks, run offline on a CPU-only machine: the script the engine venv runs.

It imports only the standard library and vLLM (never ``hyperpod_dpd``: the engine venv does not hold it), so
``.venv-engine/bin/python vllm_checks.py ...`` runs it by path. Two commands:

``build-stub DIR``
    Writes ``DIR/libcuda.so.1``: a CUDA driver whose every function returns ``CUDA_ERROR_NO_DEVICE``.
    ``import vllm._C`` needs the driver library; the functions it must define are read with ``nm`` from
    vLLM's own ``.so`` files, so the stub follows the installed version. Needs a C compiler (``cc``).

``serve --stub DIR --cache DIR --gpu-name NAME --capability 9.0 --memory-gib 80 --gpus 8``
    Fakes a node of ``--gpus`` such GPUs, imports vLLM once, runs one throw-away check, then reads JSON lines
    ``{"id", "argv", "gpus", "timeout"}`` on standard input and answers each with one JSON line ``{"id", "ok", "stage",
    "error_type", "error", "summary"}``. ``ok`` is null when the check could not run (the child crashed or
    timed out). Each check runs in a forked child, so the state vLLM keeps in module globals never leaks
    from one check into the next.

The stages, in the order ``vllm serve`` runs them: ``parse`` (the serve parser), ``serve_args``
(``validate_parsed_serve_args``), ``api_server`` (``validate_api_server_args``), ``engine_config``
(``create_engine_config``), then two that real ``serve`` reaches only after loading the weights:
``attention_backend`` (the selection each ``Attention`` layer makes in the worker) and ``parsers`` (the
reasoning and tool parser lookups ``OpenAIServingChat`` makes).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
CUDA_ERROR_NO_DEVICE = 100
STUB_NAME = "libcuda.so.1"
_DRIVER_SYMBOL = re.compile(r"^\s+U (cu[A-Z][A-Za-z0-9_]*)(@\S+)?$")


def driver_symbols(vllm_dir: Path) -> list[str]:
    """The CUDA driver functions vLLM's extensions import (``cu*`` undefined symbols), read with ``nm``."""
    names: set[str] = set()
    for library in sorted(vllm_dir.rglob("*.so")):
        listing = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True,
                                 check=False).stdout
        names.update(m.group(1) for line in listing.splitlines() if (m := _DRIVER_SYMBOL.match(line)))
    return sorted(names)


def build_stub(target_dir: Path) -> Path:
    """Compile the stub driver into ``target_dir``; its symbol list is derived from the installed vLLM."""
    import importlib.util  # noqa: PLC0415 - only this command needs it

    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise SystemExit("vllm is not installed in this Python")
    symbols = driver_symbols(Path(spec.origin).parent)
    target_dir.mkdir(parents=True, exist_ok=True)
    source = target_dir / "libcuda_stub.c"
    body = "".join(f"int {name}(void) {{ return {CUDA_ERROR_NO_DEVICE}; }}\n" for name in symbols)
    source.write_text("/* Generated: every CUDA driver call vLLM imports fails with CUDA_ERROR_NO_DEVICE. */\n"
                      + body)
    target = target_dir / STUB_NAME
    compiler = os.environ.get("CC", "cc")
    subprocess.run([compiler, "-shared", "-fPIC", "-O0", f"-Wl,-soname,{STUB_NAME}", "-o", str(target),
                    str(source)], check=True)
    return target


# --- faking the node -----------------------------------------------------------------------------------------

_GPU: dict[str, Any] = {}


def install_fake_platform(stub_dir: Path, gpu: dict[str, Any]) -> None:
    """Make vLLM see ``gpu["count"]`` GPUs of one model; must run before any other vLLM import."""
    ctypes.CDLL(str(stub_dir / STUB_NAME), mode=ctypes.RTLD_GLOBAL)
    _GPU.update(gpu)
    from vllm import platforms  # noqa: PLC0415 - the order of imports is the point
    from vllm.platforms.cuda import NonNvmlCudaPlatform  # noqa: PLC0415
    from vllm.platforms.interface import DeviceCapability  # noqa: PLC0415

    class FakeNode(NonNvmlCudaPlatform):  # type: ignore[misc]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            major, minor = _GPU["capability"]
            return DeviceCapability(major=major, minor=minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(_GPU["name"])

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(_GPU["memory_gib"] * 2**30)

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return int(_GPU["count"])

    platforms._current_platform = FakeNode()

    def count() -> int:
        return int(_GPU["count"])

    import vllm.config.parallel  # noqa: PLC0415
    import vllm.platforms.cuda  # noqa: PLC0415
    import vllm.utils.torch_utils  # noqa: PLC0415

    for module in (vllm.utils.torch_utils, vllm.config.parallel, vllm.platforms.cuda):
        module.cuda_device_count_stateless = count


def offline_environment(cache: Path) -> None:
    """No network, no usage reports, every cache under ``cache`` (nothing under ``$HOME``)."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK",
                "DO_NOT_TRACK"):
        os.environ[key] = "1"
    for key, sub in (("VLLM_CACHE_ROOT", "vllm"), ("FLASHINFER_WORKSPACE_BASE", "flashinfer"),
                     ("HF_HOME", "huggingface"), ("TRITON_CACHE_DIR", "triton")):
        os.environ[key] = str(cache / sub)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"  # as the vllm CLI sets it (cli_env_setup)


# --- one check -----------------------------------------------------------------------------------------------

class _Refused(Exception):
    def __init__(self, stage: str, error: BaseException, message: str | None = None) -> None:
        super().__init__(stage)
        self.stage, self.error, self.message = stage, error, message


def _message(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, KeyError) and len(error.args) == 1:
        text = str(error.args[0])
    return text.strip() or type(error).__name__


def _stage(name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except _Refused:
        raise
    except Exception as error:
        raise _Refused(name, error) from None


def _parse(argv: list[str]) -> Any:
    """``vllm serve ARGS`` through the real serve subparser; an argparse exit becomes its message."""
    from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = ServeSubcommand()
    command.subparser_init(subparsers)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = parser.parse_args(["serve", *argv])
    except SystemExit as error:
        # argparse prints the usage, then "vllm serve: error: MESSAGE", which pydantic's errors continue
        # over several lines.
        written = captured.getvalue()
        text = written.rsplit(": error: ", 1)[1].strip() if ": error: " in written else written.strip()
        raise _Refused("parse", error, text or f"argparse exited with {error.code}") from None
    except Exception as error:
        raise _Refused("parse", error) from None
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    _stage("serve_args", command.validate, args)
    return args


def _summary(config: Any) -> dict[str, Any]:
    def read(obj: Any, *path: str) -> Any:
        for name in path:
            obj = getattr(obj, name, None)
        return obj if isinstance(obj, (int, float, str, bool, type(None))) else str(obj)

    return {
        "dtype": read(config, "model_config", "dtype"),
        "max_model_len": read(config, "model_config", "max_model_len"),
        "max_num_seqs": read(config, "scheduler_config", "max_num_seqs"),
        "max_num_batched_tokens": read(config, "scheduler_config", "max_num_batched_tokens"),
        "kv_cache_dtype": read(config, "cache_config", "cache_dtype"),
        "block_size": read(config, "cache_config", "block_size"),
        "world_size": read(config, "parallel_config", "world_size"),
        "quantization": read(config, "model_config", "quantization"),
        "use_mla": read(config, "model_config", "use_mla"),
    }


def run_check(argv: list[str]) -> dict[str, Any]:
    """Every check ``vllm serve ARGV`` makes before it serves, stopping at the first refusal."""
    try:
        args = _parse(argv)
        from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: PLC0415
        from vllm.entrypoints.openai.api_server import validate_api_server_args  # noqa: PLC0415
        from vllm.usage.usage_lib import UsageContext  # noqa: PLC0415

        _stage("api_server", validate_api_server_args, args)
        engine_args = _stage("engine_config", AsyncEngineArgs.from_cli_args, args)
        config = _stage("engine_config", engine_args.create_engine_config, UsageContext.OPENAI_API_SERVER)
        backend = _stage("attention_backend", _attention_backend, config)
        _stage("parsers", _parsers, args)
    except _Refused as refused:
        return {"ok": False, "stage": refused.stage, "error_type": type(refused.error).__name__,
                "error": refused.message or _message(refused.error), "summary": None}
    summary = _summary(config)
    summary["attention_backend"] = backend
    return {"ok": True, "stage": None, "error_type": None, "error": None, "summary": summary}


def _attention_backend(config: Any) -> str | None:
    """The backend ``Attention.__init__`` picks in the worker, with the model dtype as the default dtype."""
    import torch  # noqa: PLC0415
    from vllm.config import set_current_vllm_config  # noqa: PLC0415
    from vllm.v1.attention.selector import get_attn_backend  # noqa: PLC0415

    model = config.model_config
    if model.is_attention_free:
        return None
    previous = torch.get_default_dtype()
    torch.set_default_dtype(model.dtype)
    try:
        with set_current_vllm_config(config):
            backend = get_attn_backend(model.get_head_size(), model.dtype, config.cache_config.cache_dtype,
                                       use_mla=model.use_mla, num_heads=model.get_num_attention_heads(
                                           config.parallel_config))
    finally:
        torch.set_default_dtype(previous)
    return str(backend.get_name())


def _parsers(args: Any) -> None:
    from vllm.parser.parser_manager import ParserManager  # noqa: PLC0415

    ParserManager.get_reasoning_parser(args.structured_outputs_config.reasoning_parser)
    ParserManager.get_tool_parser(args.tool_call_parser, args.enable_auto_tool_choice, args.model)


def isolated(argv: list[str], timeout: float, gpus: int | None = None) -> dict[str, Any]:
    """:func:`run_check` in a forked child seeing ``gpus`` GPUs; a crash, a hang or an unreadable answer is
    ``ok: None``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            if gpus is not None:
                _GPU["count"] = gpus
            answer = run_check(argv)
        except BaseException as error:
            answer = {"ok": None, "stage": "oracle", "error_type": type(error).__name__,
                      "error": f"the check itself failed: {_message(error)}",
                      "trace": traceback.format_exc(limit=6)}
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(answer, default=str))
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": None, "stage": "oracle", "error_type": "Timeout",
                "error": f"the check did not finish within {timeout:g} s", "summary": None}
    try:
        parsed: dict[str, Any] = json.loads(b"".join(chunks))
    except ValueError:
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return {"ok": None, "stage": "oracle", "error_type": "Crash",
                "error": f"the check's process ended with {how} before answering", "summary": None}
    return parsed


# --- the server ----------------------------------------------------------------------------------------------

def serve(options: dict[str, Any]) -> int:
    # vLLM logs to standard output: the answers get a descriptor of their own, everything else goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cache = Path(options["cache"])
    offline_environment(cache)
    gpu = {"name": options["gpu_name"], "capability": tuple(int(p) for p in options["capability"].split(".")),
           "memory_gib": float(options["memory_gib"]), "count": int(options["gpus"])}
    try:
        install_fake_platform(Path(options["stub"]), gpu)
        import vllm  # noqa: PLC0415

        version = str(vllm.__version__)
        expected = options.get("expect_version")
        if expected and version != expected:
            raise RuntimeError(f"this environment holds vLLM {version}, not {expected}")
        if options.get("warm_up_model"):
            # In this process, before any fork: it imports the attention backends and the parsers once, so
            # each forked check starts with them loaded. A model alone sets nothing the checks share.
            run_check([options["warm_up_model"]])
    except Exception as error:
        answers.write(json.dumps({"ready": False, "error": f"{type(error).__name__}: {_message(error)}"}) + "\n")
        return 1
    answers.write(json.dumps({"ready": True, "vllm": version, "protocol": PROTOCOL_VERSION}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            gpus = request.get("gpus")
            answer = isolated([str(a) for a in request["argv"]], float(request.get("timeout", options["timeout"])),
                              None if gpus is None else int(gpus))
            answer["id"] = request.get("id")
        except (ValueError, KeyError, TypeError) as error:
            answer = {"id": None, "ok": None, "stage": "oracle", "error_type": type(error).__name__,
                      "error": f"unreadable request: {error}", "summary": None}
        answers.write(json.dumps(answer, default=str) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "build-stub":
        print(build_stub(Path(argv[1])))
        return 0
    if argv and argv[0] == "serve":
        options: dict[str, Any] = {"timeout": "60"}
        rest = argv[1:]
        for name, value in zip(rest[::2], rest[1::2], strict=False):
            options[name.removeprefix("--").replace("-", "_")] = value
        return serve(options)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
