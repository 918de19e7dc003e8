import numpy as np
import pytest
import torch

from tinylens.core.activations import (
    VECTOR_KINDS,
    block_path,
    block_schema,
    dump_activations,
    load_block,
    load_logits,
)
from tinylens.core.corpus import CharTokenizer
from tinylens.interventions import record_activations
from tinylens.model import ModelConfig, Transformer

CFG = ModelConfig(vocab_size=65, block_size=16, d_model=16, n_layer=3, n_head=2, dropout=0.0)
N_STRINGS = 300


@pytest.fixture(scope="module")
def tokenizer(corpus_path) -> CharTokenizer:
    tok = CharTokenizer.fit(corpus_path.read_text())
    assert tok.vocab_size == CFG.vocab_size
    return tok


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CFG).eval()


@pytest.fixture(scope="module")
def strings(tokenizer) -> list[str]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, tokenizer.vocab_size, size=(N_STRINGS, 10))
    return [tokenizer.decode(row) for row in ids]


@pytest.fixture(scope="module")
def dump(tmp_path_factory, model, tokenizer, strings):
    out = tmp_path_factory.mktemp("acts")
    dump_activations(model, tokenizer, strings, out, VECTOR_KINDS, batch_size=64, progress=False)  # 5 batches
    return out


def _direct(model, tokenizer, s: str):
    ids = torch.from_numpy(tokenizer.encode(s).astype(np.int64))[None]
    with torch.no_grad():
        return record_activations(model, ids, positions="last")


def test_dump_writes_one_file_per_block_and_logits(dump):
    assert sorted(p.name for p in dump.iterdir()) == [f"block{b}.parquet" for b in range(CFG.n_layer)] + [
        "logits.parquet"]


def test_dumped_rows_equal_a_direct_forward_of_each_string(dump, model, tokenizer, strings):
    blocks = {(b, k): load_block(dump, b, k, CFG.d_model, strings=strings)
              for b in range(CFG.n_layer) for k in VECTOR_KINDS}
    logits = load_logits(dump, CFG.vocab_size)
    assert logits.shape == (N_STRINGS, CFG.vocab_size) and logits.dtype == np.float32
    for arr in blocks.values():
        assert arr.shape == (N_STRINGS, CFG.d_model) and arr.dtype == np.float32
    rows = [0, 63, 64, 65, 200, N_STRINGS - 1] + list(np.random.default_rng(1).choice(N_STRINGS, 6, replace=False))
    for row in rows:  # first/last rows of batches and random ones
        direct_logits, acts = _direct(model, tokenizer, strings[row])
        np.testing.assert_allclose(logits[row], direct_logits[0].numpy(), atol=1e-5, rtol=0)
        for b in range(CFG.n_layer):
            for k in VECTOR_KINDS:
                np.testing.assert_allclose(blocks[b, k][row], acts[k][b, 0].numpy(), atol=1e-5, rtol=0,
                                           err_msg=f"row {row} block {b} {k}")
    # the rows differ from each other (the order is the order of the strings, not one row repeated)
    assert not np.allclose(blocks[0, "ffwd_out"][0], blocks[0, "ffwd_out"][1])


def test_block_input_of_next_block_is_the_sum_of_the_previous_block(dump):
    x = {(b, k): load_block(dump, b, k, CFG.d_model) for b in range(CFG.n_layer) for k in VECTOR_KINDS}
    for b in range(CFG.n_layer - 1):
        np.testing.assert_allclose(x[b + 1, "block_input"], x[b, "block_input"] + x[b, "sa_out"] + x[b, "ffwd_out"],
                                   atol=1e-5)


def test_row_count_mismatch_is_a_value_error(dump, strings):
    with pytest.raises(ValueError, match=f"has {N_STRINGS} rows but its table has {N_STRINGS + 1}"):
        load_block(dump, 0, "ffwd_out", CFG.d_model, strings=[*strings, strings[0]])


def test_a_dump_of_other_strings_with_as_many_rows_is_refused(dump, strings):
    """Readers join dumps to tables by row: a dump of the same number of other strings (another prompt
    mode or sample) is refused, not silently misaligned."""
    np.testing.assert_array_equal(load_block(dump, 1, "ffwd_out", CFG.d_model, strings=strings),
                                  load_block(dump, 1, "ffwd_out", CFG.d_model))
    assert load_logits(dump, CFG.vocab_size, strings=strings).shape == (N_STRINGS, CFG.vocab_size)
    swapped = [strings[1], strings[0], *strings[2:]]  # same strings, two rows in another order
    for other in (swapped, [s[::-1] for s in strings]):
        with pytest.raises(ValueError, match=r"block1\.parquet was dumped for other strings than its table's"):
            load_block(dump, 1, "ffwd_out", CFG.d_model, strings=other)
        with pytest.raises(ValueError, match=r"logits\.parquet was dumped for other strings"):
            load_logits(dump, CFG.vocab_size, strings=other)
    with pytest.raises(ValueError, match=f"has {N_STRINGS} rows but its table has {N_STRINGS - 1}"):
        load_logits(dump, CFG.vocab_size, strings=strings[:-1])


def test_a_dump_without_a_strings_digest_is_refused_when_rows_are_joined(tmp_path, dump, strings):
    import pyarrow.parquet as pq

    table = pq.read_table(block_path(dump, 0))
    pq.write_table(table.replace_schema_metadata({}), block_path(tmp_path, 0))  # as an older tinylens wrote it
    assert load_block(tmp_path, 0, "ffwd_out", CFG.d_model).shape == (N_STRINGS, CFG.d_model)
    with pytest.raises(ValueError, match="records no digest of the strings it was dumped for"):
        load_block(tmp_path, 0, "ffwd_out", CFG.d_model, strings=strings)


def test_other_d_model_is_a_value_error(dump):
    with pytest.raises(ValueError, match="wrong types"):
        load_block(dump, 0, "ffwd_out", CFG.d_model + 1)


def test_kind_not_dumped_is_a_value_error_naming_it(tmp_path, model, tokenizer, strings):
    dump_activations(model, tokenizer, strings[:20], tmp_path, ["ffwd_out", "sa_out"], batch_size=8, progress=False)
    got = load_block(tmp_path, 2, "sa_out", CFG.d_model, strings=strings[:20])
    _, acts = _direct(model, tokenizer, strings[7])
    np.testing.assert_allclose(got[7], acts["sa_out"][2, 0].numpy(), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="no 'block_input' column"):
        load_block(tmp_path, 0, "block_input", CFG.d_model)
    with pytest.raises(ValueError, match="no 'attn_pattern' column"):
        load_block(tmp_path, 0, "attn_pattern", CFG.d_model)


def test_truncated_block_file_is_a_value_error(tmp_path, dump):
    path = block_path(tmp_path, 1)
    data = block_path(dump, 1).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or not a Parquet file") as err:
        load_block(tmp_path, 1, "ffwd_out", CFG.d_model)
    assert str(path) in str(err.value)


def test_missing_block_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="block4.parquet is missing"):
        load_block(tmp_path, 4, "ffwd_out", CFG.d_model)
    with pytest.raises(FileNotFoundError):
        load_logits(tmp_path, CFG.vocab_size)


@pytest.mark.parametrize("where", ["tinylens.core.activations._shared_prefix_pass", "tinylens.tables.to_record_batch"],
                         ids=["forward", "writer thread"])
def test_failed_dump_leaves_no_files(tmp_path, model, tokenizer, strings, monkeypatch, where):
    import importlib

    calls = []
    module, name = where.rsplit(".", 1)
    original = getattr(importlib.import_module(module), name)

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("interrupted")
        return original(*args, **kwargs)

    monkeypatch.setattr(where, flaky)
    with pytest.raises(RuntimeError, match="interrupted"):
        dump_activations(model, tokenizer, strings[:50], tmp_path, ["ffwd_out"], batch_size=16, progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kinds", [["ffwd_out"], list(VECTOR_KINDS)], ids=["ffwd_out", "every kind"])
def test_the_dump_is_deterministic_and_a_plain_forward_to_rounding(tmp_path, model, tokenizer, strings, kinds):
    """Two dumps of a few strings at a time with the writer thread are the same bytes, and their values those of
    benchmarks/dump_activations.py's reference (one plain forward per batch recording every kind, written in
    turn) to float32 rounding, whatever the chunk."""
    import filecmp
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "dump_benchmark", Path(__file__).resolve().parents[1] / "benchmarks/dump_activations.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    old, whole, new, again = (tmp_path / name for name in ("old", "whole", "new", "again"))
    for folder in (old, whole, new, again):
        folder.mkdir()
    benchmark.reference_dump(model, tokenizer, strings, old, kinds, batch_size=64)
    dump_activations(model, tokenizer, strings, whole, kinds, batch_size=64, chunk=64, progress=False)
    for folder in (new, again):
        dump_activations(model, tokenizer, strings, folder, kinds, batch_size=64, chunk=24, progress=False)  # 5 row groups
    names = sorted(p.name for p in old.iterdir())
    assert len(names) == CFG.n_layer + 1
    assert filecmp.cmpfiles(new, again, names, shallow=False) == (names, [], [])
    for dump in (whole, new):
        for b in range(CFG.n_layer):
            for k in kinds:
                np.testing.assert_allclose(load_block(dump, b, k, CFG.d_model), load_block(old, b, k, CFG.d_model),
                                           atol=2e-6, rtol=0)
        np.testing.assert_allclose(load_logits(dump, CFG.vocab_size), load_logits(old, CFG.vocab_size), atol=2e-6,
                                   rtol=0)


def test_strings_that_share_prefixes_get_a_plain_forwards_activations(model, tokenizer, corpus_path):
    """The sorted windows of a text share most of their first characters: each distinct prefix is computed
    once (tinylens.core.activations.last_position on a CPU), and every row is still its own string's, in order,
    in one chunk or in chunks of 7."""
    from tinylens.core.activations import last_position, prefix_levels

    text = corpus_path.read_text()[:3000]
    windows = sorted({text[i : i + 10] for i in range(len(text) - 10)})
    ids = np.stack([tokenizer.encode(w) for w in windows]).astype(np.int64)
    levels = prefix_levels(ids)
    assert len(levels[0][1]) < 0.2 * len(ids) and len(levels[-1][1]) == len(ids)  # shared first characters
    with torch.no_grad():
        logits, blocks = last_position(model, torch.from_numpy(ids), list(VECTOR_KINDS), chunk=len(ids))
        again, blocks_again = last_position(model, torch.from_numpy(ids), list(VECTOR_KINDS), chunk=7)
        plain, acts = record_activations(model, torch.from_numpy(ids), positions="last", patterns=False)
    for got, got_blocks in ((logits, blocks), (again, blocks_again)):
        np.testing.assert_allclose(got, plain.numpy(), atol=2e-6, rtol=0)
        for b in range(CFG.n_layer):
            for k in VECTOR_KINDS:
                np.testing.assert_allclose(got_blocks[b][k], acts[k][b].numpy(), atol=2e-6, rtol=0,
                                           err_msg=f"block {b} {k}")


def test_dump_rejects_bad_input(tmp_path, model, tokenizer):
    with pytest.raises(ValueError, match="same length"):
        dump_activations(model, tokenizer, ["abcdefghij", "abc"], tmp_path, ["ffwd_out"], progress=False)
    with pytest.raises(ValueError, match="unknown activation kinds"):
        block_schema(["ffwd_out", "attn_pattern"], 16)
