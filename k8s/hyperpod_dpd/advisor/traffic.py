"""The load to predict for: prompt and output lengths, concurrency or request rate, and optional SLAs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import DpdSpec

# Beyond this many requests in flight the estimates leave the range AIConfigurator's tables cover.
MAX_CONCURRENCY = 4096


@dataclass(frozen=True, kw_only=True)
class Sla:
    """Latency targets in seconds; ``None`` means no target."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    @property
    def any(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None


@dataclass(frozen=True)
class Traffic:
    """The user's traffic: ``isl`` input and ``osl`` output tokens per request, at the given load points.

    :param concurrency: closed-loop load points (requests in flight, as genai-bench's
        ``--num-concurrency``). :default: () - then ``request_rate`` must be set
    :param request_rate: an open-loop arrival rate in requests per second, instead of ``concurrency``.
    :param ttft_ms: time-to-first-token target. :default: None - no target
    :param tpot_ms: time-per-output-token target. :default: None - no target
    """

    isl: int
    osl: int
    concurrency: tuple[int, ...] = ()
    request_rate: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def sla(self) -> Sla:
        return Sla(ttft_s=None if self.ttft_ms is None else self.ttft_ms / 1000,
                   tpot_s=None if self.tpot_ms is None else self.tpot_ms / 1000)

    def problems(self, spec: DpdSpec) -> list[Problem]:
        """Everything that makes this traffic unusable with ``spec`` (empty when it is usable)."""
        found: list[Problem] = []
        for name, value in (("isl", self.isl), ("osl", self.osl)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                found.append(Problem(field=f"traffic.{name}", value=value, message="must be a whole number of "
                                     "tokens, at least 1", fix=f"give e.g. --{name} {4096 if name == 'isl' else 256}"))
        if not found and self.isl + self.osl > spec.max_model_len:
            found.append(Problem(field="traffic.isl", value=self.isl, message=f"plus osl {self.osl} exceeds the "
                                 f"spec's max_model_len {spec.max_model_len}; vLLM would reject these requests",
                                 fix=f"keep isl + osl within {spec.max_model_len}, or raise max_model_len"))
        if bool(self.concurrency) == (self.request_rate is not None):
            found.append(Problem(field="traffic.concurrency", value=self.concurrency or self.request_rate,
                                 message="exactly one of concurrency and request_rate is needed",
                                 fix="give --concurrency 8,16,32 or --request-rate 2.5"))
        for value in self.concurrency:
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CONCURRENCY:
                found.append(Problem(field="traffic.concurrency", value=value, message=f"must be a whole number "
                                     f"of requests in flight between 1 and {MAX_CONCURRENCY}", fix="give e.g. 16"))
        if len(set(self.concurrency)) != len(self.concurrency):
            found.append(Problem(field="traffic.concurrency", value=self.concurrency,
                                 message="repeats a load point", fix="give each concurrency once"))
        if self.request_rate is not None and not (math.isfinite(self.request_rate) and self.request_rate > 0):
            found.append(Problem(field="traffic.request_rate", value=self.request_rate,
                                 message="must be a positive number of requests per second", fix="give e.g. 2.5"))
        for name, target in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms)):
            if target is not None and not (math.isfinite(target) and target > 0):
                found.append(Problem(field=f"traffic.{name}", value=target, message="must be a positive number "
                                     "of milliseconds", fix=f"give e.g. --{name.replace('_', '-')} "
                                     f"{2000 if name == 'ttft_ms' else 50}"))
        return found

    def validate(self, spec: DpdSpec) -> None:
        found = self.problems(spec)
        if found:
            raise SpecError(found, source="the traffic")
