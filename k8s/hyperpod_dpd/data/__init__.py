"""Package data, each file with its provenance.

vLLM's flag set, the published architectures, the operator CRD, the metrics contract, node prices, the
clients' locks, the default spec.
"""
