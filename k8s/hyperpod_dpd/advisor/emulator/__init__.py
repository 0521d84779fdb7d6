"""Proof before purchase: a trace played through KEDA, the HPA and the advisor's queueing model.

Entry point: :func:`emulate` (``emulate(spec, trace, scaling={"prefill": compiled}) -> EmulatedDay``).
"""

from hyperpod_dpd.advisor.emulator.day import EmulatedDay, RoleDay
from hyperpod_dpd.advisor.emulator.emulator import emulate, queueing_latency
from hyperpod_dpd.advisor.emulator.latency import LatencyModel, LatencyPoint, QueueingLatency

__all__ = ["EmulatedDay", "LatencyModel", "LatencyPoint", "QueueingLatency", "RoleDay", "emulate",
           "queueing_latency"]
