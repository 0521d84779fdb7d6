"""The files of a Hugging Face checkpoint that make its tokenizer: the one list every user of them reads.

``hyperpod-dpd bench`` copies them from the model's S3 prefix into its pod, where genai-bench loads
the folder with transformers' ``AutoTokenizer`` (no remote code); the stack's benchmark role may read
exactly these objects; ``preflight`` requires one whole vocabulary among them beside the weights. A
second list anywhere would let a checkpoint pass one check and fail the next (the role denied a
file the copy asked for, or the copy skipping a vocabulary ``preflight`` accepted).

A checkpoint ships its vocabulary in one of a few forms, all of which transformers loads by these
names: ``tokenizer.json`` (a fast tokenizer); ``tokenizer.model`` (SentencePiece, e.g. Llama 2 and
Mistral, or tiktoken, e.g. Llama 3's original files); ``tiktoken.model`` (tiktoken); ``tekken.json``
(Mistral's tekken); ``vocab.json`` with ``merges.txt`` (GPT-2-style byte-level BPE, e.g. some Qwen
checkpoints). The rest configure it: special tokens, the chat template, the model type. Every entry
is a plain file name at the top of the prefix: the copy's ``--include`` and the role's object ARNs
both take them literally.
"""

from __future__ import annotations

from collections.abc import Collection

# Each entry is one whole vocabulary: all of its files are needed.
VOCABULARIES: tuple[tuple[str, ...], ...] = (
    ("tokenizer.json",), ("tokenizer.model",), ("tiktoken.model",), ("tekken.json",), ("vocab.json", "merges.txt"))
SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "config.json",
            "generation_config.json", "chat_template.jinja")
TOKENIZER_FILES: tuple[str, ...] = (*(name for files in VOCABULARIES for name in files), *SETTINGS)


def vocabulary_files(names: Collection[str]) -> list[str]:
    """The files among ``names`` that make whole vocabularies (``vocab.json`` counts only with ``merges.txt``)."""
    return [name for files in VOCABULARIES if all(file in names for file in files) for name in files]


def vocabulary_choices() -> str:
    """``tokenizer.json, tokenizer.model, ... or vocab.json with merges.txt``, for messages."""
    choices = [" with ".join(files) for files in VOCABULARIES]
    return f"{', '.join(choices[:-1])} or {choices[-1]}"
