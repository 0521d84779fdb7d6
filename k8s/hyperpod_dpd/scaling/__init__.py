"""SLO autoscaling: a role's KEDA triggers compiled from its latency targets and one replica's capacity."""

from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, RoleCapacity, Signal
from hyperpod_dpd.scaling.compiler import compile_all, compile_role

__all__ = ["CompiledScaling", "CompiledTrigger", "RoleCapacity", "Signal", "compile_all", "compile_role"]
