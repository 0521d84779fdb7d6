"""``verify --restart-drill``: restart one prefill pod, then prove the KV transfer again.

Users of other P/D stacks reported stale transfer state after a peer restart ending in decode crashes or a
wedged fleet (peers' autumn reports: vLLM and smg issues). LMCache 0.4.3's PD receiver registers a restarted
sender's new NIXL agent when it first connects, so the decoders should need nothing: the drill checks that on
the live endpoint. It deletes one prefill pod through the API server, waits for its Deployment's replacement
to be Ready, sends the long smoke prompt until every decoder has received KV cache again (the same gate as
``--smoke``: zero external tokens fails), and fails when a decode container restarted meanwhile (a crash).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping

from hyperpod_dpd.clients.checks import Check, Status, failed, passed, skipped
from hyperpod_dpd.clients.kube import JsonDict, KubeApi, KubeError
from hyperpod_dpd.contracts.operator import ROLE_LABEL
from hyperpod_dpd.ops.dpd_counters import EndpointNames
from hyperpod_dpd.ops.smoke import prompts, smoke_disaggregated
from hyperpod_dpd.spec import DpdSpec

RESTART_DRILL = "restart drill"
POLL_SECONDS = 5.0


def _pods(kube: KubeApi, names: EndpointNames, role: str) -> list[JsonDict]:
    deployment = names.prefill_deployment if role == "prefill" else names.decode_deployment
    return [pod for pod in kube.pods(names.namespace, f"{ROLE_LABEL}={role}")
            if str((pod.get("metadata") or {}).get("name", "")).startswith(f"{deployment}-")]


def _ready(pod: JsonDict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _name(pod: JsonDict) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


def restarts(pods: list[JsonDict]) -> dict[str, int]:
    """Each pod's container restarts, by pod."""
    return {_name(pod): sum(int(status.get("restartCount") or 0)
                            for status in (pod.get("status") or {}).get("containerStatuses") or [])
            for pod in pods}


def crashed(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """The pods whose containers restarted between the readings, with how often."""
    return [f"{pod} (+{count - before[pod]})" for pod, count in sorted(after.items())
            if pod in before and count > before[pod]]


def run_restart_drill(kube: KubeApi, spec: DpdSpec, *, timeout: float = 900.0,
                      clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                      nonce: str | None = None) -> Check:
    """Delete the first prefill pod, wait for a Ready replacement within ``timeout``, then prove KV transfer
    per decoder again; FAIL on a timeout, a decoder restart or a decoder that received no KV cache."""
    _, long = prompts(spec)
    if isinstance(long, str):
        return skipped(RESTART_DRILL, long)
    names = EndpointNames.of(spec)
    try:
        prefill = sorted(_pods(kube, names, "prefill"), key=_name)
        decoders = restarts(_pods(kube, names, "decode"))
        if not prefill:
            return failed(RESTART_DRILL, "no prefill pod to restart")
        victim = _name(prefill[0])
        kube.delete_pod(names.namespace, victim)
    except KubeError as err:
        return failed(RESTART_DRILL, f"cannot restart a prefill pod: {err} (RBAC: delete on pods in "
                                     f"{names.namespace})")
    deadline = clock() + timeout
    while True:
        try:
            ready = [_name(pod) for pod in _pods(kube, names, "prefill")
                     if _name(pod) != victim and _ready(pod)]
        except KubeError as err:
            return failed(RESTART_DRILL, f"deleted {victim}, then could not list the prefill pods: {err}")
        if len(ready) >= len(prefill):
            break
        if clock() >= deadline:
            return failed(RESTART_DRILL, f"deleted {victim}; no Ready replacement within {timeout:.0f}s "
                                         f"({len(ready)} of {len(prefill)} prefill pods Ready)")
        sleep(POLL_SECONDS)
    gate = smoke_disaggregated(kube, spec, long, nonce=nonce or secrets.token_hex(4),
                               timeout=max(1.0, deadline - clock()), clock=clock)
    try:
        broke = crashed(decoders, restarts(_pods(kube, names, "decode")))
    except KubeError as err:
        return failed(RESTART_DRILL, f"cannot read the decode pods' restarts after the drill: {err}")
    new = sorted(set(ready) - {_name(pod) for pod in prefill})
    head = f"deleted {victim}; replaced by {', '.join(new) or 'a new pod'}"
    if broke:
        return failed(RESTART_DRILL, f"{head}; a decode container restarted after the prefill restart: "
                                     f"{', '.join(broke)} (stale transfer state: restart both roles)\n{gate.detail}")
    if gate.status is not Status.PASS:
        return failed(RESTART_DRILL, f"{head}; KV transfer not proven after the restart:\n{gate.detail}")
    return passed(RESTART_DRILL, f"{head}; KV transfer proven again, no decoder restarted:\n{gate.detail}")
