"""A request trace cut into the windows ``bench --trace`` replays, and the files that carry them into the pod.

The replay runs on its own clock: a request at ``at_s`` in the trace is sent ``at_s / speedup`` seconds into the
replay, and the replay is cut into windows of ``window_s`` seconds of that clock. Each window is one run of aiperf's
fixed schedule (:mod:`hyperpod_dpd.benchmark.replay.replay_job`) between two of the pod's quiet pauses, so the
router's and decoder's counters are read around it exactly as around a load level, and the window gets a level's
proof of disaggregation (:mod:`hyperpod_dpd.benchmark.replay.replay_proof`). The price is that the endpoint drains
between windows: a queue built late in one window does not carry into the next, and the pause itself is idle time
the trace did not have.

The windows travel as one ConfigMap of gzipped Mooncake JSONL files (one per window, the traces package's writer).
Not S3: the stack's benchmark role may only ``s3:PutObject`` under ``benchmarks/``
(constructs/hyperpod_dpd_cdk/benchmark_access.py), so reading a trace from S3 would need a new read grant for the
pod and a write grant for the user, while a ConfigMap needs neither. A ConfigMap holds at most 1 MiB of data
(Kubernetes ``ValidateConfigMap`` sums every ``data`` and ``binaryData`` value against ``core.MaxSecretSize``,
``1 * 1024 * 1024``: kubernetes/kubernetes@v1.34.1 pkg/apis/core/validation/validation.go and
pkg/apis/core/types.go), which gzipped Mooncake rows fill at roughly 100,000 requests without prefix hashes (a
BurstGPT day is about 12,000); a larger trace is refused before anything is created, saying how to cut it.
"""

from __future__ import annotations

import base64
import gzip
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.benchmark.run.scenario import SEEDS_PER_RUN
from hyperpod_dpd.errors import Problem, raise_if_any

# the summary's window (five minutes), so a replay's windows are the ones advise --trace reports; the hashes' block
# size is the one aiperf's Mooncake loader reads and the traces package writes (512 tokens)
from hyperpod_dpd.traces import BLOCK_TOKENS, DEFAULT_WINDOW_S, Trace, TraceRequest, write_mooncake
from hyperpod_dpd.traces.blocks import BlockSizes  # aiperf's prompt-building rule, shared with the writer

DEFAULT_SPEEDUP = 1.0
MIN_WINDOW_S = 1.0  # one second of schedule; under a minute the pauses between windows outweigh the traffic
MAX_WINDOW_S = 86_400.0  # a day: the pod's deadline and an empty window's sleep stay integers Kubernetes accepts
# three and a half days of five-minute windows; each costs a pause and an aiperf start-up, and draws its own seed of
# the run's SEEDS_PER_RUN (more windows would repeat a seed, so the same prompts)
MAX_WINDOWS = SEEDS_PER_RUN
MIN_SPEEDUP = 0.001  # a trace second replayed over a quarter of an hour: slower is no replay, and overflows the clock
MAX_SPEEDUP = 1000.0  # aiperf schedules in milliseconds (Mooncake timestamps): far past this, arrivals collapse
# The chat template's tokens beside a prompt's own: Llama 3.1-3.3's default adds about 36 to one user message (the
# system header with its knowledge and today dates, the user and assistant headers); vLLM counts them against
# max_model_len and answers HTTP 400 past it, so a row that fills the context exactly would fail.
CHAT_TEMPLATE_TOKENS = 64
CONFIG_MAP_LIMIT = 1024 * 1024  # core.MaxSecretSize, which ValidateConfigMap applies to data plus binaryData
WINDOW_FILE = "window-{index}.jsonl.gz"


@dataclass(frozen=True, kw_only=True)
class Window:
    """One window of the replay.

    :param index: its place, from 0. :param start_s: its start on the replay clock.
    :param duration_s: its length on the replay clock (every window has the same, the last included).
    :param requests: its requests, ``at_s`` counted from the window's start on the replay clock.
    :param trace_start_s: its start in the trace's own time (``start_s`` times the speedup).
    """

    index: int
    start_s: float
    duration_s: float
    requests: tuple[TraceRequest, ...]
    trace_start_s: float

    @property
    def arrivals_per_s(self) -> float:
        """Requests sent per second of the replay clock over the whole window."""
        return len(self.requests) / self.duration_s

    @property
    def file_name(self) -> str:
        return WINDOW_FILE.format(index=self.index)


@dataclass(frozen=True, kw_only=True)
class Replay:
    """A trace as the pod replays it.

    :param source: what was read (the trace's own ``source``). :param speedup: trace seconds per replay second.
    :param window_s: each window's length on the replay clock. :param windows: every window, empty ones included.
    :param too_long: requests left out because their input plus output plus the chat template's tokens exceeds
        the spec's ``max_model_len`` (vLLM would answer them HTTP 400).
    """

    source: str
    speedup: float
    window_s: float
    windows: tuple[Window, ...]
    too_long: int = 0

    @property
    def requests(self) -> int:
        return sum(len(window.requests) for window in self.windows)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "speedup": self.speedup, "window_s": self.window_s,
                "windows": len(self.windows), "requests": self.requests, "too_long": self.too_long}


def option_problems(*, speedup: float, window_s: float) -> list[Problem]:
    """``--trace-speedup`` and ``--trace-window`` that cannot be replayed."""
    problems = []
    if not isinstance(speedup, int | float) or isinstance(speedup, bool) or not math.isfinite(speedup) \
            or not MIN_SPEEDUP <= speedup <= MAX_SPEEDUP:
        problems.append(Problem(field="--trace-speedup", value=speedup, message=(
            f"must be at least {MIN_SPEEDUP:g} and at most {MAX_SPEEDUP:g} (trace seconds per replayed second; "
            "aiperf schedules arrivals to the millisecond)"),
            fix="use e.g. 1 for real time or 10 to replay ten times faster"))
    if not isinstance(window_s, int | float) or isinstance(window_s, bool) or not math.isfinite(window_s) \
            or not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        problems.append(Problem(field="--trace-window", value=window_s, message=(
            f"must be at least {MIN_WINDOW_S:g} second of the replay and at most {MAX_WINDOW_S:,.0f} (a day), a finite "
            "number (each window is one aiperf run between two counter readings; a minute or more keeps the pauses "
            "between windows small)"), fix=f"use e.g. {DEFAULT_WINDOW_S:g}"))
    return problems


def hash_problems(requests: tuple[TraceRequest, ...], *, where: str) -> list[Problem]:
    """Prefix hashes aiperf cannot turn into a prompt: it builds each hash as one block of :data:`BLOCK_TOKENS`
    tokens and the last as the remainder, refuses a last block outside (0, block], and refuses a hash it already
    built at another size (aiperf==0.13.0 aiperf/dataset/generator/prompt.py:629-669, ``_build_token_sequence``)."""
    sizes = BlockSizes(block_tokens=BLOCK_TOKENS)
    for number, request in enumerate(requests, start=1):
        refusal = sizes.refusal(request.input_tokens, request.prefix_blocks)
        if refusal:
            return [Problem(field="--trace", value=f"{where}, request {number}", message=refusal.message,
                            fix=refusal.fix)]
    return []


def fits_model(request: TraceRequest, max_model_len: int) -> bool:
    """Whether vLLM can answer ``request``: its input, output and the chat template's tokens within the context."""
    return request.input_tokens + request.output_tokens + CHAT_TEMPLATE_TOKENS <= max_model_len


def plan_replay(trace: Trace, *, speedup: float = DEFAULT_SPEEDUP, window_s: float = DEFAULT_WINDOW_S,
                max_model_len: int | None = None) -> Replay:
    """``trace`` cut into windows of ``window_s`` replay seconds at ``speedup``; raises :class:`SpecError` for options
    or a trace that cannot be replayed. Requests the model cannot hold (:func:`fits_model`) are left out and
    counted."""
    raise_if_any(option_problems(speedup=speedup, window_s=window_s))
    if trace.block_tokens not in (None, BLOCK_TOKENS) and any(r.prefix_blocks for r in trace.requests):
        raise_if_any([Problem(field="--trace", value=trace.source, message=(
            f"has prefix hashes of {trace.block_tokens} tokens each, but aiperf reads Mooncake hash_ids as "
            f"{BLOCK_TOKENS}-token blocks"), fix=f"regenerate the trace with {BLOCK_TOKENS}-token blocks")])
    kept = tuple(r for r in trace.requests if max_model_len is None or fits_model(r, max_model_len))
    if not kept:
        raise_if_any([Problem(field="--trace", value=trace.source, message=(
            "holds no request to replay" + (f" within max_model_len {max_model_len}" if trace.requests else "")),
            fix=f"give a trace with at least one request whose input plus output is at most max_model_len less "
                f"{CHAT_TEMPLATE_TOKENS} (the chat template's tokens)")])
    spans = kept[-1].at_s / speedup / window_s
    if not spans < MAX_WINDOWS:  # a float first: a slow replay of a long trace is no integer to count to
        raise_if_any([Problem(field="--trace-window", value=window_s, message=(
            f"cuts the {kept[-1].at_s / speedup:,.0f} s replay into {spans:,.0f} windows or more, more than "
            f"{MAX_WINDOWS:,}"), fix="use a longer --trace-window or a higher --trace-speedup")])
    count = math.floor(spans) + 1
    buckets: list[list[TraceRequest]] = [[] for _ in range(count)]
    for request in kept:
        at = request.at_s / speedup
        index = min(count - 1, math.floor(at / window_s))
        buckets[index].append(TraceRequest(at_s=at - index * window_s, input_tokens=request.input_tokens,
                                           output_tokens=request.output_tokens, prefix_blocks=request.prefix_blocks))
    windows = tuple(Window(index=i, start_s=i * window_s, duration_s=window_s, requests=tuple(found),
                           trace_start_s=i * window_s * speedup) for i, found in enumerate(buckets))
    for window in windows:
        raise_if_any(hash_problems(window.requests, where=f"window {window.index}"))
    return Replay(source=trace.source, speedup=speedup, window_s=window_s, windows=windows,
                  too_long=len(trace.requests) - len(kept))


def _mooncake(window: Window, source: str) -> bytes:
    """The window's requests as Mooncake JSONL (the traces package's writer), gzipped with no timestamp."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "window.jsonl"
        write_mooncake(Trace(requests=window.requests, source=source,
                             block_tokens=BLOCK_TOKENS if any(r.prefix_blocks for r in window.requests) else None),
                       path)
        text = path.read_bytes()
    return gzip.compress(text, mtime=0)


def window_files(replay: Replay) -> dict[str, bytes]:
    """Each non-empty window's gzipped Mooncake file, by file name (an empty window is a pause, not a file)."""
    return {window.file_name: _mooncake(window, f"{replay.source}, window {window.index}")
            for window in replay.windows if window.requests}


def size_problems(files: Mapping[str, bytes]) -> list[Problem]:
    """A trace whose window files do not fit one ConfigMap (:data:`CONFIG_MAP_LIMIT`)."""
    total = sum(len(data) for data in files.values())
    if total <= CONFIG_MAP_LIMIT:
        return []
    return [Problem(field="--trace", value=f"{total:,} bytes gzipped", message=(
        f"does not fit a ConfigMap, which Kubernetes caps at {CONFIG_MAP_LIMIT:,} bytes of data (the pod reads the "
        "trace from one)"), fix=(
        f"replay a part of the trace: cut it to about {CONFIG_MAP_LIMIT / total:.0%} of its requests (an hour of "
        "the peak, say) and run bench once per part"))]


def config_map(name: str, namespace: str, files: Mapping[str, bytes], *,
               labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ConfigMap that carries the window files (``binaryData``: gzip is not UTF-8); raises :class:`SpecError`
    when they exceed :data:`CONFIG_MAP_LIMIT`."""
    raise_if_any(size_problems(files))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})},
            "immutable": True,
            "binaryData": {key: base64.b64encode(files[key]).decode("ascii") for key in sorted(files)}}
