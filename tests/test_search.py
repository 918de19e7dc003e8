import numpy as np
import pytest
import torch

import tinylens.core.search as search_module
from tinylens.core.search import (
    CountsCSR,
    cumulative,
    exact_float32_matmul,
    null_permutation,
    rounding_margin,
    search_block,
    search_block_bruteforce,
    search_prompts,
    search_prompts_with_null,
    threshold_edges,
)

D = 16
VOCAB = 7
EDGES = threshold_edges(0.70, 0.01, 30)  # the configured grid


def _counts(rng, n: int, max_tokens: int = 1) -> np.ndarray:
    """Dense next-token counts: each string gets 0..max_tokens distinct next tokens."""
    counts = np.zeros((n, VOCAB), dtype=np.uint32)
    for i in range(n):
        k = rng.integers(0, max_tokens + 1)
        tokens = rng.choice(VOCAB, size=k, replace=False)
        counts[i, tokens] = rng.integers(1, 6, size=k)
    return counts


def _correlated(rng, n_prompts: int, n_strings: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian prompts; strings = a random prompt + noise of random size, so cosines cover the whole grid."""
    prompts = rng.normal(size=(n_prompts, D)).astype(np.float32)
    base = prompts[rng.integers(0, n_prompts, n_strings)] * rng.uniform(0.2, 3.0, (n_strings, 1))
    noise = rng.normal(size=(n_strings, D)) * rng.uniform(0.0, 1.5, (n_strings, 1)) * np.linalg.norm(
        base, axis=1, keepdims=True) / np.sqrt(D)
    strings = (base + noise).astype(np.float32)
    strings[: n_strings // 4] = rng.normal(size=(n_strings // 4, D))  # plain Gaussian ones too
    return prompts, strings


#: Every way the search can run on a CPU: the compiled pass with its default per-row choice, with every
#: row binned candidate by candidate and with every row binned entry by entry, and the torch pass (the GPU's).
VARIANTS = [dict(binner="compiled"), dict(binner="compiled", dense_fraction=2.0),
            dict(binner="compiled", dense_fraction=0.0), dict(binner="torch")]
if torch.cuda.is_available():  # the GPU's path: the torch pass
    VARIANTS.append(dict(device="cuda"))


def _check(prompts, strings, counts, edges=EDGES, members=None, **chunks):
    csr = CountsCSR.from_dense(counts, members)
    exp_m, exp_c = search_block_bruteforce(prompts, strings, counts, edges, members)
    for variant in VARIANTS:
        got_m, got_c = search_block(prompts, strings, csr, edges, members, **variant, **chunks)
        assert got_m.shape == (len(prompts), len(edges))
        assert got_c.shape == (len(prompts), len(edges), counts.shape[1])
        assert np.array_equal(got_m, exp_m), (variant, np.argwhere(got_m != exp_m)[:10])
        assert np.array_equal(got_c, exp_c), (variant, np.argwhere(got_c != exp_c)[:10])
    return exp_m, exp_c


def test_threshold_edges_values():
    edges = threshold_edges(0.70, 0.01, 30)
    assert len(edges) == 30
    assert edges[0] == 0.70 and edges[5] == 0.75 and edges[25] == 0.95 and edges[-1] == 0.99
    assert edges[10] == 0.8  # the float 0.8, not 0.7 + 10 * 0.01 = 0.7999999999999999
    np.testing.assert_allclose(np.diff(edges), 0.01, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(threshold_edges(0.5, 0.25, 3), [0.5, 0.75, 1.0])


def test_cumulative_is_a_reverse_cumulative_sum():
    binned = np.array([[1, 2, 3, 4], [0, 5, 0, 1]])
    np.testing.assert_array_equal(cumulative(binned, axis=1), [[10, 9, 7, 4], [6, 6, 1, 1]])
    np.testing.assert_array_equal(cumulative(binned, axis=0), [[1, 7, 3, 5], [0, 5, 0, 1]])
    three = np.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(cumulative(three, axis=1)[:, 0], three.sum(axis=1))
    np.testing.assert_array_equal(cumulative(three, axis=1)[:, -1], three[:, -1])


def test_non_uniform_edges_are_rejected():
    rng = np.random.default_rng(0)
    p, s = rng.normal(size=(2, D)).astype(np.float32), rng.normal(size=(3, D)).astype(np.float32)
    csr = CountsCSR.from_dense(_counts(rng, 3))
    with pytest.raises(ValueError, match="uniform grid"):
        search_block(p, s, csr, np.array([0.7, 0.8, 0.85, 0.9]), None)


def test_counts_csr_from_dense():
    dense = np.array([[0, 2, 0], [0, 0, 0], [1, 0, 3]])
    csr = CountsCSR.from_dense(dense)
    np.testing.assert_array_equal(csr.indptr, [0, 1, 1, 3])
    np.testing.assert_array_equal(csr.token, [1, 0, 2])
    np.testing.assert_array_equal(csr.count, [2, 1, 3])
    masked = CountsCSR.from_dense(dense, np.array([True, True, False]))
    np.testing.assert_array_equal(masked.indptr, [0, 1, 1, 1])


def test_random_gaussian_data_matches_bruteforce():
    rng = np.random.default_rng(0)
    prompts, strings = _correlated(rng, 40, 600)
    m, _ = _check(prompts, strings, _counts(rng, 600))
    # the data exercise the grid: many matches, spread over most bins, including the open last bin
    assert m.sum() > 300 and (m.sum(axis=0) > 0).all()


def test_pure_gaussian_data_matches_bruteforce_with_a_low_grid():
    rng = np.random.default_rng(1)
    prompts = rng.normal(size=(30, D)).astype(np.float32)
    strings = rng.normal(size=(400, D)).astype(np.float32)
    m, _ = _check(prompts, strings, _counts(rng, 400), edges=threshold_edges(0.1, 0.05, 12))
    assert m.sum() > 1000


def _exact_on_edge_vectors() -> list[list[int]]:
    """Integer vectors v whose cosine with e1, v[0] / |v|, is exactly an edge of the grid (|v| an integer),
    plus two that are not (12/17, 7/9) and e1 itself."""
    return [
        [3, 2, 1, 1, 1],  # 3/4 = 0.75
        [4, 3],  # 4/5 = 0.8
        [9, 3, 3, 1],  # 9/10 = 0.9
        [24, 7],  # 24/25 = 0.96
        [18, 17, 3, 1, 1, 1],  # 18/25 = 0.72
        [12, 9, 8],  # 12/17
        [7, 4, 4],  # 7/9
        [1],  # 1.0
    ]


def test_cosines_on_and_next_to_bin_edges_match_bruteforce():
    rng = np.random.default_rng(2)
    rows = []
    # (1) exactly on an edge: integer vectors (scaled by powers of two, so exact in float32)
    for v in _exact_on_edge_vectors():
        for scale in (1.0, 0.5, 8.0, 2.0**-10):
            for sign in (1, -1):  # the sign of the other coordinates leaves the cosine unchanged
                row = np.zeros(D)
                row[0] = v[0]
                row[1 : len(v)] = sign * np.array(v[1:], dtype=float)
                rows.append(row * scale)
    # (2) cos * e1 + sin * e2 with cos an edge or within 1e-7 of one
    for edge in (0.70, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99, EDGES[13], EDGES[27]):
        for offset in (0.0, 1e-7, -1e-7, 5e-8, -5e-8, 2e-8, -2e-8, 1e-9, -1e-9, 3e-7, -3e-7, 1e-6, -1e-6):
            c = edge + offset
            row = np.zeros(D)
            row[0], row[1 + rng.integers(0, D - 1)] = c, np.sqrt(max(0.0, 1 - c * c))
            rows.append(row * rng.choice([1.0, 0.37, 3.1]))
    strings = np.array(rows).astype(np.float32)
    # prompts: e1 in several scales (the same cosines), and -e1 (no match)
    prompts = np.zeros((4, D), dtype=np.float32)
    prompts[:, 0] = [1.0, 3.0, 2.0**-7, -1.0]
    counts = _counts(rng, len(strings), max_tokens=3)
    m, _ = _check(prompts, strings, counts)
    assert m[0].sum() > 150 and m[3].sum() == 0
    np.testing.assert_array_equal(m[0], m[1])
    np.testing.assert_array_equal(m[0], m[2])
    # and the permuted frame: permute the coordinates of the strings and of a prompt alike
    perm = rng.permutation(D)
    _check(prompts[:, perm], strings[:, perm], counts)

    # the float64 cosines of the float32 data really sit on / within 1e-7 of edges
    cos = strings.astype(np.float64)[:, 0] / np.linalg.norm(strings.astype(np.float64), axis=1)
    gap = np.abs(cos[:, None] - EDGES[None, :]).min(axis=1)
    assert (gap == 0).sum() >= 30
    assert (gap <= 1e-7).sum() >= 100
    assert (gap <= rounding_margin(D)).sum() >= 150  # all of those go through the float64 path


def test_pairs_near_an_edge_set_aside_in_small_batches_match_bruteforce(monkeypatch):
    """The pairs near an edge are decided when their batch fills (mid-tile, mid-row) as well as at the
    end of a tile: the edge-case data above with a batch of 3 pairs."""
    monkeypatch.setattr(search_module, "NEAR_EDGE_BATCH", 3)
    test_cosines_on_and_next_to_bin_edges_match_bruteforce()


def test_exact_edge_cosines_land_in_the_lower_bin():
    # cos = 0.8 exactly: bin (0.79, 0.8], i.e. not "above 0.8"
    strings = np.zeros((3, D), dtype=np.float32)
    strings[0, :2] = [4, 3]  # cos 0.8
    strings[1, :2] = [24, 7]  # cos 0.96
    strings[2, 0] = 5  # cos 1.0
    prompts = np.zeros((1, D), dtype=np.float32)
    prompts[0, 0] = 1
    counts = np.zeros((3, VOCAB), dtype=np.uint32)
    counts[:, 0] = 1
    expected = np.zeros(len(EDGES), dtype=np.int64)
    expected[[9, 25, 29]] = 1  # (0.79, 0.8], (0.95, 0.96], the open last bin
    for variant in VARIANTS:
        m, c = search_block(prompts, strings, CountsCSR.from_dense(counts), EDGES, **variant)
        np.testing.assert_array_equal(m[0], expected)
        np.testing.assert_array_equal(c[0, :, 0], expected)


def test_members_mask_matches_bruteforce():
    rng = np.random.default_rng(3)
    prompts, strings = _correlated(rng, 25, 500)
    members = rng.random(500) < 0.6
    counts = _counts(rng, 500, max_tokens=2)
    m, _ = _check(prompts, strings, counts, members=members)
    full, _ = search_block_bruteforce(prompts, strings, counts, EDGES)
    assert 0 < m.sum() < full.sum()  # the mask removed some matches, not all
    # the mask also drops the counts when the CSR itself is unmasked
    exp = search_block_bruteforce(prompts, strings, counts, EDGES, members)
    for variant in VARIANTS:
        got = search_block(prompts, strings, CountsCSR.from_dense(counts), EDGES, members, **variant)
        assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1])


@pytest.mark.parametrize("prompt_chunk, string_chunk", [(7, 50), (1, 1000), (64, 33), (3, 1)])
def test_tiling_matches_bruteforce(prompt_chunk, string_chunk):
    rng = np.random.default_rng(4)
    n_strings = 60 if string_chunk == 1 else 300
    prompts, strings = _correlated(rng, 20, n_strings)
    members = rng.random(n_strings) < 0.8
    _check(prompts, strings, _counts(rng, n_strings, max_tokens=3), members=members,
           prompt_chunk=prompt_chunk, string_chunk=string_chunk)


def test_multi_token_strings_and_zero_vectors_match_bruteforce():
    rng = np.random.default_rng(5)
    prompts, strings = _correlated(rng, 20, 400)
    counts = _counts(rng, 400, max_tokens=VOCAB)  # most strings have several next tokens
    counts[:50] = 0  # and some none
    strings[100:120] = 0.0  # zero strings: cosine 0, never a match
    prompts[3] = 0.0  # a zero prompt matches nothing
    assert (np.count_nonzero(counts, axis=1) > 1).sum() > 200
    m, c = _check(prompts, strings, counts, string_chunk=128)
    assert m[3].sum() == 0 and c[3].sum() == 0
    # the counts of each bin are the sums over the strings in it
    assert c.sum() > 0


def test_dense_and_sparse_rows_in_one_tile_match_bruteforce():
    """Strings alike to the prompts and unrelated ones in the same tiles, prompts of both kinds: some rows
    are dense (most entries match), some sparse, and the default choice bins each its own way; exact
    whichever way every row is binned."""
    rng = np.random.default_rng(12)
    direction = rng.normal(size=D)
    prompts = np.concatenate([direction + 0.2 * rng.normal(size=(8, D)), rng.normal(size=(8, D))]).astype(np.float32)
    strings = np.concatenate([direction + 0.2 * rng.normal(size=(300, D)), rng.normal(size=(300, D))])
    strings = strings[rng.permutation(len(strings))].astype(np.float32)
    m, _ = _check(prompts, strings, _counts(rng, len(strings), max_tokens=3), string_chunk=128)
    share = m.sum(axis=1) / len(strings)
    assert (share[:8] > 0.4).all() and (share[8:] < 0.1).all()  # rows of both kinds
    assert m[:8, -10:].sum() > 0  # the alike strings reach the top bins


def test_a_grid_of_one_edge_matches_bruteforce():
    rng = np.random.default_rng(6)
    prompts, strings = _correlated(rng, 10, 200)
    _check(prompts, strings, _counts(rng, 200, max_tokens=2), edges=threshold_edges(0.8, 0.01, 1))


def test_search_prompts_stacks_blocks():
    rng = np.random.default_rng(7)
    blocks = [_correlated(rng, 6, 80) for _ in range(3)]
    counts = _counts(rng, 80, max_tokens=2)
    m, c = search_prompts([p for p, _ in blocks], lambda b: blocks[b][1], CountsCSR.from_dense(counts), EDGES,
                          progress=False, prompt_chunk=4, string_chunk=32)
    assert m.shape == (6, 3, len(EDGES)) and c.shape == (6, 3, len(EDGES), VOCAB)
    for b, (p, s) in enumerate(blocks):
        em, ec = search_block_bruteforce(p, s, counts, EDGES)
        assert np.array_equal(m[:, b], em) and np.array_equal(c[:, b], ec)


def test_members_mask_with_a_grid_starting_below_zero():
    rng = np.random.default_rng(8)
    prompts = rng.normal(size=(5, 8)).astype(np.float32)
    strings = rng.normal(size=(50, 8)).astype(np.float32)
    members = rng.random(50) < 0.5
    counts = _counts(rng, 50, max_tokens=2)
    _check(prompts, strings, counts, edges=threshold_edges(-0.5, 0.1, 10), members=members)


def test_a_prompt_among_the_strings_matches_itself_in_the_last_bin():
    # corpus mode: every prompt is also a string, with cosine 1 (the default grid ends at 0.99)
    rng = np.random.default_rng(9)
    prompts = rng.normal(size=(30, 64)).astype(np.float32)
    strings = np.concatenate([rng.normal(size=(100, 64)), prompts, 2 * prompts]).astype(np.float32)
    counts = _counts(rng, len(strings), max_tokens=2)
    m, _ = _check(prompts, strings, counts)
    assert (m[:, -1] >= 2).all()


def test_self_matches_with_an_edge_at_one_match_bruteforce():
    rng = np.random.default_rng(0)
    prompts = rng.normal(size=(50, 64)).astype(np.float32)
    edges = threshold_edges(0.70, 0.01, 31)
    assert edges[-1] == 1.0
    _check(prompts, prompts.copy(), np.ones((50, VOCAB), dtype=np.uint32), edges=edges)


def test_worker_threads_give_the_same_result():
    rng = np.random.default_rng(10)
    prompts, strings = _correlated(rng, 37, 500)
    counts = _counts(rng, 500, max_tokens=3)
    expected = search_block_bruteforce(prompts, strings, counts, EDGES)
    for threads in (1, 2, 3):
        got = search_block(prompts, strings, CountsCSR.from_dense(counts), EDGES, threads=threads,
                           prompt_chunk=5, string_chunk=64)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


def _unit_rows(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [16, 384])
def test_tile_cosines_are_within_the_rounding_margin(d):
    """The proven bound holds on real tiles (float32 unit prompts times raw strings, times the strings'
    float64 inverse norms): vectors with a few large coordinates (the worst case for relative rounding),
    pairs at every cosine from -1 to 1."""
    rng = np.random.default_rng(11)
    p = (rng.normal(size=(64, d)) * rng.choice([1.0, 30.0], p=[0.9, 0.1], size=(64, d))).astype(np.float32)
    s = np.concatenate([p[rng.integers(0, 64, 2000)] + rng.normal(size=(2000, d)) * rng.uniform(0, 3, (2000, 1)),
                        rng.normal(size=(2000, d))]).astype(np.float32)
    exact = _unit_rows(p.astype(np.float64)) @ _unit_rows(s.astype(np.float64)).T
    p_norms, s_norms = search_module._norms(p), search_module._norms(s)
    p_unit = torch.from_numpy(p * search_module._inverse(p_norms)[:, None].astype(np.float32))
    with exact_float32_matmul():
        tile = search_module._tile_matmul(p_unit, torch.from_numpy(s).T).double().numpy()
    error = np.abs(tile * search_module._inverse(s_norms)[None, :] - exact).max()
    assert error <= rounding_margin(d)
    assert error > rounding_margin(d) / 200  # the bound is not vacuous: it is near the real error
    assert (np.abs(exact) > 0.7).sum() >= 1000  # pairs around the grid, not only near 0


def test_a_binner_the_device_lacks_is_refused():
    with pytest.raises(ValueError, match="not available"):
        search_block(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32),
                     CountsCSR.from_dense(np.ones((1, VOCAB))), EDGES, binner="compiled", device="meta")


@pytest.mark.parametrize("binner", ["compiled", "torch"])
def test_the_search_runs_its_float32_matmuls_in_full_precision(monkeypatch, binner):
    """A user (or another library) may allow TF32 / bf16 for float32 matmuls; the search must not use it
    (its error bound assumes float32), and must leave the user's setting as it found it."""
    seen = []
    real = search_module._tile_matmul

    def spy(a, b_t):
        seen.append((a.dtype, torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32))
        return real(a, b_t)

    monkeypatch.setattr(search_module, "_tile_matmul", spy)
    rng = np.random.default_rng(12)
    prompts, strings = _correlated(rng, 10, 200)
    counts = _counts(rng, 200)
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")  # TF32 on a GPU, bf16 inside float32 matmuls on a CPU
        got = search_block(prompts, strings, CountsCSR.from_dense(counts), EDGES, binner=binner)
        assert torch.get_float32_matmul_precision() == "medium"  # restored
    finally:
        torch.set_float32_matmul_precision(previous)
    assert seen and all(dtype == torch.float32 and precision == "highest" and not tf32
                        for dtype, precision, tf32 in seen), seen
    expected = search_block_bruteforce(prompts, strings, counts, EDGES)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


def test_a_float32_tile_is_the_float32_product_whichever_library_makes_it():
    """The CPU's float32 tiles (oneDNN's product where torch has it, else torch.mm) stay within the
    float32 bound of the float64 product, far from a bfloat16 product's error."""
    rng = np.random.default_rng(13)
    a = torch.from_numpy(rng.normal(size=(64, 384)).astype(np.float32))
    strings = torch.from_numpy(rng.normal(size=(512, 384)).astype(np.float32))
    with exact_float32_matmul():
        tile = search_module._tile_matmul(a, strings.T)  # b_t: the transpose of contiguous rows
        via_mm = search_module._tile_matmul(a, strings.T.contiguous())  # not: torch.mm
    exact = a.double() @ strings.double().T
    bound = 384 * 2.0**-24 * (a.double().abs() @ strings.double().abs().T)  # d u sum |a_i b_i|
    for got in (tile, via_mm):
        assert got.dtype == torch.float32 and got.shape == (64, 512)
        assert ((got.double() - exact).abs() <= bound).all()
    bf16 = (a.bfloat16() @ strings.bfloat16().T).double()
    assert (bf16 - exact).abs().max() > 100 * (tile.double() - exact).abs().max()


def test_a_float32_tile_refuses_reduced_precision():
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        with pytest.raises(RuntimeError, match="reduced precision"):
            search_module._tile_matmul(torch.ones(2, 3), torch.ones(3, 2))
    finally:
        torch.set_float32_matmul_precision(previous)


def test_bruteforce_chunks_give_the_same_result():
    rng = np.random.default_rng(13)
    prompts, strings = _correlated(rng, 12, 300)
    counts = _counts(rng, 300, max_tokens=3)
    members = rng.random(300) < 0.7
    whole = search_block_bruteforce(prompts, strings, counts, EDGES, members, chunk=300)
    for chunk in (1, 7, 128):
        part = search_block_bruteforce(prompts, strings, counts, EDGES, members, chunk=chunk)
        assert np.array_equal(part[0], whole[0]) and np.array_equal(part[1], whole[1])
    assert whole[0].sum() > 50


def test_summaries_load_back_in_prompt_order_from_any_shards(tmp_path):
    from tinylens.core.search import load_summary, write_summary

    rng = np.random.default_rng(14)
    n_blocks, n_bins = 3, len(EDGES)
    ids = np.array([5, 2, 9, 0, 7, 3])
    matches = rng.integers(0, 1000, size=(6, n_blocks, n_bins))
    counts = rng.integers(0, 2**31, size=(6, n_blocks, n_bins, VOCAB))
    write_summary(tmp_path / "a.parquet", ids[:4], matches[:4], counts[:4])
    write_summary(tmp_path / "b.parquet", ids[4:], matches[4:], counts[4:])
    got_ids, got_m, got_c = load_summary([tmp_path / "b.parquet", tmp_path / "a.parquet"], n_blocks, n_bins, VOCAB)
    order = np.argsort(ids)
    np.testing.assert_array_equal(got_ids, ids[order])
    np.testing.assert_array_equal(got_m, matches[order])
    np.testing.assert_array_equal(got_c, counts[order])
    assert got_c.dtype == np.uint32  # as stored: no int64 copy of the largest array
    # a shard twice (a prompt's blocks twice), or a shard missing a block, is refused
    with pytest.raises(ValueError, match="exactly once"):
        load_summary([tmp_path / "a.parquet", tmp_path / "a.parquet"], n_blocks, n_bins, VOCAB)
    write_summary(tmp_path / "c.parquet", ids[:2], matches[:2], counts[:2])
    with pytest.raises(ValueError, match="exactly once"):
        load_summary([tmp_path / "c.parquet"], n_blocks + 1, n_bins, VOCAB)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_search_on_a_gpu_matches_bruteforce():
    """The torch pass on the GPU (float32, TF32 off): exact on edge cases and on a realistic size."""
    rng = np.random.default_rng(15)
    prompts, strings = _correlated(rng, 300, 20000)
    counts = _counts(rng, 20000, max_tokens=3)
    members = rng.random(20000) < 0.9
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # as a training script leaves it
    try:
        got = search_block(prompts, strings, CountsCSR.from_dense(counts), EDGES, members, device="cuda",
                           prompt_chunk=128, string_chunk=4096)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    expected = search_block_bruteforce(prompts, strings, counts, EDGES, members)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert got[0].sum() > 10000


def test_stacked_counts_sum_both_sets_in_one_search():
    """The permuted null rides on the real search (method.md §6b): each string's own counts in the first V columns,
    another set's in the next V; every way of binning sums both exactly as two separate brute forces."""
    rng = np.random.default_rng(21)
    prompts, strings = _correlated(rng, 20, 300)
    counts = _counts(rng, 300, max_tokens=3)
    counts[:30] = 0
    other = counts[rng.permutation(300)]
    stacked = CountsCSR.from_dense(counts).stacked(CountsCSR.from_dense(other))
    assert stacked.vocab_size == 2 * VOCAB
    np.testing.assert_array_equal(stacked.indptr, CountsCSR.from_dense(np.hstack([counts, other])).indptr)
    exp_m, exp_c = search_block_bruteforce(prompts, strings, np.hstack([counts, other]), EDGES)
    for variant in VARIANTS:
        got_m, got_c = search_block(prompts, strings, stacked, EDGES, **variant, string_chunk=128)
        assert np.array_equal(got_m, exp_m) and np.array_equal(got_c, exp_c), variant
    assert np.array_equal(got_c[..., :VOCAB], search_block_bruteforce(prompts, strings, counts, EDGES)[1])


def test_the_null_permutes_counts_among_the_searched_strings_only():
    members = np.array([True, False, True, True, False, True, True, True])
    perm = null_permutation(members, seed=3)
    assert sorted(perm) == list(range(8)) and (perm[~members] == np.flatnonzero(~members)).all()
    assert set(perm[members]) == set(np.flatnonzero(members)) and (perm[members] != np.flatnonzero(members)).any()
    np.testing.assert_array_equal(perm, null_permutation(members, seed=3))  # the corpus and paper modes agree


def test_the_null_summed_in_the_same_pass_is_the_search_of_the_permuted_counts():
    """Every way of binning (candidate by candidate, entry by entry, the torch pass) sums the second count set for
    the same matches: strings with one and with several next tokens, a members mask, pairs near an edge."""
    rng = np.random.default_rng(23)
    prompts, strings = _correlated(rng, 24, 500)
    strings[-40:] = prompts[rng.integers(0, 24, 40)]  # exact matches: cosines of 1, and some on an edge
    counts = _counts(rng, 500, max_tokens=3)
    members = rng.random(500) < 0.85
    perm = null_permutation(members, seed=1)
    permuted = (counts * members[:, None])[perm]
    exp_m, exp_c = search_block_bruteforce(prompts, strings, counts, EDGES, members)
    _, exp_null = search_block_bruteforce(prompts, strings, permuted, EDGES, members)
    csr = CountsCSR.from_dense(counts, members)
    for variant in VARIANTS:
        got_m, got_c, got_null = search_block(prompts, strings, csr, EDGES, members, null=perm, string_chunk=128,
                                              **variant)
        assert np.array_equal(got_m, exp_m) and np.array_equal(got_c, exp_c), variant
        assert np.array_equal(got_null, exp_null), (variant, np.argwhere(got_null != exp_null)[:5])
    assert exp_null.sum() > 0 and not np.array_equal(exp_null, exp_c)
    with pytest.raises(ValueError, match="onto themselves"):
        search_block(prompts, strings, csr, EDGES, members, null=np.arange(500)[::-1])


def test_the_search_with_its_null_is_the_search_of_the_permuted_counts():
    rng = np.random.default_rng(22)
    blocks = [_correlated(rng, 6, 120) for _ in range(2)]
    counts = _counts(rng, 120, max_tokens=2)
    members = rng.random(120) < 0.7
    m, c, null = search_prompts_with_null([p for p, _ in blocks], lambda b: blocks[b][1],
                                          CountsCSR.from_dense(counts, members), EDGES, members, null_seed=5,
                                          progress=False, string_chunk=32)
    permuted = (counts * members[:, None])[null_permutation(members, 5)]
    for b, (p, s) in enumerate(blocks):
        em, ec = search_block_bruteforce(p, s, counts, EDGES, members)
        _, nc = search_block_bruteforce(p, s, permuted, EDGES, members)
        assert np.array_equal(m[:, b], em) and np.array_equal(c[:, b], ec) and np.array_equal(null[:, b], nc)
    assert not np.array_equal(c, null)
