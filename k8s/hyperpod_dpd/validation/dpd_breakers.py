"""Settings that pass every other check yet, on a cluster, silently turn DPD or its signals off.

Each rule names what breaks and the fix. The sources, all for the versions the DPD images ship:

* vLLM 0.19.0 (``vllm/engine/arg_utils.py``, ``vllm/config/cache.py``, ``vllm/v1/metrics/loggers.py``):
  ``--kv-offloading-size``/``--kv-offloading-backend`` build vLLM's own offloading KV connector, which
  takes the place of the one the operator wires (LMCache over NIXL); ``--num-gpu-blocks-override`` and
  ``--kv-cache-memory-bytes`` size the KV cache directly, so ``gpu_memory_utilization`` (what the
  planner sized) no longer decides it and an oversized cache fails at start; ``--cpu-offload-gb`` and
  the ``--offload-*`` flags move weights out of the GPU budget the planner assumed;
  ``--disable-log-stats`` removes every ``vllm:*`` series the alerts and KEDA read.
* LMCache 0.4.3 (``lmcache/integration/vllm/utils.py``): with ``--speculative-config`` the draft model's
  layers join the KV shape, so one role speculating makes the two roles' chunks incompatible.
  LMCache's ``Retrieved``/``Stored`` lines are INFO: ``LMCACHE_LOG_LEVEL`` above INFO hides what the
  log alarms read. ``LMCACHE_*`` variables override LMCache's configuration, including the PD wiring
  the operator sets (how it passes it is undocumented, so these are warnings).
* AWS's inference observability page: the reverse-proxy sidecar serves its metrics on port 9113 in
  the same pod.
* KEDA's Prometheus scaler: the query must return a single-element vector.
* vLLM 0.19.0 (``vllm/config/model.py``): a ``--max-model-len`` above the model's context window
  (``max_position_embeddings`` with rope scaling) stops the engine at start, so the pods crash-loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.contracts.vllm import flag_values
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.observability.metrics import METRICS_DIR, METRICS_DIR_ENV
from hyperpod_dpd.spec import PrometheusTrigger
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule

# The HyperPod reverse-proxy sidecar's metrics port (AWS docs: http://pod-ip:9113/metrics).
SIDECAR_METRICS_PORT = 9113

CONNECTOR_FLAGS = {
    "--kv-offloading-size": "vLLM's own KV offloading connector",
    "--kv-offloading-backend": "vLLM's own KV offloading connector",
}
MEMORY_FLAGS = {
    "--num-gpu-blocks-override": "fixes the number of KV cache blocks",
    "--kv-cache-memory-bytes": "fixes the KV cache's size in bytes",
    "--cpu-offload-gb": "moves weights to CPU memory",
    "--offload-backend": "offloads weights",
    "--offload-group-size": "offloads weights",
    "--offload-num-in-group": "offloads weights",
    "--offload-params": "offloads weights",
    "--cpu-offload-params": "offloads weights",
}
METRICS_OFF_FLAG = "--disable-log-stats"
ONE_ROLE_SHAPE_FLAGS = {"--speculative-config": "adds the draft model's layers to LMCache's KV shape"}
# LMCache's logger levels, quietest last; its Retrieved/Stored lines are INFO.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LMCACHE_PD_ENV = re.compile(r"^LMCACHE_(ENABLE_PD|PD_.*|TRANSFER_CHANNEL|NIXL_.*|CONFIG_FILE|USE_EXPERIMENTAL)$")
# KEDA reads one number: an aggregation without grouping (or scalar()) at the top of the query.
SINGLE_VALUE = re.compile(r"^\s*(sum|avg|max|min|count|scalar|histogram_quantile|quantile)\s*\(")
GROUPED = re.compile(r"^\s*(sum|avg|max|min|count|quantile)\s*(by|without)\s*\(|\)\s*(by|without)\s*\([^()]*\)\s*$")


# vLLM's human-readable integers: 1k = 1000, 1K = 1024 (vllm/engine/arg_utils.py, human_readable_int).
_HUMAN_INT = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>[kKmMgG]?)$")
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def _length(value: str | None) -> int | None:
    """``--max-model-len``'s value as vLLM reads it; None for ``auto``/-1 or what vLLM itself refuses."""
    found = _HUMAN_INT.match((value or "").strip())
    if found is None:
        return None
    return int(float(found["number"]) * _UNITS[found["unit"]])


def _all_args(ctx: RuleContext) -> Iterator[tuple[str, dict[str, str | None]]]:
    yield "args", flag_values(ctx.spec.args)
    for role_name, role in ctx.spec.roles():
        yield f"{role_name}.args", flag_values(role.args)


@register_rule
def engine_flags(ctx: RuleContext) -> Iterator[Finding]:
    """Flags that replace the PD connector, bypass the memory sizing or remove the metrics."""
    for field, flags in _all_args(ctx):
        for flag, what in CONNECTOR_FLAGS.items():
            if flag in flags:
                yield Problem(field=field, value=flag, message=f"configures {what}, which replaces the LMCache/NIXL "
                              "connector the operator wires for prefill/decode: no KV cache would reach the decoder",
                              fix="remove it; kv_cache sets the PD transfer")
        for flag, what in MEMORY_FLAGS.items():
            if flag in flags:
                yield Problem(field=field, value=f"{flag} {flags[flag] or ''}".strip(),
                              message=f"{what}, so gpu_memory_utilization (what the planner sized, with the PD "
                                      "buffer beside it) no longer decides GPU memory: the pod can run out of "
                                      "memory at start or leave no room for the PD buffer",
                              fix="remove it and size with gpu_memory_utilization (run `hyperpod-dpd plan`)")
        if METRICS_OFF_FLAG in flags and ctx.spec.metrics.enabled:
            yield Problem(field=field, value=METRICS_OFF_FLAG,
                          message="stops vLLM's statistics, and with them every vllm:* series the DPD alerts, the "
                                  "dashboard, `verify --smoke` and Prometheus autoscaling triggers read",
                          fix="remove it, or set metrics.enabled: false to say the endpoint is unobserved")
    shared = flag_values(ctx.spec.args)
    prefill, decode = flag_values(ctx.spec.prefill.args), flag_values(ctx.spec.decode.args)
    for flag, what in ONE_ROLE_SHAPE_FLAGS.items():
        if flag in shared:
            continue
        if (flag in prefill) != (flag in decode) or prefill.get(flag) != decode.get(flag):
            role = "prefill" if flag in prefill else "decode"
            yield Problem(field=f"{role}.args", value=flag,
                          message=f"{what} on one role only; prefill and decode must agree on the KV layout, or "
                                  "the decoder never finds the KV the prefiller sent",
                          fix="move it to the shared args, or give both roles the same value")


@register_rule
def environment(ctx: RuleContext) -> Iterator[Finding]:
    """Environment variables that hide the log lines the alarms read or rewire LMCache's PD transfer."""
    for key, value in ctx.spec.env.items():
        if key == METRICS_DIR_ENV and ctx.spec.metrics.enabled:
            yield Problem(field=f"env.{key}", value=value,
                          message=f"is set by the library to {METRICS_DIR} (a directory that exists before vLLM "
                                  "starts) so that LMCache's metrics reach vLLM's /metrics; a directory that does "
                                  "not exist stops vLLM at start",
                          fix="remove it from env")
        elif key == "LMCACHE_LOG_LEVEL" and value.upper() in LOG_LEVELS[2:]:
            yield SpecWarning(code="LogLinesHidden", field=f"env.{key}",
                          message=f"{value} hides LMCache's INFO lines ('Retrieved ... out of', 'Stored ... "
                                  "throughput') that the KvNotRetrieved and KvTransferBelow1GBps alarms read; "
                                  "use INFO")
        elif LMCACHE_PD_ENV.match(key):
            yield SpecWarning(code="LmcachePdOverride", field=f"env.{key}",
                          message="overrides LMCache's prefill/decode wiring, which the operator sets for each "
                                  "role; a wrong role, channel or peer stops every KV transfer. Remove it unless "
                                  "AWS support asked for it")


@register_rule
def ports(ctx: RuleContext) -> Iterator[Finding]:
    """The sidecar's metrics port is taken in every model pod."""
    spec = ctx.spec
    if spec.port == SIDECAR_METRICS_PORT:
        yield Problem(field="port", value=spec.port, message="is where the operator's reverse-proxy sidecar serves "
                      "its metrics in the same pod, so vLLM could not bind it", fix="use e.g. 8000")
    if spec.metrics.model_metrics_port == SIDECAR_METRICS_PORT:
        yield Problem(field="metrics.model_metrics_port", value=SIDECAR_METRICS_PORT,
                      message="is the sidecar's metrics port: the operator would scrape the sidecar twice and vLLM "
                              "never, so every vllm:* series is absent",
                      fix=f"leave it unset (vLLM's port, {spec.port})")


@register_rule
def autoscaling_signals(ctx: RuleContext) -> Iterator[Finding]:
    """Autoscaling that leaves no prefiller, or that KEDA cannot evaluate."""
    for role_name, role in ctx.spec.roles():
        scaling = role.autoscaling
        if scaling is None:
            continue
        if role_name == "prefill" and scaling.min_replicas == 0:
            yield SpecWarning(code="PrefillScalesToZero", field="prefill.autoscaling.min_replicas",
                          message="0 leaves no prefiller while the trigger is idle: long prompts then have no "
                                  "disaggregated path until KEDA activates one (DpdNoReadyPod stays quiet on "
                                  "purpose); use 1 to keep DPD on")
        for i, trigger in enumerate(scaling.triggers):
            if not isinstance(trigger, PrometheusTrigger):
                continue
            field = f"{role_name}.autoscaling.triggers[{i}].query"
            if not SINGLE_VALUE.match(trigger.query) or GROUPED.search(trigger.query):
                yield Problem(field=field, value=trigger.query,
                              message="may return several series; KEDA's Prometheus scaler needs a query that "
                                      "returns exactly one value and errors otherwise, so the role never scales",
                              fix="wrap it in an aggregation without 'by', e.g. sum(...) or max(...)")
            elif "vllm:" in trigger.query and not ctx.spec.metrics.enabled:
                yield Problem(field=field, value=trigger.query,
                              message="reads vLLM metrics, but metrics.enabled is false, so nothing is scraped",
                              fix="set metrics.enabled: true or scale on another signal")


@register_rule
def context_window(ctx: RuleContext) -> Iterator[Finding]:
    """A length above the model's context window: vLLM refuses to start and the pods crash-loop."""
    arch = ctx.architecture
    limit = arch.max_context_length if arch is not None else None
    if arch is None or limit is None:
        return
    lengths: list[tuple[str, int]] = [("max_model_len", ctx.spec.max_model_len)]
    for field, flags in _all_args(ctx):
        value = _length(flags.get("--max-model-len")) if "--max-model-len" in flags else None
        if value is not None:
            lengths.append((field, value))
    for field, length in lengths:
        if length > limit:
            shown = length if field == "max_model_len" else f"--max-model-len {length}"
            yield Problem(field=field, value=shown,
                          message=f"is above {arch.name}'s context window of {limit} tokens, so vLLM refuses to "
                                  "start and the pods would crash-loop; the limit is "
                                  f"{arch.context_source or 'from its config.json'}",
                          fix=f"set max_model_len to {limit} or less"
                              + ("" if field == "max_model_len" else " and remove --max-model-len from the args"))
