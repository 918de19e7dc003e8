import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tinylens.tables import (
    Schema,
    fixed_list_to_numpy,
    open_table,
    read_fixed_list,
    read_table,
    table_writer,
    write_table,
)

SCHEMA = Schema("demo", {
    "id": pa.int32(),
    "name": pa.string(),
    "vec": pa.list_(pa.float32(), 4),
})


def _columns(n: int, offset: int = 0) -> dict:
    rng = np.random.default_rng(offset)
    return {
        "id": np.arange(offset, offset + n, dtype=np.int32),
        "name": [f"row{i}" for i in range(offset, offset + n)],
        "vec": rng.normal(size=(n, 4)).astype(np.float32),
    }


def _assert_table_equals(table: pa.Table, cols: dict) -> None:
    assert table.column_names == ["id", "name", "vec"]
    np.testing.assert_array_equal(table["id"].to_numpy(), cols["id"])
    assert table["name"].to_pylist() == cols["name"]
    vec = fixed_list_to_numpy(table["vec"])
    assert vec.dtype == np.float32 and vec.shape == cols["vec"].shape
    np.testing.assert_array_equal(vec, cols["vec"])


def test_write_read_round_trip_keeps_values_and_fixed_size_list(tmp_path):
    cols = _columns(7)
    path = tmp_path / "sub" / "t.parquet"  # the parent is created
    write_table(path, SCHEMA, cols)
    table = read_table(path, SCHEMA)
    _assert_table_equals(table, cols)
    assert table.schema.field("vec").type == pa.list_(pa.float32(), 4)
    # a column subset reads only that column
    only = read_table(path, SCHEMA, columns=["vec"])
    assert only.column_names == ["vec"]
    np.testing.assert_array_equal(fixed_list_to_numpy(only["vec"]), cols["vec"])
    # no temporary file is left beside it
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.parquet"]


def test_table_writer_streams_several_batches_in_order(tmp_path):
    path = tmp_path / "stream.parquet"
    batches = [_columns(n, offset) for n, offset in [(3, 0), (5, 3), (1, 8), (4, 9)]]
    with table_writer(path, SCHEMA) as write:
        for b in batches:
            write(b)
        assert not path.exists()  # only appears when the block completes
    file = open_table(path, SCHEMA)
    assert file.metadata.num_rows == 13
    expected = {
        "id": np.concatenate([b["id"] for b in batches]),
        "name": sum((b["name"] for b in batches), []),
        "vec": np.concatenate([b["vec"] for b in batches]),
    }
    table = read_table(path, SCHEMA)
    assert table["vec"].num_chunks >= 1
    _assert_table_equals(table, expected)


def test_read_fixed_list_reads_every_row_group_in_order(tmp_path):
    path = tmp_path / "groups.parquet"
    batches = [_columns(n, offset) for n, offset in [(3, 0), (5, 3), (1, 8), (4, 9)]]
    with table_writer(path, SCHEMA) as write:
        for b in batches:
            write(b)
    file = open_table(path, SCHEMA)
    assert file.num_row_groups == 4  # one per written batch: the reader must stitch them
    got = read_fixed_list(file, "vec")
    assert got.dtype == np.float32 and got.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(got, np.concatenate([b["vec"] for b in batches]))


def test_fixed_list_to_numpy_handles_chunks_and_slices():
    flat = pa.array(np.arange(12, dtype=np.float32))
    arr = pa.FixedSizeListArray.from_arrays(flat, 3)
    np.testing.assert_array_equal(fixed_list_to_numpy(arr.slice(1, 2)), np.arange(3, 9).reshape(2, 3))
    chunked = pa.chunked_array([arr.slice(0, 1), arr.slice(1, 3)])
    np.testing.assert_array_equal(fixed_list_to_numpy(chunked), np.arange(12).reshape(4, 3))


def test_failed_writer_block_leaves_no_file(tmp_path):
    path = tmp_path / "partial.parquet"
    with pytest.raises(RuntimeError, match="boom"):
        with table_writer(path, SCHEMA) as write:
            write(_columns(3))
            raise RuntimeError("boom")
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file either


def test_failed_writer_block_keeps_the_previous_file(tmp_path):
    path = tmp_path / "t.parquet"
    old = _columns(2)
    write_table(path, SCHEMA, old)
    with pytest.raises(RuntimeError):
        with table_writer(path, SCHEMA) as write:
            write(_columns(5, 10))
            raise RuntimeError("boom")
    _assert_table_equals(read_table(path, SCHEMA), old)


@pytest.mark.parametrize("cut", [1, 8, 100])
def test_truncated_parquet_is_a_value_error_naming_the_path(tmp_path, cut):
    path = tmp_path / "t.parquet"
    write_table(path, SCHEMA, _columns(50))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])
    with pytest.raises(ValueError, match="truncated or not a Parquet file") as err:
        read_table(path, SCHEMA)
    assert str(path) in str(err.value)
    with pytest.raises(ValueError) as err:
        open_table(path, SCHEMA)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("content", [b"", b"id,name\n1,a\n", b"PAR1 not really parquet"])
def test_non_parquet_file_is_a_value_error_naming_the_path(tmp_path, content):
    path = tmp_path / "t.parquet"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="truncated or not a Parquet file") as err:
        read_table(path, SCHEMA)
    assert str(path) in str(err.value)


def test_foreign_parquet_with_other_columns_names_them(tmp_path):
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "other": [1.0, 2.0]}), path)
    with pytest.raises(ValueError) as err:
        read_table(path, SCHEMA)
    msg = str(err.value)
    assert str(path) in msg and "demo" in msg
    assert "'name'" in msg and "'vec'" in msg  # missing
    assert "'other'" in msg  # unexpected


def test_foreign_parquet_with_other_list_width_names_the_column(tmp_path):
    path = tmp_path / "wide.parquet"
    wide = Schema("demo", {**SCHEMA.columns, "vec": pa.list_(pa.float32(), 5)})
    write_table(path, wide, {**_columns(3), "vec": np.zeros((3, 5), np.float32)})
    with pytest.raises(ValueError, match=r"wrong types .*'vec'.*\[4\].*\[5\]") as err:
        read_table(path, SCHEMA)
    assert str(path) in str(err.value)


def test_foreign_parquet_with_other_column_type_names_the_column(tmp_path):
    path = tmp_path / "typed.parquet"
    other = Schema("demo", {**SCHEMA.columns, "id": pa.int64()})
    write_table(path, other, _columns(3))
    with pytest.raises(ValueError, match=r"wrong types .*'id'.*int32.*int64"):
        open_table(path, SCHEMA)


def test_missing_file_is_file_not_found(tmp_path):
    path = tmp_path / "absent.parquet"
    with pytest.raises(FileNotFoundError, match="absent.parquet is missing"):
        read_table(path, SCHEMA)
    with pytest.raises(FileNotFoundError):
        open_table(path, SCHEMA)


def test_fixed_size_list_of_the_wrong_width_is_rejected(tmp_path):
    schema = Schema("demo", {"vec": pa.list_(pa.float32(), 4)})  # one column, like logits.parquet
    path = tmp_path / "t.parquet"
    with pytest.raises(ValueError):
        write_table(path, schema, {"vec": np.arange(20, dtype=np.float32).reshape(4, 5)})
    assert not path.exists()


def test_fixed_size_list_of_the_wrong_width_is_rejected_beside_other_columns(tmp_path):
    with pytest.raises(ValueError):  # caught here only because the row counts differ (5 vs 4)
        write_table(tmp_path / "t.parquet", SCHEMA, {**_columns(4), "vec": np.zeros((4, 5), np.float32)})
    with pytest.raises(ValueError):  # 6 values do not fill lists of 4
        write_table(tmp_path / "t.parquet", SCHEMA, {**_columns(2), "vec": np.zeros((2, 3), np.float32)})
    assert not (tmp_path / "t.parquet").exists()


def test_read_columns_gives_numpy_per_column(tmp_path):
    from tinylens.tables import read_columns

    cols = _columns(5)
    write_table(tmp_path / "t.parquet", SCHEMA, cols)
    back = read_columns(tmp_path / "t.parquet", SCHEMA)
    assert list(back) == ["id", "name", "vec"]
    np.testing.assert_array_equal(back["id"], cols["id"])
    assert back["name"].tolist() == cols["name"]
    np.testing.assert_array_equal(back["vec"], cols["vec"])
    with pytest.raises(ValueError, match="not a tinylens other table"):
        read_columns(tmp_path / "t.parquet", Schema("other", {"id": pa.int64()}))


# --- CSV through the table library; joins by id ---

from tinylens.tables import align_ids, read_csv, write_csv  # noqa: E402

CURVE = Schema("curve", {"step": pa.int64(), "loss": pa.float64(), "lr": pa.float64()})


def test_csv_round_trip_has_a_plain_header_and_typed_columns(tmp_path):
    path = tmp_path / "curve.csv"
    write_csv(path, CURVE, {"step": [0, 100], "loss": [4.17, 2.5], "lr": [3e-3, 3e-4]})
    assert path.read_text(encoding="utf-8") == "step,loss,lr\n0,4.17,0.003\n100,2.5,0.0003\n"
    table = read_csv(path, CURVE)
    assert table["step"].type == pa.int64() and table["step"].to_pylist() == [0, 100]
    assert table["lr"].to_pylist() == [3e-3, 3e-4]


def test_csv_with_other_columns_or_damage_names_the_file(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text("step,loss\n0,1.0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"curve\.csv is not a tinylens curve table: its header is \['step', 'loss'\]"):
        read_csv(path, CURVE)
    path.write_text("step,loss,lr\n0,oops,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"curve\.csv is damaged"):
        read_csv(path, CURVE)
    with pytest.raises(FileNotFoundError, match="missing"):
        read_csv(tmp_path / "absent.csv", CURVE)
    with pytest.raises(ValueError, match="scalar columns only"):
        write_csv(path, SCHEMA, _columns(2))


def test_align_ids_reorders_and_refuses_what_does_not_line_up():
    found = np.array([12, 10, 11])
    rows = align_ids(found, np.array([10, 11, 12]), "shards", "prompts")
    assert found[rows].tolist() == [10, 11, 12]
    with pytest.raises(ValueError, match=r"shards does not line up with prompts: ids missing \[13\] \(1 in all\), "
                                         r"unexpected ids \[\] \(0 in all\)"):
        align_ids(found, np.array([10, 11, 12, 13]), "shards", "prompts")
    # more ids than the prompts (shards of a run with more prompts): not silently dropped either
    with pytest.raises(ValueError, match=r"shards does not line up with prompts: ids missing \[\] \(0 in all\), "
                                         r"unexpected ids \[13\] \(1 in all\)"):
        align_ids(np.array([12, 13, 10, 11]), np.array([10, 11, 12]), "shards", "prompts")
    with pytest.raises(ValueError, match=r"shards has repeated ids \[10\]"):
        align_ids(np.array([10, 10, 11]), np.array([10, 11]), "shards", "prompts")


@pytest.mark.parametrize("streamed", [False, True], ids=["write_table", "table_writer"])
def test_floating_point_columns_are_written_without_a_dictionary(tmp_path, streamed):
    """Floats (and lists of them) are nearly all distinct: no dictionary page, which would cost CPU and bytes
    (tinylens.tables.dictionary_columns); the other columns keep theirs, and every value reads back."""
    schema = Schema("mixed", {**SCHEMA.columns, "score": pa.float64()})
    cols = {**_columns(50), "score": np.random.default_rng(1).normal(size=50)}
    path = tmp_path / "t.parquet"
    if streamed:
        with table_writer(path, schema) as write:
            write(cols)
    else:
        write_table(path, schema, cols)
    chunks = pq.ParquetFile(path).metadata.row_group(0)
    dictionary = {chunks.column(i).path_in_schema.split(".")[0]: chunks.column(i).has_dictionary_page
                  for i in range(chunks.num_columns)}
    assert dictionary == {"id": True, "name": True, "vec": False, "score": False}
    table = read_table(path, schema)
    _assert_table_equals(table.select(["id", "name", "vec"]), cols)
    np.testing.assert_array_equal(table["score"].to_numpy(), cols["score"])
