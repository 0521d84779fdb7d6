"""Synth-time checks: everything the operator, vLLM or the cluster would reject, found at once."""

from hyperpod_dpd.validation.check import CheckedSpec, check, register_rule

__all__ = ["CheckedSpec", "check", "register_rule"]
