"""Request traces: what arrived when, how long it was, and which prompt prefixes it shared.

The advisor, the planner, the autoscaling emulator and ``bench --trace`` all read traffic as a
:class:`Trace`, whatever file format it came from: :func:`read_trace` reads Mooncake JSONL, Azure's LLM inference CSV
and BurstGPT's CSV, :func:`generate` makes synthetic ones (:func:`at_rate` at any load shape), :func:`summarise`
says what a trace asks of each pool, and :func:`write_mooncake` writes the file aiperf's fixed schedule replays.
"""

from hyperpod_dpd.traces.model import Trace, TraceRequest
from hyperpod_dpd.traces.mooncake import BLOCK_TOKENS, mooncake_lines, write_mooncake
from hyperpod_dpd.traces.reading import FORMAT_NAMES, TraceFormat, read_trace
from hyperpod_dpd.traces.summary import DEFAULT_WINDOW_S, PrefillRule, TraceSummary, Window, summarise
from hyperpod_dpd.traces.synthetic import ArrivalKind, Lengths, LengthShape, PrefixGroups, at_rate, generate

__all__ = ["BLOCK_TOKENS", "DEFAULT_WINDOW_S", "FORMAT_NAMES", "ArrivalKind", "LengthShape", "Lengths", "PrefillRule",
           "PrefixGroups", "Trace", "TraceFormat", "TraceRequest", "TraceSummary", "Window", "at_rate", "generate",
           "mooncake_lines", "read_trace", "summarise", "write_mooncake"]
