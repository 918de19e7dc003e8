"""tinylens: how a small character-level transformer predicts the next token.

The importable library behind the Snakemake workflow (docs/layout.md). One subpackage per family, each with
its topic modules and its ``schemas`` (tables), ``plots`` (figures) and ``summary`` (metrics, sentences):
``core`` (the reproduction: corpus, strings, activations, search, verification, approx, case studies),
``supporting`` (the paper's supporting analyses), ``dynamics`` (training dynamics), ``phase_change`` (the
induction-head phase change), ``circuits`` (weight-only composition), ``attention`` (attention as a
dynamical system), ``superposition`` (toy models). Shared by every family: ``model``, ``interventions``
(the one way to run the model with recorded and edited hook points), ``measures`` (one definition of each
quantity), ``weights``, ``train``, ``devices``, ``tables``, ``atomic``, ``logs``, ``jobs``, ``config``,
``plots``. The ground floor: ``families`` (the registry), ``published`` (every published number),
``wording``. Entry points: ``cli`` (the ``tinylens`` command), ``explain``, ``restore``, ``export``,
``external``, ``comparison``, ``findings``.

Dimension names, used in every shape comment and docstring:

=========  ==================================================
batch      sequences in a batch
pos        token positions in a sequence (``block_size`` at most)
d_model    residual stream width (``ModelConfig.d_model``, the presets' ``model.d_model``)
n_heads    attention heads per block
d_head     width of one head (``d_model // n_heads``)
vocab      tokenizer vocabulary size (65 for TinyShakespeare)
block      transformer block index (``n_layer`` of them)
=========  ==================================================
"""

__version__ = "0.1.0"
