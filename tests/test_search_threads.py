"""The search kernel uses the thread counts its caller set, and changes no global setting."""

import numba
import numpy as np
import pytest
import torch

from tinylens.core.search import CountsCSR, search_block, threshold_edges


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two CPU threads to tell counts apart")
def test_search_block_leaves_the_thread_counts_to_the_caller():
    rng = np.random.default_rng(0)
    prompts = rng.normal(size=(4, 8)).astype(np.float32)
    strings = rng.normal(size=(50, 8)).astype(np.float32)
    counts = CountsCSR.from_dense(rng.integers(0, 2, (50, 3)))
    numba_before, torch_before = numba.get_num_threads(), torch.get_num_threads()
    try:
        numba.set_num_threads(1)
        torch.set_num_threads(2)
        search_block(prompts, strings, counts, threshold_edges(0.1, 0.1, 5))
        assert numba.get_num_threads() == 1 and torch.get_num_threads() == 2
    finally:
        numba.set_num_threads(numba_before)
        torch.set_num_threads(torch_before)
