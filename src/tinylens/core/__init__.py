"""The core reproduction (method.md §0-6): each block maps a prompt to a class of training strings whose
feed-forward outputs are similar, and those strings' next-token counts, weighted across blocks, approximate
the model's output.

Topic modules, in the order the data flows: ``corpus`` (fetch, tokenizer, split), ``strings`` (substrings,
next-token counts, prompts), ``activations`` (Parquet dumps), ``search`` (exact binned similarity search),
``verification`` (the search against a brute-force one), ``approx`` (approximation, Hellinger, tuning),
``case_studies``, ``sampling`` (the models' samples), ``training_log`` (the loss curves). As in every family:
``schemas`` (its tables), ``plots`` (its figures), ``summary`` (its headline numbers and findings).
"""
