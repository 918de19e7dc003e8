"""Activation dumps in Parquet (method.md §4).

Each string is run as its own sequence (positions 0..n-1, eval mode) and the
last position's activations are kept. One file per block,
``block{b}.parquet``, with one fixed-size-list column per activation kind
(names from :data:`tinylens.model_config.VECTOR_KINDS`), rows in the order of the
strings; and ``logits.parquet`` with the model's last-position logits.
Batches stream to disk, so memory stays at two batches whatever the scale: one
is written (converted, zstd-compressed) by a writer thread while the next is
computed. On a CPU each batch runs :data:`CPU_CHUNK` strings at a time, each
distinct prefix of a chunk once (:func:`last_position`): the values are one
plain forward pass's to float32 rounding (checked by the tests), and every batch
is still one Parquet row group.

Readers join a dump to a string or prompt table by row, so every file also
records the sha256 of the strings it was dumped for (:func:`strings_digest`,
in the Parquet footer): a reader that passes its table's strings gets a dump
of other strings refused, not just one of another length (a corpus-mode and
a held-out prompt dump have the same number of rows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from tinylens.core.corpus import CharTokenizer
from tinylens.core.schemas import block_schema, logits_schema
from tinylens.interventions import hook_name, run
from tinylens.model import Transformer
from tinylens.model_config import VECTOR_KINDS
from tinylens.tables import REMEDY, open_table, read_fixed_list, table_writer

#: Strings per forward pass on a CPU. The feed-forward intermediates of 512 strings of 10 characters at
#: d_model 64 (512 x 10 x 256 float32, 5 MB) stay in cache; 4,096 at once cost about 1.5x the CPU time
#: (docs/benchmarks.md, "The strings dump on an AVX2-only CPU").
CPU_CHUNK = 512

#: The footer key holding :func:`strings_digest` of the strings a dump was made for.
STRINGS_KEY = "tinylens.strings_sha256"


def strings_digest(strings: Sequence[str]) -> str:
    """sha256 of a sequence of strings, in order (the identity of the table a dump's rows follow)."""
    digest = hashlib.sha256(f"{len(strings)}\n".encode())
    digest.update("\n".join(strings).encode("utf-8"))
    return digest.hexdigest()


def _check_rows(path: Path, file: pq.ParquetFile, strings: Sequence[str] | None) -> None:
    """Refuse a dump whose rows are not ``strings`` (nothing to check without them)."""
    if strings is None:
        return
    if file.metadata.num_rows != len(strings):
        raise ValueError(f"{path} has {file.metadata.num_rows} rows but its table has {len(strings)}: "
                         f"it is from another run; {REMEDY}")
    found = (file.schema_arrow.metadata or {}).get(STRINGS_KEY.encode())
    if found is None:
        raise ValueError(f"{path} records no digest of the strings it was dumped for (an older tinylens wrote "
                         f"it), so its rows cannot be matched to the table's; {REMEDY}")
    if found.decode() != strings_digest(strings):
        raise ValueError(f"{path} was dumped for other strings than its table's ({len(strings):,} rows each, "
                         f"different text or order): it is from another run, prompt mode or prompt sample; {REMEDY}")


def block_path(directory: str | Path, block: int) -> Path:
    return Path(directory) / f"block{block}.parquet"


def prefix_levels(ids: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The prefix tree of token rows ``ids`` ``[rows pos]``: per position p, the node (distinct prefix of p + 1
    tokens) of every row ``[rows]``, a row holding each node ``[nodes]`` and each node's parent at p - 1
    ``[nodes]`` (zeros at p = 0)."""
    levels, node = [], np.zeros(len(ids), dtype=np.int64)
    base = int(ids.max()) + 1 if ids.size else 1
    for p in range(ids.shape[1]):
        _, first, inverse = np.unique(node * base + ids[:, p], return_index=True, return_inverse=True)
        levels.append((inverse.reshape(-1).astype(np.int64), first, node[first]))
        node = levels[-1][0]
    return levels


def _shared_prefix_pass(model: Transformer, ids: np.ndarray, kinds: Sequence[str]
                        ) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """:func:`last_position` of ``ids`` computed once per distinct prefix (see :func:`last_position`)."""
    cfg, device = model.config, next(model.parameters()).device
    n_head, d_model, d_head = cfg.n_head, cfg.d_model, cfg.d_head
    levels = prefix_levels(ids)
    last = len(levels) - 1
    sizes = [len(first) for _, first, _ in levels]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    tokens = torch.from_numpy(ids).to(device)
    # every node's keys and values, per block, rows in position order: a node at p is row offsets[p] + node
    key_values = [torch.empty(offsets[-1], 2 * d_model, device=device) for _ in model.blocks]
    seen = np.zeros((1, 0), dtype=np.int64)  # [nodes p+1]: the rows of a node's prefix at every position <= p
    for p, (_, first, parent) in enumerate(levels):
        seen = np.concatenate([seen[parent], np.arange(offsets[p], offsets[p + 1])[:, None]], axis=1)
        rows = torch.from_numpy(seen.reshape(-1)).to(device)
        x = model.tok_emb(tokens[torch.from_numpy(first).to(device), p]) + model.pos_emb.weight[p]
        recorded = []
        for layer, block in enumerate(model.blocks):
            qkv = block.sa.qkv(block.ln1(x))
            key_values[layer][offsets[p] : offsets[p + 1]] = qkv[:, d_model:]
            if layer == cfg.n_layer - 1 and p < last:
                break  # the last block's output is read at the last position only; its keys and values are not
            k_seen, v_seen = key_values[layer][rows].view(-1, p + 1, 2, n_head, d_head).unbind(2)  # [nodes p+1 heads d]
            scores = (qkv[:, :d_model].view(-1, 1, n_head, d_head) * k_seen).sum(-1) * d_head**-0.5  # [nodes p+1 heads]
            pattern = torch.softmax(scores, dim=1)
            sa_out = block.sa.proj((pattern.unsqueeze(-1) * v_seen).sum(1).reshape(-1, d_model))
            mid = x + sa_out
            ffwd_out = block.ffwd(block.ln2(mid))
            if p == last:
                recorded.append({"block_input": x, "sa_out": sa_out, "ffwd_out": ffwd_out})
            x = mid + ffwd_out
    node = torch.from_numpy(levels[-1][0]).to(device)
    return model.lm_head(model.ln_f(x))[node], [{k: r[k][node] for k in kinds} for r in recorded]


def last_position(model: Transformer, batch: torch.Tensor, kinds: Sequence[str],
                  chunk: int) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
    """The last position's logits ``[rows vocab]`` and, per block, ``{kind: [rows d_model]}`` (float32 numpy) of
    ``batch`` ``[rows pos]``, ``chunk`` rows at a time; only ``kinds`` are recorded.

    On a CPU each distinct prefix of the rows is computed once (a causal model's activations at position p
    depend on tokens 0..p only): rows that share their first tokens share those positions' keys and values,
    and the last block runs its attention and feed-forward at the last position only. Sorted strings of 10
    characters hold about 0.37 distinct prefixes per position: about half the CPU time of one forward pass per
    row, measured (docs/benchmarks.md). The attention is the same maths as the model's fused kernel, its sums
    in another order: the values agree with :func:`tinylens.interventions.run`'s to float32 rounding (checked
    by the tests; the matrix products' rounding may also depend on how many rows a chunk holds). On an
    accelerator every chunk is one plain forward pass."""
    if batch.device.type == "cpu":
        ids = batch.numpy()
        traces = [_shared_prefix_pass(model, ids[i : i + chunk], kinds) for i in range(0, len(ids), chunk)]
    else:
        runs = [run(model, part, record=[f"blocks.*.{k}" for k in kinds], last_only=True) for part in batch.split(chunk)]
        traces = [(t.logits, [{k: t.cache[hook_name(b, k)] for k in kinds} for b in range(model.config.n_layer)])
                  for t in runs]

    def joined(values: list[torch.Tensor]) -> np.ndarray:
        value = values[0] if len(values) == 1 else torch.cat(values)
        return value.detach().float().cpu().numpy()

    blocks = [{k: joined([t[1][b][k] for t in traces]) for k in kinds} for b in range(model.config.n_layer)]
    return joined([t[0] for t in traces]), blocks


@torch.no_grad()
def dump_activations(model: Transformer, tokenizer: CharTokenizer, strings: Sequence[str],
                     out_dir: str | Path, kinds: Sequence[str], batch_size: int = 4096,
                     progress: bool = True, chunk: int | None = None) -> None:
    """Write ``block{b}.parquet`` for every block and ``logits.parquet`` into ``out_dir``.

    ``batch_size`` strings make one row group; ``chunk``: strings per forward pass (default: the whole batch
    on an accelerator, :data:`CPU_CHUNK` on a CPU).
    """
    model.eval()
    device = next(model.parameters()).device
    chunk = chunk or (min(batch_size, CPU_CHUNK) if device.type == "cpu" else batch_size)
    cfg = model.config
    n = len(strings[0])
    if any(len(s) != n for s in strings):
        raise ValueError("all strings of one dump must have the same length")
    ids = tokenizer.encode("".join(strings)).reshape(len(strings), n)  # [strings pos]
    schema = block_schema(kinds, cfg.d_model)
    footer = {STRINGS_KEY: strings_digest(strings)}
    with ExitStack() as stack:
        writers = [stack.enter_context(table_writer(block_path(out_dir, b), schema, metadata=footer))
                   for b in range(cfg.n_layer)]
        write_logits = stack.enter_context(table_writer(Path(out_dir) / "logits.parquet", logits_schema(cfg.vocab_size),
                                                        metadata=footer))

        def write(logits: np.ndarray, blocks: list[dict[str, np.ndarray]]) -> None:
            for block, write_block in zip(blocks, writers, strict=True):
                write_block(block)
            write_logits({"logits": logits})

        # One batch is written while the next is computed (pyarrow and torch both release the GIL). The pool
        # sits inside the stack: a failure waits for the write in flight, then the files are discarded.
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="dump-writer"))
        pending: Future | None = None
        for start in tqdm(range(0, len(strings), batch_size), disable=not progress, unit="batch",
                          desc=f"dumping {len(strings):,} strings"):
            batch = torch.from_numpy(ids[start : start + batch_size].astype(np.int64)).to(device)
            computed = last_position(model, batch, kinds, chunk)
            if pending is not None:
                pending.result()  # raises the writer's error; at most one batch waits in memory
            pending = pool.submit(write, *computed)
        if pending is not None:
            pending.result()


def load_block(directory: str | Path, block: int, kind: str, d_model: int,
               strings: Sequence[str] | None = None) -> np.ndarray:
    """One activation kind of one block as float32 [rows d_model], checked against the schema.

    ``strings``: the table whose rows the caller joins this dump's rows to (a dump made for other strings
    is refused).
    """
    path = block_path(directory, block)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; {REMEDY}")
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is truncated or not a Parquet file ({err}); {REMEDY}") from None
    # A dump holds any subset of the kinds; check the file against the subset it declares.
    schema = block_schema([k for k in VECTOR_KINDS if k in names] or [kind], d_model)
    file = open_table(path, schema)
    if kind not in schema.columns:
        raise ValueError(f"{path} has no '{kind}' column (it has {names}); add it to the preset's "
                         "activation kinds and rerun the dump")
    _check_rows(path, file, strings)
    try:
        return read_fixed_list(file, kind)  # row group by row group: one copy of the block in memory
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is damaged ({err}); {REMEDY}") from None


def load_logits(directory: str | Path, vocab_size: int, strings: Sequence[str] | None = None) -> np.ndarray:
    """The dumped last-position logits [rows vocab]; ``strings`` as for :func:`load_block`."""
    path = Path(directory) / "logits.parquet"
    file = open_table(path, logits_schema(vocab_size))
    _check_rows(path, file, strings)
    try:
        return read_fixed_list(file, "logits")
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is damaged ({err}); {REMEDY}") from None
