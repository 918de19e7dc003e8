"""What jobs declare they need (tinylens.resources), on hand-built inputs of known size."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from tinylens.resources import (
    MB,
    attention_memory,
    dump_memory,
    per_input_byte,
    per_row,
    subspace_memory,
    table_rows,
    total,
    vocab_size,
    width_factor,
)
from tinylens.tables import Schema, write_table


class Input(SimpleNamespace):
    """Snakemake's input object: by attribute and by name."""

    def __getitem__(self, name):
        return getattr(self, name)


@pytest.fixture
def job_input(tmp_path):
    import pyarrow as pa

    schema = Schema("rows", {"x": pa.int32()})
    for name, rows in (("prompts_a", 1000), ("prompts_b", 24), ("strings", 2**20)):
        write_table(tmp_path / f"{name}.parquet", schema, {"x": np.zeros(rows, dtype=np.int32)})
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 61, "n_embed": 64}), encoding="utf-8")
    (tmp_path / "ids.npy").write_bytes(b"\0" * (3 * MB))
    return Input(prompts=[str(tmp_path / "prompts_a.parquet"), str(tmp_path / "prompts_b.parquet")],
                 strings=str(tmp_path / "strings.parquet"), config=str(tmp_path / "config.json"),
                 train=str(tmp_path / "ids.npy"), val=str(tmp_path / "ids.npy"), table=str(tmp_path / "strings.parquet"))


def test_rows_and_vocabulary_are_read_from_the_inputs(job_input):
    assert table_rows(job_input.strings) == 2**20 and table_rows(job_input.prompts) == 1024
    assert vocab_size(job_input.config) == 61


def test_per_row_memory_time_and_the_vocabulary(job_input):
    assert per_row("strings", 600, row_bytes=16)(None, job_input) == 600 + 16
    assert per_row("prompts", 5, row_seconds=0.6)(None, job_input) == 5 + int(1024 * 0.6 / 60)
    # 1024 prompts x 61 vocabulary entries x 2 blocks x 3 bins x 8 bytes
    assert per_row("prompts", 500, vocab_bytes=2 * 3 * 8)(None, job_input) == 500 + int(1024 * 61 * 48 / MB)
    both = total(per_row("strings", 550, 1900), per_row("prompts", 0, vocab_bytes=2**20 / 61))
    assert both(None, job_input) == 550 + 1900 + 1024
    # several named inputs: their rows summed (the controls' prompt tables of three modes)
    assert per_row(["prompts", "strings"], 100, row_bytes=MB / 1024)(None, job_input) == 100 + (1024 + 2**20) // 1024


def test_memory_per_byte_of_the_token_ids(job_input):
    assert per_input_byte(["train", "val"], 400, 60)(None, job_input) == 400 + 60 * 6


def test_an_input_not_made_yet_is_to_be_determined(tmp_path):
    """Snakemake reads FileNotFoundError as "to be determined" until the job making the input has run."""
    missing = Input(strings=str(tmp_path / "none.parquet"), config=str(tmp_path / "none.json"))
    with pytest.raises(FileNotFoundError, match="none.parquet"):
        per_row("strings", 600, 16)(None, missing)
    with pytest.raises(FileNotFoundError, match="none.json"):
        subspace_memory(100, 64)(None, missing)


def test_the_model_shaped_formulas(job_input):
    assert width_factor(32) == 1.0 and width_factor(384) == 6.0
    # 1 MB of strings rows at 1,900 + 4 x 64 bytes, plus a batch of 4096 x 10 x 64 float32 per kind and block
    dump = dump_memory(lambda wildcards: ["ffwd_out"], 6, 64, 10, 4096)(None, job_input)
    assert dump == int(850 + (2**20 * (1900 + 256) + 4096 * 10 * 64 * 4 * (6 + 10)) / MB)
    assert subspace_memory(100, 64)(None, job_input) == 1000 + 48 * 100 * 61 * 64 * 4 // MB
    mem = attention_memory({"n_layer": 6, "block_size": 64, "d_model": 64, "n_head": 4},
                           {"lens_sequences": 128, "sequences": 32})
    assert mem["spectra"] == int(450 + 16 * 6 * 16 * 4 * 64**2 * 8 / MB)
    assert mem["trajectories"](None, job_input) == int(450 + 24 * 7 * 32 * 64 * 8 / MB * 61)
