"""Synth-time checks: everything the operator, vLLM or the cluster would reject, found at once."""

from hyperpod_dpd.validation.naming import is_sagemaker_name
from hyperpod_dpd.validation.run import RULES, CheckedSpec, check, check_data, load_checked_spec

__all__ = ["RULES", "CheckedSpec", "check", "check_data", "is_sagemaker_name", "load_checked_spec"]
