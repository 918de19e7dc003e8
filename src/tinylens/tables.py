"""Tables with a written-down schema: checked on every read, written atomically.

Every table the workflow writes has a :class:`Schema` (column names, Arrow
types, fixed-size list widths) in the module that owns it. Readers call
:func:`read_table` / :func:`open_table`, which reject a truncated file, a
file that is not Parquet, or one whose columns or types differ, saying which
file, what was expected and what to do. Small curves that DVC plots read are
CSV, written and read the same way (:func:`write_csv`, :func:`read_csv`).
Joins of tables by id go through :func:`align_ids`, which refuses ids that do
not line up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from tinylens.atomic import atomic_path

REMEDY = "rerun the rule that writes it (snakemake --forcerun <rule>) or restore it with `dvc pull`"


@dataclass(frozen=True)
class Schema:
    name: str
    columns: Mapping[str, pa.DataType]

    def arrow(self) -> pa.Schema:
        return pa.schema([pa.field(k, v, nullable=False) for k, v in self.columns.items()])

    def check(self, found: pa.Schema, path: str | Path) -> None:
        expected = {k: _type_name(v) for k, v in self.columns.items()}
        actual = {f.name: _type_name(f.type) for f in found}
        if expected != actual:
            missing = {k: v for k, v in expected.items() if k not in actual}
            wrong = {k: (v, actual[k]) for k, v in expected.items() if k in actual and actual[k] != v}
            extra = sorted(set(actual) - set(expected))
            raise ValueError(
                f"{path} is not a tinylens {self.name} table: missing columns {missing}, "
                f"wrong types {{column: (expected, found)}} {wrong}, unexpected columns {extra}; {REMEDY}"
            )


def _type_name(dtype: pa.DataType) -> str:
    """Type as text, ignoring the item name of list types (Parquet renames it)."""
    if isinstance(dtype, pa.FixedSizeListType):
        return f"fixed_size_list<{dtype.value_type}>[{dtype.list_size}]"
    return str(dtype)


def to_arrow(values, dtype: pa.DataType) -> pa.Array:
    """A column from a list or numpy array; 2-D arrays become fixed-size lists."""
    if isinstance(dtype, pa.FixedSizeListType):
        arr = np.ascontiguousarray(values)
        if arr.ndim != 2 or arr.shape[1] != dtype.list_size:
            raise ValueError(f"expected a [rows {dtype.list_size}] array for a list column of width "
                             f"{dtype.list_size}, got shape {arr.shape}")
        flat = pa.array(arr.reshape(-1), type=dtype.value_type)
        return pa.FixedSizeListArray.from_arrays(flat, dtype.list_size)
    return pa.array(values, type=dtype)


def to_record_batch(schema: Schema, columns: Mapping[str, object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([to_arrow(columns[k], t) for k, t in schema.columns.items()],
                                      schema=schema.arrow())


def _floating(dtype: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(dtype) or pa.types.is_list(dtype):
        dtype = dtype.value_type
    return pa.types.is_floating(dtype)


def dictionary_columns(schema: Schema) -> list[str]:
    """The columns written with a dictionary: all but floating-point ones (and lists of them). Floats are nearly
    all distinct, so a dictionary only costs: on a strings-dump block (858,923 x 64 float32) Parquet's default
    dictionary attempt took 5.0 CPU-s to write and 1.3 to read, and made 324 MB; plain, 0.7, 1.0 and 204 MB
    (docs/benchmarks.md). The values read back are the same either way."""
    return [name for name, dtype in schema.columns.items() if not _floating(dtype)]


def write_table(path: str | Path, schema: Schema, columns: Mapping[str, object]) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_batches([to_record_batch(schema, columns)]), tmp, compression="zstd",
                       use_dictionary=dictionary_columns(schema))


@contextmanager
def table_writer(path: str | Path, schema: Schema, compression: str = "zstd",
                 metadata: Mapping[str, str] | None = None) -> Iterator:
    """Stream record batches into ``path``; the file appears only if the block completes.

    Yields a function taking a mapping of columns for one batch. ``metadata``: key-value pairs stored in
    the file's footer (the Arrow schema's metadata).
    """
    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(tmp, schema.arrow().with_metadata(dict(metadata or {})), compression=compression,
                                  use_dictionary=dictionary_columns(schema))
        try:
            yield lambda columns: writer.write_batch(to_record_batch(schema, columns))
        finally:
            writer.close()


def open_table(path: str | Path, schema: Schema) -> pq.ParquetFile:
    """Open ``path`` for reading and check its schema without reading the data."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; {REMEDY}")
    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is truncated or not a Parquet file ({err}); {REMEDY}") from None
    schema.check(file.schema_arrow, path)
    return file


def read_table(path: str | Path, schema: Schema, columns: Sequence[str] | None = None) -> pa.Table:
    file = open_table(path, schema)
    try:
        return file.read(columns=columns)
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is damaged ({err}); {REMEDY}") from None


def fixed_list_to_numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A fixed-size list column as a 2-D numpy array [rows list_size]."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), arr.type.list_size)


def read_fixed_list(file: pq.ParquetFile, column: str) -> np.ndarray:
    """A fixed-size list column of an opened Parquet file as a 2-D numpy array [rows list_size], read one
    row group at a time into the result: the peak is the result plus one row group (reading the whole
    column first would hold it twice, and Arrow's memory pool keeps the second copy afterwards)."""
    field = file.schema_arrow.field(column).type
    out = np.empty((file.metadata.num_rows, field.list_size), dtype=field.value_type.to_pandas_dtype())
    row = 0
    for group in range(file.num_row_groups):
        part = fixed_list_to_numpy(file.read_row_group(group, columns=[column])[column])
        out[row : row + len(part)] = part
        row += len(part)
    if row != len(out):
        raise ValueError(f"a Parquet file's row groups hold {row} rows but its footer says {len(out)}; {REMEDY}")
    return out


def table_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """An Arrow table as one numpy array per column: strings as object arrays, fixed-size lists as 2-D
    arrays ``[rows list_size]``."""
    return {name: fixed_list_to_numpy(table[name]) if isinstance(table[name].type, pa.FixedSizeListType)
            else table[name].to_numpy() for name in table.column_names}


def read_columns(path: str | Path, schema: Schema) -> dict[str, np.ndarray]:
    """A whole table as :func:`table_columns`, its schema checked on read."""
    return table_columns(read_table(path, schema))


def write_csv(path: str | Path, schema: Schema, columns: Mapping[str, object]) -> None:
    """A CSV file with a plain header line (the column names of ``schema``), atomically.

    Only scalar columns; floats are written as given (round them first for short files).
    """
    lists = [k for k, t in schema.columns.items() if pa.types.is_list(t) or pa.types.is_fixed_size_list(t)]
    if lists:
        raise ValueError(f"CSV tables hold scalar columns only; {schema.name} has list columns {lists}")
    table = pa.Table.from_batches([to_record_batch(schema, columns)])
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write((",".join(schema.columns) + "\n").encode("utf-8"))
            pcsv.write_csv(table, f, pcsv.WriteOptions(include_header=False))


def read_csv(path: str | Path, schema: Schema) -> pa.Table:
    """Read a CSV table written by :func:`write_csv`, checking its header and column types."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; {REMEDY}")
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
    if header != list(schema.columns):
        raise ValueError(f"{path} is not a tinylens {schema.name} table: its header is {header}, "
                         f"expected {list(schema.columns)}; {REMEDY}")
    try:
        return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(
            column_types=dict(schema.columns), strings_can_be_null=False))
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is damaged ({err}); {REMEDY}") from None


def align_ids(found: np.ndarray, expected: np.ndarray, found_what: str, expected_what: str) -> np.ndarray:
    """Rows of ``found`` in the order of ``expected``: ``found[result] == expected``.

    Refuses, naming both sides, when ids repeat or when either side has ids the
    other lacks: a join of tables that do not line up is an error, never a
    silent shift of rows.
    """
    found, expected = np.asarray(found), np.asarray(expected)
    for ids, what in ((found, found_what), (expected, expected_what)):
        values, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"{what} has repeated ids {values[counts > 1][:10].tolist()}; {REMEDY}")
    missing = np.setdiff1d(expected, found)
    extra = np.setdiff1d(found, expected)
    if len(missing) or len(extra):
        raise ValueError(
            f"{found_what} does not line up with {expected_what}: ids missing {missing[:10].tolist()}"
            f"{' ...' if len(missing) > 10 else ''} ({len(missing)} in all), unexpected ids {extra[:10].tolist()}"
            f"{' ...' if len(extra) > 10 else ''} ({len(extra)} in all): they are from different runs; {REMEDY}")
    order = np.argsort(found, kind="stable")
    return order[np.searchsorted(found[order], expected)]
