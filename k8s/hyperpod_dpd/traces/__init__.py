"""Request traces: what arrived when, how long it was, and which prompt prefixes it shared.

The advisor, the planner, the autoscaling emulator and ``bench --trace`` all read traffic as a
:class:`Trace`, whatever file format it came from.
"""

from hyperpod_dpd.traces.model import Trace, TraceRequest

__all__ = ["Trace", "TraceRequest"]
