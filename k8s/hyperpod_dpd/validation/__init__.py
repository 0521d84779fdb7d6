"""Synth-time checks: everything the operator, vLLM or the cluster would reject, found at once."""

from hyperpod_dpd.validation.check import CheckedSpec, check, check_data, load_checked_spec, register_rule

__all__ = ["CheckedSpec", "check", "check_data", "load_checked_spec", "register_rule"]
