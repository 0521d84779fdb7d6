"""One value holding every live system a command touches, so ``main(argv, seams=...)`` and tests replace them all."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.clients.amp import Send, urllib_send
from hyperpod_dpd.clients.aws import AwsClients, session_clients
from hyperpod_dpd.clients.benchmark_kube import BenchmarkKube
from hyperpod_dpd.clients.kube import KubeApi, load_kube
from hyperpod_dpd.spec import DpdSpec


class AwsSession(Protocol):
    """``(region, profile, fallback_region=...)`` to the clients of one account and region (``session_clients``)."""

    def __call__(self, region: str | None, profile: str | None, *,
                 fallback_region: str | None = None) -> AwsClients: ...


def _benchmark_kube(context: str | None, kubeconfig: str | None) -> BenchmarkKube:
    return BenchmarkKube.from_kube(load_kube(context, kubeconfig))


@dataclass(frozen=True, kw_only=True)
class Seams:
    """The live systems ``preflight``, ``verify`` and ``bench`` touch, each one replaceable (tests pass their own).

    :param aws_clients: ``(region, profile)`` to clients, for ``--stack``, the checks and the uploaded results.
        :default: - the default credential chain
    :param kube_api: ``(context, kubeconfig)`` to the cluster's read clients, for ``verify``. :default: - the
        kubeconfig's
    :param benchmark_kube: ``(context, kubeconfig)`` to the cluster's clients with the benchmark's writes.
        :default: - the kubeconfig's
    :param clock: seconds that only go forward, for the waits. :default: time.monotonic
    :param sleep: waits between polls. :default: time.sleep
    :param now: the UTC time that names a run without ``run_id``. :default: time.gmtime
    :param amp_send: sends a signed query to the AMP workspace, for ``verify``'s rule inputs.
        :default: - urllib
    :param predictor: ``(spec, scenario)`` to the advisor's estimate, for ``bench --compare``.
        :default: - the advisor, against one aggregated node
    :param planner: the planner ``preflight`` runs, called as ``planner(spec, architecture=...)``.
        :default: - ``hyperpod_dpd.planner.plan``, when it is installed
    """

    aws_clients: AwsSession = session_clients
    kube_api: Callable[[str | None, str | None], KubeApi] = load_kube
    benchmark_kube: Callable[[str | None, str | None], BenchmarkKube] = _benchmark_kube
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], time.struct_time] = time.gmtime
    amp_send: Send = urllib_send
    predictor: Callable[[DpdSpec, Any], Any] | None = None
    planner: Callable[..., Any] | None = None


REAL = Seams()
