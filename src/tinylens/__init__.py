"""tinylens: how a small character-level transformer predicts the next token.

The importable library behind the Snakemake workflow. Topic modules:
``corpus`` (fetch, tokenizer, split), ``model`` (the transformer),
``interventions`` (the one way to run the model with recorded and edited
hook points, from any depth; per-head weights), ``measures`` (one
definition of Hellinger, KL, cosine, softmax, entropy, rank, unigram),
``weights`` (safetensors I/O), ``train`` (training and exact resume),
``strings`` (substrings, next-token counts, prompts), ``activations``
(Parquet dumps), ``search`` (exact binned similarity search), ``approx``
(approximation, Hellinger, tuning), ``case_studies``, ``tables`` (Parquet
schemas), ``config`` (schema validation, presets), ``atomic`` (atomic
writes), ``logs`` (job logs), ``plots`` (figures), ``reference`` (the
unfused per-head attention of the original code, for checks and benchmarks).
Analysis families live in subpackages: ``attention`` (attention as a
dynamical system: spectra, logit and tuned lenses, speaker probes).

Dimension names, used in every shape comment and docstring:

=========  ==================================================
batch      sequences in a batch
pos        token positions in a sequence (``block_size`` at most)
d_model    residual stream width (``n_embed``)
n_heads    attention heads per block
d_head     width of one head (``d_model // n_heads``)
vocab      tokenizer vocabulary size (65 for TinyShakespeare)
block      transformer block index (``n_layer`` of them)
=========  ==================================================
"""

__version__ = "0.1.0"
