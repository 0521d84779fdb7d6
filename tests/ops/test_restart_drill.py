"""verify --restart-drill: one prefill pod deleted through the kube seam, its replacement waited for, KV transfer
proven again; a decoder crash, a replacement that never comes and zero transferred tokens fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support import FakeClock

from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.ops.restart_drill import RESTART_DRILL, run_restart_drill
from hyperpod_dpd.spec import DpdSpec

ROUTER_POD = "dpd-test-default-router-6f8d-klmno"
OLD, NEW = "prefill-dpd-test-7d9f-abcde", "prefill-dpd-test-7d9f-zzzzz"


def _drill(make_kube: Callable[..., tuple[KubeApi, Any]], fakes: Any, *, replaced_after: int = 1,
           decoder_restarts: int = 0, metrics: dict[str, list[str]] | None = None,
           timeout: float = 60.0) -> tuple[Any, list[tuple[str, str]]]:
    """The drill against a recorded cluster: the prefill list answers the old pod until the delete, then
    ``replaced_after`` lists with the replacement not Ready, then Ready; the decoder's restarts after."""
    answers = fakes.healthy_cluster()
    prefill_key = next(key for key in answers if key[0] == "pods" and "prefill" in key[2])
    decode_key = next(key for key in answers if key[0] == "pods" and "decode" in key[2])
    old = fakes.pod_list(fakes.pod(OLD, "default", "prefill", 3))
    starting = fakes.pod_list(fakes.pod(NEW, "default", "prefill", 0, waiting="ContainerCreating"))
    ready = fakes.pod_list(fakes.pod(NEW, "default", "prefill", 3))
    answers[prefill_key] = [old, *[starting] * replaced_after, ready]
    crashed = fakes.pod("decode-dpd-test-5c4b-fghij", "default", "decode", 3)
    for status in crashed["status"]["containerStatuses"]:
        status["restartCount"] = decoder_restarts
    answers[decode_key] = [answers[decode_key], answers[decode_key], fakes.pod_list(crashed)]
    transport = fakes.FakeTransport(respond=lambda body: fakes.sse("Blue"), log=[])
    kube, core = make_kube(answers, transport=transport, logs={ROUTER_POD: transport.log}, metrics=metrics)
    clock = FakeClock()
    check = run_restart_drill(kube, spec_of(fakes), timeout=timeout, clock=clock, sleep=clock.sleep, nonce="d1")
    return check, [(call[1], call[2]) for call in core.calls if call[0] == "delete"]


def spec_of(fakes: Any) -> DpdSpec:
    from hyperpod_dpd.spec.defaults import default_spec

    return default_spec()


def test_a_restarted_prefiller_transfers_again(make_kube: Any, fakes: Any) -> None:
    check, deleted = _drill(make_kube, fakes)
    assert deleted == [("default", OLD)]
    assert (check.name, check.status) == (RESTART_DRILL, Status.PASS), check.detail
    assert check.detail.startswith(f"deleted {OLD}; replaced by {NEW}; KV transfer proven again")


def test_a_decoder_that_crashes_after_the_prefill_restart_fails(make_kube: Any, fakes: Any) -> None:
    check, _ = _drill(make_kube, fakes, decoder_restarts=1)
    assert check.status is Status.FAIL
    assert "a decode container restarted after the prefill restart: decode-dpd-test-5c4b-fghij (+3)" in check.detail


def test_no_replacement_within_the_timeout_fails(make_kube: Any, fakes: Any) -> None:
    check, _ = _drill(make_kube, fakes, replaced_after=100, timeout=30.0)
    assert (check.status, check.detail) == (Status.FAIL, f"deleted {OLD}; no Ready replacement within 30s (0 of 1 "
                                                         "prefill pods Ready)")


def test_zero_external_tokens_after_the_restart_fail(make_kube: Any, fakes: Any) -> None:
    """The stale-state failure peers reported: answers flow, the decoder recomputes every prompt."""
    broken = {fakes.DECODE_METRICS: [fakes.vllm_metrics(0.0), fakes.vllm_metrics(0.0, local_compute=4194.0)],
              fakes.PREFILL_METRICS: [fakes.prefill_metrics()]}
    check, _ = _drill(make_kube, fakes, metrics=broken)
    assert check.status is Status.FAIL
    assert "KV transfer not proven after the restart" in check.detail and "received no KV cache" in check.detail
