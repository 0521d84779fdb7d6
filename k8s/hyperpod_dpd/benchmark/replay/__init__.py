"""Replaying a trace (``bench --trace``): its Job, its run on the cluster, and the proof window by window."""
