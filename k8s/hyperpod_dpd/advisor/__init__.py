"""Predict DPD for the user's traffic with NVIDIA AIConfigurator, against aggregated vLLM serving.

``advise(spec, traffic)`` compares the spec's layout with an aggregated baseline at each load point;
``search(spec, traffic)`` finds the DPD layout with the fewest nodes that meets the SLAs. Both need
the ``advisor`` extra; without it they raise :class:`AdvisorUnavailable`.
"""

from hyperpod_dpd.advisor.comparison import Advice, AdvicePoint, advise, verdict
from hyperpod_dpd.advisor.estimates import AdvisorUnavailable, Estimate, Layout
from hyperpod_dpd.advisor.search import Candidate, NoLayoutMeetsSla, SearchResult, search
from hyperpod_dpd.advisor.traffic import Sla, Traffic

__all__ = ["Advice", "AdvicePoint", "AdvisorUnavailable", "Candidate", "Estimate", "Layout", "NoLayoutMeetsSla",
           "SearchResult", "Sla", "Traffic", "advise", "search", "verdict"]
