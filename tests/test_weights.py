import json

import pytest
import torch

from tinylens.model import ModelConfig, Transformer
from tinylens.weights import load_model, load_weights, save_model

CFG = ModelConfig(vocab_size=65, block_size=8, n_embed=16, n_layer=2, n_head=2, dropout=0.0)


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
    bigger = Transformer(ModelConfig(vocab_size=65, block_size=8, n_embed=32, n_layer=2, n_head=2))
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
