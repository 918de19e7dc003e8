import json

import pytest
import torch

from tinylens.model import ModelConfig, Transformer
from tinylens.weights import load_model, load_weights, save_model

CFG = ModelConfig(vocab_size=65, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.0)


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = Transformer(CFG)
    save_model(tmp_path, model)
    return tmp_path, model


def test_round_trip_is_exact(saved):
    directory, model = saved
    loaded = load_model(directory)
    assert loaded.config == CFG
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name])
    assert json.loads((directory / "config.json").read_text())["n_embed"] == 16
    assert not list(directory.glob(".tmp-*"))


def test_truncated_weights_fail_clearly(saved):
    directory, _ = saved
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated or not a safetensors file.*dvc pull"):
        load_model(directory)


def test_foreign_file_fails_clearly(saved):
    directory, _ = saved
    (directory / "model.safetensors").write_text("not weights at all")
    with pytest.raises(ValueError, match="model.safetensors is truncated or not a safetensors file"):
        load_model(directory)


def test_wrong_shapes_name_the_tensor(saved):
    directory, _ = saved
    bigger = Transformer(ModelConfig(vocab_size=65, block_size=8, d_model=32, n_layer=2, n_head=2))
    with pytest.raises(ValueError, match=r"tok_emb.weight: file has \(65, 16\), config implies \(65, 32\)"):
        load_weights(bigger, directory / "model.safetensors")


def test_missing_files_say_how_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json is missing.*dvc pull"):
        load_model(tmp_path)


def test_checkpoints_are_listed_by_step_and_load_into_their_model(tmp_path):
    from tinylens.weights import checkpoint_path, checkpoint_steps, load_checkpoint, save_weights

    save_model(tmp_path, Transformer(CFG))
    models = {}
    for step in (100, 0, 20):
        torch.manual_seed(step)
        models[step] = Transformer(CFG)
        save_weights(checkpoint_path(tmp_path, step), models[step])
    assert checkpoint_steps(tmp_path) == [0, 20, 100]
    loaded = load_checkpoint(tmp_path, 20)
    assert not loaded.training
    for name, tensor in models[20].state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name])
    with pytest.raises(FileNotFoundError, match="step_000050.safetensors is missing"):
        load_checkpoint(tmp_path, 50)
    (tmp_path / "checkpoints/step_latest.safetensors").write_text("x")
    with pytest.raises(ValueError, match="not named step_NNNNNN"):
        checkpoint_steps(tmp_path)


def test_safetensors_files_are_byte_identical_whatever_the_metadata_order(tmp_path):
    """The serializer's hash map orders metadata keys differently from call to call; ours sorts them."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from tinylens.weights import save_tensors

    tensors = {"b": torch.arange(6.0).reshape(2, 3), "a": torch.ones(4, dtype=torch.float16)}
    metadata = {key: str(i) for i, key in enumerate("edcba")}
    paths = [tmp_path / f"{i}.safetensors" for i in range(8)]
    for path in paths:
        save_tensors(path, tensors, metadata)
    assert len({path.read_bytes() for path in paths}) == 1
    loaded = load_file(paths[0])
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors) and loaded.keys() == tensors.keys()
    with safe_open(str(paths[0]), framework="pt") as f:
        assert f.metadata() == metadata
    data = paths[0].read_bytes()
    length = int.from_bytes(data[:8], "little")
    assert list(json.loads(data[8:8 + length])["__metadata__"]) == sorted(metadata)
    assert length % 8 == 0  # the tensor data stays 8-byte aligned
