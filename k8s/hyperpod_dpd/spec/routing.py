"""How the router splits traffic between the disaggregated path and the decoder alone."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.spec._frozen import Frozen

DEFAULT_ROUTING_THRESHOLD = 4096


class RoutingStrategy(Enum):
    """How the router picks a prefiller when there are several.

    ``prefixaware`` suits one prefiller, ``roundrobin`` several, ``kvaware`` repeated prefixes
    (AWS documents it for the completions API; a warning says so), ``session`` multi-turn chat.
    """

    PREFIX_AWARE = "prefixaware"
    KV_AWARE = "kvaware"
    SESSION = "session"
    ROUND_ROBIN = "roundrobin"


@dataclass(frozen=True, kw_only=True)
class RoutingSpec(Frozen):
    """Routing.

    :param threshold: prompts of at least this many estimated tokens take the prefill -> decode path;
        shorter ones go straight to the decoder. ``0`` always disaggregates. :default: 4096
    :param strategy: :default: RoutingStrategy.PREFIX_AWARE
    """

    threshold: int = DEFAULT_ROUTING_THRESHOLD
    strategy: RoutingStrategy = RoutingStrategy.PREFIX_AWARE
