"""SLO autoscaling (``<role>.autoscaling.slo``): what the compiler needs, refused with the fix when it is missing.

The compiler (:mod:`hyperpod_dpd.scaling`) reads these rules' facts too: which ``slo:`` target a role
is held to, and how many replicas a node or dollar budget allows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.contracts.prices import table_price, unpriced_reason
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.spec import DpdSpec, SloScaling
from hyperpod_dpd.validation.autoscaling import AMP_WORKSPACE
from hyperpod_dpd.validation.context import Finding, RuleContext, problem

# The latency target each role's capacity is held to, by the spec's ``slo:`` field: a prefiller sets the
# time to the first token, a decoder the time per output token.
TARGET_FIELD = {"prefill": "ttft_ms", "decode": "tpot_ms"}
# The names the compiled triggers take; a written trigger may not reuse one (KEDA needs unique names).
COMPILED_SUFFIXES = ("slo-demand", "slo-queue", "slo-ratio")
# The shortest prompt the default prefill capacity is computed for (scaling/shape.py prompt_lengths). A
# prefiller's tokens per second fall steeply below it, where the KV transfer and the first decode step cost
# more than the prefill (the default layout serves 82 tokens/s of 1-token prompts, 19,085 of 4,096-token
# ones, by the advisor): sized for 1-token prompts, 1 req/s of 4k prompts would ask for 57 prefillers, not 1.
SHORT_PROMPT_TOKENS = 1024
# The largest capacity one replica may pin, tokens per second: far above any GPU node's prefill rate (the
# default layout's is ~2e4), and short enough that the rendered targetValue stays a plain number.
MAX_CAPACITY_TOKENS_PER_S = 1e7
WORKSPACE_FIX = "write https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id> (the stack's AMP workspace)"


def missing_target(role: str) -> Problem:
    name = TARGET_FIELD[role]
    what = "time to first token" if role == "prefill" else "time per output token"
    return Problem(field=f"{role}.autoscaling.slo", value=True,
                   message=f"scales {role} on its latency SLO, but the spec has no slo.{name} ({what}) to hold it to",
                   fix=f"add slo: {{{name}: {2000 if role == 'prefill' else 50}}}, or remove {role}.autoscaling.slo")


def pods_per_node(spec: DpdSpec, role: str) -> int:
    """The role's pods one node holds (its GPUs per pod out of the node's)."""
    gpus = spec.role_gpus(dict(spec.roles())[role])
    return max(1, spec.instance_type.facts.gpus // gpus) if gpus >= 1 else 1


def budget_replicas(spec: DpdSpec, role: str, slo: SloScaling) -> tuple[int | None, str]:
    """The most replicas the node and dollar budgets allow (``None``: no budget), and which budget binds.

    The dollar budget buys whole nodes at the price table's rate; an unpriced instance type has no dollar cap
    (the rule below refuses that spec).
    """
    per_node = pods_per_node(spec, role)
    found: list[tuple[int, str]] = []
    if slo.max_nodes is not None:
        found.append((slo.max_nodes * per_node, f"max_nodes {slo.max_nodes}"))
    price = table_price(spec.instance_type.facts.name)
    if slo.max_usd_per_hour is not None and price is not None and math.isfinite(slo.max_usd_per_hour):
        nodes = max(0, math.floor(slo.max_usd_per_hour / price.usd_per_node_hour + 1e-9))
        found.append((nodes * per_node, f"max_usd_per_hour {slo.max_usd_per_hour:g} at "
                                        f"${price.usd_per_node_hour:,.2f} per node-hour ({nodes} nodes)"))
    if not found:
        return None, ""
    return min(found)


def _finite(value: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def slo_scaling(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    url = spec.metrics.amp_workspace_url
    if url is not None and not AMP_WORKSPACE.fullmatch(url):
        yield problem("metrics.amp_workspace_url", url, "must be an Amazon Managed Prometheus workspace URL",
                      WORKSPACE_FIX)
    for role, cfg in spec.roles():
        scaling = cfg.autoscaling
        if scaling is None or scaling.slo is None:
            continue
        yield from _role(spec, role, scaling.min_replicas, scaling.max_replicas, scaling.slo)
        if scaling.slo.start_up_seconds is None and ctx.architecture is None:
            yield problem(f"{role}.autoscaling.slo.start_up_seconds", None, "is estimated from the model's weight "
                          "bytes, but the model's architecture is unknown", "give start_up_seconds (how long a new "
                          "pod takes to serve), or model.architecture")
        names = {f"{role}-{suffix}" for suffix in COMPILED_SUFFIXES}
        for i, trigger in enumerate(scaling.triggers):
            if trigger.name in names:
                yield problem(f"{role}.autoscaling.triggers[{i}].name", trigger.name, "is the name of a trigger "
                              "autoscaling.slo compiles (KEDA needs each name once)", "rename the trigger")


def _role(spec: DpdSpec, role: str, minimum: int, maximum: int, slo: SloScaling) -> Iterator[Finding]:
    field = f"{role}.autoscaling.slo"
    target = None if spec.slo is None else getattr(spec.slo, TARGET_FIELD[role])
    if target is None:
        yield missing_target(role)
    if not spec.metrics.enabled:
        yield problem("metrics.enabled", False, f"{field} scales on the pods' vLLM metrics, which are not scraped "
                      "with metrics off", f"set metrics.enabled: true, or remove {field}")
    if spec.metrics.amp_workspace_url is None:
        yield problem("metrics.amp_workspace_url", None, f"is needed by {field}: its KEDA triggers query the "
                      "Amazon Managed Prometheus workspace the metrics reach", WORKSPACE_FIX)
    if minimum < 1:
        yield problem(f"{role}.autoscaling.min_replicas", minimum, f"must be at least 1 with {field}: while its "
                      "series are absent the triggers hold the planned replicas, and a role at zero pods has no "
                      "series, so it would be scaled straight back up", "set min_replicas: 1")
    output = slo.output_tokens
    if output < 1 or output >= spec.max_model_len:
        yield problem(f"{field}.output_tokens", output, f"must be between 1 and max_model_len - 1 "
                      f"({spec.max_model_len - 1})", "give e.g. 256")
    elif slo.input_tokens is not None:
        if not 1 <= slo.input_tokens <= spec.max_model_len - output:
            yield problem(f"{field}.input_tokens", slo.input_tokens, f"plus output_tokens {output} must be within "
                          f"max_model_len {spec.max_model_len}, and at least 1", "give the typical prompt length")
        elif role == "prefill" and slo.input_tokens < spec.routing.threshold:
            yield problem(f"{field}.input_tokens", slo.input_tokens, f"is below routing.threshold "
                          f"{spec.routing.threshold}: no prompt that short reaches a prefiller",
                          f"give at least {spec.routing.threshold}, or leave it to default to the threshold")
    elif role == "prefill" and spec.routing.threshold < SHORT_PROMPT_TOKENS:
        yield SpecWarning(code="SloShortPrompts", field="routing.threshold",
                          message=f"is {spec.routing.threshold}, so prompts under {SHORT_PROMPT_TOKENS} tokens reach "
                                  f"the prefillers, but {field}'s capacity is computed from {SHORT_PROMPT_TOKENS} "
                                  "tokens up: a prefiller serves far fewer tokens per second of shorter prompts "
                                  "(the KV transfer and first decode step outweigh the prefill), so many short "
                                  f"prompts would overload it. Raise routing.threshold to {SHORT_PROMPT_TOKENS} or "
                                  f"more (short prompts are cheaper prefilled on the decoder), or set "
                                  f"{field}.input_tokens to the typical prompt")
    capacity = slo.capacity_tokens_per_s
    if capacity is not None and not (_finite(capacity) and 0 < capacity <= MAX_CAPACITY_TOKENS_PER_S):
        yield problem(f"{field}.capacity_tokens_per_s", capacity, f"must be a positive, finite number of tokens "
                      f"per second, at most {MAX_CAPACITY_TOKENS_PER_S:,.0f}", "remove it to let the advisor compute "
                      "it, or pin what hyperpod-dpd plan prints")
    if not (_finite(slo.utilisation) and 0 < slo.utilisation <= 1):
        yield problem(f"{field}.utilisation", slo.utilisation, "must be above 0 and at most 1 (the share of one "
                      "replica's SLO capacity each replica is driven to)", "use e.g. 0.9")
    start_up = slo.start_up_seconds
    if start_up is not None and not (_finite(start_up) and 0 <= start_up <= 86400):
        yield problem(f"{field}.start_up_seconds", start_up, "must be a finite number of seconds between 0 and a "
                      "day", "give how long a new pod takes to serve, e.g. 600")
    yield from _budgets(spec, role, minimum, maximum, slo)
    if role == "decode" and maximum > DECODE_DEPLOYMENTS:
        yield SpecWarning(code="SloDecodeCapped", field="decode.autoscaling.max_replicas",
                          message=f"{field} compiles decode's maximum to {DECODE_DEPLOYMENTS}, not {maximum}: the "
                                  "operator runs one decode deployment per endpoint (`plan` prints what more "
                                  "decoders would take and what to do instead), while the decode instance group is "
                                  f"sized for {maximum}; set decode.autoscaling.max_replicas: {DECODE_DEPLOYMENTS} "
                                  "to match")


def _budgets(spec: DpdSpec, role: str, minimum: int, maximum: int, slo: SloScaling) -> Iterator[Finding]:
    field = f"{role}.autoscaling.slo"
    if slo.max_nodes is not None and slo.max_nodes < 1:
        yield problem(f"{field}.max_nodes", slo.max_nodes, "must be at least 1 node", "give the nodes this role may "
                      "use, or remove the budget")
        return
    usd = slo.max_usd_per_hour
    if usd is not None:
        name = spec.instance_type.facts.name
        if not (_finite(usd) and usd > 0):
            yield problem(f"{field}.max_usd_per_hour", usd, "must be a positive number of US dollars per hour",
                          "give the role's hourly budget, or remove it")
            return
        if table_price(name) is None:
            yield problem(f"{field}.max_usd_per_hour", usd, f"cannot be turned into nodes: the price table has no "
                          f"figure for {name} ({unpriced_reason(name)})", "give a node budget (max_nodes) instead")
            return
    budget, binding = budget_replicas(spec, role, slo)
    if budget is None:
        return
    if budget < max(1, minimum):
        yield problem(f"{field}.{'max_nodes' if binding.startswith('max_nodes') else 'max_usd_per_hour'}",
                      slo.max_nodes if binding.startswith("max_nodes") else usd,
                      f"allows {budget} replica(s) ({binding}), below min_replicas {max(1, minimum)}",
                      "raise the budget or lower min_replicas")
    elif budget < maximum and binding.startswith("max_usd"):
        yield SpecWarning(code="SloBudgetBelowMax", field=f"{field}.max_usd_per_hour",
                          message=f"caps {role} at {budget} replica(s) ({binding}), below max_replicas {maximum}; the "
                                  f"instance group is still sized for {maximum}: lower max_replicas to {budget} so "
                                  "the nodes match the budget")
