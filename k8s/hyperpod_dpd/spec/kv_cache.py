"""The KV transfer buffer and LMCache settings that both roles share."""

from __future__ import annotations

from dataclasses import dataclass, field

from hyperpod_dpd.spec._frozen import Frozen
from hyperpod_dpd.spec.units import ByteSize

DEFAULT_PD_BUFFER = ByteSize.gibibytes(8)
DEFAULT_CHUNK_TOKENS = 256
# LMCache 0.4.3's max_local_cpu_size default, 5.0 GB read as GiB (lmcache/v1/config.py:70; the allocator takes
# int(size * 1024**3) bytes, lmcache/v1/storage_backend/local_cpu_backend.py:373).
DEFAULT_CPU_CACHE = ByteSize.gibibytes(5)


@dataclass(frozen=True, kw_only=True)
class KvCacheSpec(Frozen):
    """KV transfer and cache.

    :param pd_buffer_size: GPU buffer reserved on the decoder, per tensor-parallel rank, for
        incoming transfers (``PD_BUFFER_SIZE``). :default: 8Gi
    :param l1_cache: LMCache's CPU cache of recurring prefixes on the prefiller. :default: True
    :param hash_seed: ``PYTHONHASHSEED``, an integer 0..4294967295 (never ``random``); LMCache keys
        the cache with ``hash()``, so both roles must agree, which one shared variable guarantees.
        :default: "0", as AWS documents
    :param save_decode_cache: ``LMCACHE_SAVE_DECODE_CACHE``; the prefiller is the source of truth
        for cache hits, so the decoder keeps none. :default: False
    :param chunk_tokens: LMCache's chunk size, the unit in which transfers are allocated
        (``LMCACHE_CHUNK_SIZE``, rendered so that LMCache uses the size the planner sizes with). :default: 256
    :param cpu_cache_size: LMCache's CPU cache per tensor-parallel rank (``LMCACHE_MAX_LOCAL_CPU_SIZE``, set
        only while ``l1_cache`` is on): pinned host memory every rank of both roles allocates, counted against
        the pod's memory limit and the node. :default: 5Gi, LMCache's default
    """

    pd_buffer_size: ByteSize = field(default_factory=lambda: DEFAULT_PD_BUFFER)
    l1_cache: bool = True
    hash_seed: str = "0"
    save_decode_cache: bool = False
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    cpu_cache_size: ByteSize = field(default_factory=lambda: DEFAULT_CPU_CACHE)
