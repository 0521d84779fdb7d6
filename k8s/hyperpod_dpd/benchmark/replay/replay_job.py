"""The Job that replays a trace: ``bench``'s own benchmark Job, its loop running aiperf's fixed schedule per window.

The Job is :func:`hyperpod_dpd.benchmark.run.job.render_benchmark_job`'s (the same tokenizer copy, client install,
publish step, security context, node placement and ServiceAccount), with three changes: the ConfigMap of window
files (:mod:`hyperpod_dpd.benchmark.replay.replay`) is mounted at ``/trace``; the benchmark container's loop runs one
``aiperf profile`` per window instead of per level, on that window's file, between the same quiet pauses; and the
deadline is the windows' time. An empty window sends nothing for its length (the trace's idle time) instead, and a
window whose requests end early sleeps out the rest of its length from aiperf's schedule zero (:data:`SLEEP_OUT`),
so every window starts on the replay clock unless the one before it outlasted its length.

aiperf's flags for a replay (aiperf==0.13.0): ``--custom-dataset-type mooncake_trace`` with ``--input-file`` reads
the rows (aiperf/dataset/loader/mooncake_trace.py); ``--fixed-schedule`` sends each at its timestamp
(aiperf/timing/strategies/fixed_schedule.py); ``--fixed-schedule-start-offset 0`` turns aiperf's auto-offset off
(config/flags/_converter_profiling.py:812-813), so the schedule's zero is the window's start and a window whose
first request comes late is not shifted forward (fixed_schedule.py:111-117). Speed-up is applied here, not with
``--synthesis-speedup-ratio``: any synthesis option sends the rows through aiperf's synthesizer, which rebuilds the
prefix hashes (aiperf/dataset/loader/base_trace_loader.py:50-66 and 313-314; synthesis/synthesizer.py). Rows with
``hash_ids`` become prompts whose blocks of ``--isl-block-size`` tokens are the same text wherever a hash repeats
in one file (dataset/generator/prompt.py:576-669), so a window keeps the trace's prefix reuse; aiperf scopes that
text to the file (base_trace_loader.py:263-281), so a prefix shared across two windows is not shared on the
replay. ``ignore_eos`` makes every answer the row's ``output_length`` (``max_tokens``).
"""

from __future__ import annotations

import copy
import math
import shlex
from collections.abc import Mapping
from typing import Any

from hyperpod_dpd.benchmark.replay.replay import Replay, config_map, window_files
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import (
    BENCHMARK_CONTAINER,
    LEVEL_SLACK_SECONDS,
    QUIET_SECONDS,
    RESULTS_MARK,
    SETUP_SECONDS,
    JobOptions,
    _install_script,
    aiperf_args,
    job_name,
    render_benchmark_job,
)
from hyperpod_dpd.benchmark.run.scenario import Scenario, arrival_seed
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget
from hyperpod_dpd.contracts.bench_job import MANAGED_BY
from hyperpod_dpd.traces import BLOCK_TOKENS

TRACE_MOUNT = "/trace"
TRACE_VOLUME = "trace"
WINDOW_RESULT = "aiperf_window_{index}"  # a window's summary (.json) and records (.jsonl) in the results folder
# A stand-in scenario for the parts of the Job a replay shares with a level run (its own flags are spliced out).
_BASE = Scenario(isl=1, osl=2, request_rates=(1.0,), requests=1, max_seconds=60, client=Client.AIPERF)


def trace_config_map_name(target: BenchmarkTarget, options: JobOptions) -> str:
    return f"{job_name(target, options)}-trace"


def replay_flags() -> list[str]:
    """The load-shape flags of a window's ``aiperf profile`` (the pod adds the window's file and seed)."""
    return ["--custom-dataset-type", "mooncake_trace", "--fixed-schedule", "--fixed-schedule-start-offset", "0",
            "--isl-block-size", str(BLOCK_TOKENS), "--extra-inputs", "ignore_eos:true"]


def replay_args(target: BenchmarkTarget, options: JobOptions) -> list[str]:
    """``bench``'s aiperf command (the router, the tokenizer, records, no readiness probe) with a window's flags in
    place of a level's."""
    full, own = aiperf_args(target, _BASE, options), _BASE.aiperf_args()
    start = next(i for i in range(len(full)) if full[i:i + len(own)] == own)
    return [*full[:start], *replay_flags(), *full[start + len(own):]]


def window_plan(replay: Replay, run_id: str) -> str:
    """Space-separated, for the pod's loop: ``INDEX:REQUESTS:SECONDS:SEED`` per window (an empty window pauses
    ``SECONDS``). The seed is the window's own (:func:`arrival_seed`): aiperf draws a prompt without hashes from
    it, and one seed for every window would re-send the same prompts, a prefix-cache hit the trace did not have."""
    return " ".join(f"{w.index}:{len(w.requests)}:{math.ceil(w.duration_s)}:{arrival_seed(run_id, w.index)}"
                    for w in replay.windows)


# After a window's aiperf run: sleep out the window from aiperf's schedule zero (the summary's start_time, the
# profiling phase's start: aiperf==0.13.0 exporters/metrics_json_exporter.py:60-63; each request leaves at that
# start plus its offset, timing/strategies/fixed_schedule.py:67-73), so the trace's idle tail is kept and the next
# window starts on the replay clock. No summary (aiperf failed) sleeps nothing.
SLEEP_OUT = (
    "import datetime, json, sys, time\n"
    "try:\n"
    "    began = datetime.datetime.fromisoformat(json.load(open(sys.argv[1]))['start_time']).timestamp()\n"
    "except (OSError, ValueError, KeyError, TypeError):\n"
    "    sys.exit(0)\n"
    "time.sleep(max(0.0, min(float(sys.argv[2]), began + float(sys.argv[2]) - time.time())))\n")


def replay_script() -> str:
    """The benchmark container's script: the client install, then one fixed-schedule run per window."""
    result = WINDOW_RESULT.format(index="$window")
    return (
        "set -u\n"
        f"{_install_script(Client.AIPERF)}"
        "code=0 done=0\n"
        'mkdir -p "/results/$RUN_ID" /tmp/replay\n'
        f'echo "{RESULTS_MARK} quiet=0"; sleep "$QUIET_SECONDS"\n'
        "for plan in $LEVELS; do\n"
        '  window="${plan%%:*}"; rest="${plan#*:}"; count="${rest%%:*}"; rest="${rest#*:}"; seconds="${rest%%:*}"\n'
        f'  echo "{RESULTS_MARK} level=$window"\n'
        '  if [ "$count" = 0 ]; then\n'
        '    sleep "$seconds"  # the trace sent nothing in this window\n'
        "  else\n"
        '    file="/tmp/replay/window-$window.jsonl"; out="/results/aiperf/window-$window"\n'
        "    python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "
        f"\"wb\"))' \"{TRACE_MOUNT}/window-$window.jsonl.gz\" \"$file\"\n"
        '    aiperf "$@" --input-file "$file" --random-seed "${rest##*:}" --artifact-dir "$out"\n'
        "    code=$?\n"
        f'    cp "$out/profile_export_aiperf.json" "/results/$RUN_ID/{result}.json" 2>/dev/null\n'
        f'    cp "$out/profile_export.jsonl" "/results/$RUN_ID/{result}.jsonl" 2>/dev/null\n'
        '    mkdir -p /results/logs; cat "$out/logs/aiperf.log" >> /results/logs/aiperf.log 2>/dev/null\n'
        f"    python3 -c {shlex.quote(SLEEP_OUT)} \"$out/profile_export_aiperf.json\" \"$seconds\"  "
        "# the rest of the window\n"
        "  fi\n"
        "  done=$((done + 1))\n"
        f'  echo "{RESULTS_MARK} quiet=$done"; sleep "$QUIET_SECONDS"\n'
        '  [ "$code" = 0 ] || break  # every request of the window failed: aiperf exits 1\n'
        "done\n"
        "echo $code > /results/exit-code\n")


def replay_deadline_seconds(replay: Replay, quiet_seconds: int = QUIET_SECONDS) -> int:
    """Setup, every window's length with a level's slack, and the pauses around them."""
    windows = len(replay.windows)
    return SETUP_SECONDS + math.ceil(sum(w.duration_s + LEVEL_SLACK_SECONDS for w in replay.windows)) + \
        (windows + 1) * quiet_seconds


def render_replay_job(target: BenchmarkTarget, replay: Replay, options: JobOptions) -> list[dict[str, Any]]:
    """The trace's ConfigMap, the ServiceAccount and the Job; raises :class:`SpecError` for bad options or a trace
    too large for the ConfigMap."""
    files = window_files(replay)
    name = trace_config_map_name(target, options)
    labels = {**MANAGED_BY, "hyperpod-dpd/endpoint": target.name, "hyperpod-dpd/run": options.run_id}
    trace = config_map(name, target.namespace, files, labels=labels)
    objects = copy.deepcopy(render_benchmark_job(target, _BASE, options))
    job = next(o for o in objects if o["kind"] == "Job")
    job["spec"]["activeDeadlineSeconds"] = replay_deadline_seconds(replay, options.quiet_seconds)
    pod = job["spec"]["template"]["spec"]
    pod.setdefault("volumes", []).append({"name": TRACE_VOLUME, "configMap": {"name": name}})
    container = next(c for c in pod["initContainers"] if c["name"] == BENCHMARK_CONTAINER)
    container["command"] = [container["command"][0], container["command"][1], replay_script(),
                            *container["command"][3:]]
    container["args"] = replay_args(target, options)
    _set_env(container, {"LEVELS": window_plan(replay, options.run_id)}, drop=("LEVELS_JSON",))
    container["volumeMounts"] = sorted([*container.get("volumeMounts", []), {
        "mountPath": TRACE_MOUNT, "name": TRACE_VOLUME, "readOnly": True}], key=lambda m: m["mountPath"])
    return [trace, *objects]


def _set_env(container: dict[str, Any], values: Mapping[str, str], *, drop: tuple[str, ...] = ()) -> None:
    env = [e for e in container.get("env", []) if e["name"] not in drop]
    for item in env:
        if item["name"] in values:
            item["value"] = values[item["name"]]
    container["env"] = env
