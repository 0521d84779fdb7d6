"""Facts other systems dictate, each with its source.

The operator's names and CRD, the router's length rule, vLLM's flags, tokenizer files, zones, the stack's outputs.
Imports only the spec and the errors below it.
"""
