"""SLO autoscaling: a role's KEDA triggers compiled from its latency targets and one replica's capacity."""

from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, DecodeBound, RoleCapacity, Signal
from hyperpod_dpd.scaling.compiler import compile_all, compile_role

__all__ = ["CompiledScaling", "CompiledTrigger", "DecodeBound", "RoleCapacity", "Signal", "compile_all", "compile_role"]
