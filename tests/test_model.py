import json

import pytest
import torch

from tinylens.config import model_config, resolve_preset
from tinylens.interventions import record_activations
from tinylens.model import ModelConfig, Transformer
from tinylens.model_config import ACTIVATION_KINDS
from tinylens.reference import ReferenceTransformer, load_fused_weights

SMALL = ModelConfig(vocab_size=65, block_size=16, d_model=32, n_layer=3, n_head=4, dropout=0.1)


@pytest.fixture
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(SMALL).eval()


@pytest.fixture
def idx() -> torch.Tensor:
    return torch.randint(0, SMALL.vocab_size, (5, SMALL.block_size), generator=torch.Generator().manual_seed(1))


def test_paper_preset_has_the_published_parameter_count(config):
    paper = model_config(resolve_preset(config, "paper")["model"], vocab_size=65)
    model = Transformer(paper)
    assert model.n_params() == 10_788_929
    assert sum(p.numel() for b in model.blocks for p in b.ffwd.parameters()) == 7_089_408


def test_block_output_is_input_plus_sa_out_plus_ffwd_out(model, idx):
    with torch.no_grad():
        logits, acts = record_activations(model, idx, positions="all")
        x = acts["block_input"]
        for b in range(SMALL.n_layer - 1):
            torch.testing.assert_close(x[b + 1], x[b] + acts["sa_out"][b] + acts["ffwd_out"][b])
        last = x[-1] + acts["sa_out"][-1] + acts["ffwd_out"][-1]
        torch.testing.assert_close(logits, model.unembed(last))
        # and the pieces are what the block's modules compute
        block = model.blocks[1]
        sa_out, _ = block.sa(block.ln1(x[1]))
        torch.testing.assert_close(acts["sa_out"][1], sa_out)
        torch.testing.assert_close(acts["ffwd_out"][1], block.ffwd(block.ln2(x[1] + sa_out)))


@pytest.mark.parametrize("positions", ["all", "last"])
def test_instrumented_forward_gives_the_plain_logits(model, idx, positions):
    with torch.no_grad():
        plain, _ = model(idx)
        logits, acts = record_activations(model, idx, positions=positions)
    expected = plain if positions == "all" else plain[:, -1]
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    assert set(acts) == set(ACTIVATION_KINDS)


def test_last_position_is_a_slice_of_all_positions(model, idx):
    with torch.no_grad():
        _, every = record_activations(model, idx, positions="all")
        _, last = record_activations(model, idx, positions="last")
    b, n, pos, d = SMALL.n_layer, idx.shape[0], idx.shape[1], SMALL.d_model
    assert last["ffwd_out"].shape == (b, n, d)
    assert every["ffwd_out"].shape == (b, n, pos, d)
    assert last["attn_pattern"].shape == (b, n, SMALL.n_head, pos)
    for name in ("block_input", "sa_out", "ffwd_out"):
        torch.testing.assert_close(last[name], every[name][:, :, -1])
    torch.testing.assert_close(last["attn_pattern"], every["attn_pattern"][:, :, :, -1])


def test_attention_pattern_is_causal_and_row_stochastic(model, idx):
    with torch.no_grad():
        _, acts = record_activations(model, idx, positions="all")
    pattern = acts["attn_pattern"]  # [block batch n_heads pos pos]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
    upper = torch.triu(torch.ones(idx.shape[1], idx.shape[1], dtype=torch.bool), diagonal=1)
    assert (pattern[..., upper] == 0).all()


def test_fused_attention_is_the_per_head_reference(model, idx):
    reference = load_fused_weights(ReferenceTransformer(SMALL), model).eval()
    assert reference.n_params() == model.n_params()
    with torch.no_grad():
        torch.testing.assert_close(reference(idx)[0], model(idx)[0], rtol=1e-5, atol=1e-5)


def test_loss_is_cross_entropy_and_near_log_vocab_at_init(model, idx):
    _, loss = model(idx, idx)
    assert abs(loss.item() - torch.log(torch.tensor(65.0)).item()) < 0.1


def test_too_long_sequence_is_rejected(model):
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, SMALL.block_size + 1, dtype=torch.long))


def test_generate_is_reproducible_and_extends_the_prompt(model):
    prompt = torch.tensor([[1, 2, 3]])
    a = model.generate(prompt, 20, generator=torch.Generator().manual_seed(7))
    b = model.generate(prompt, 20, generator=torch.Generator().manual_seed(7))
    assert a.shape == (1, 23) and torch.equal(a, b) and torch.equal(a[:, :3], prompt)


def test_model_config_rejects_bad_head_split_and_unknown_keys():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError, match="unknown keys \\['n_embd'\\]"):
        ModelConfig.from_dict({"n_embd": 3})


def test_every_preset_builds(config):
    for name in config["presets"]:
        cfg = model_config(resolve_preset(config, name)["model"], vocab_size=65)
        assert Transformer(cfg).config.n_layer == 6


def test_the_model_imports_nothing_from_the_project_but_its_shape(repo):
    """model.py is the leaf every module builds on: it knows neither the analyses (tinylens.interventions
    records and edits its activations) nor the disk (tinylens.weights reads and writes it); its shape,
    ModelConfig, lives in model_config.py, which imports neither the project nor torch."""
    import ast

    def imports(name):
        tree = ast.parse((repo / f"src/tinylens/{name}.py").read_text(encoding="utf-8"))
        found = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        return found | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}

    assert {m for m in imports("model") if m.startswith("tinylens")} == {"tinylens.model_config"}
    assert not {m for m in imports("model_config") if m.startswith(("tinylens", "torch"))}


def test_the_config_offers_the_activation_kinds_the_library_dumps(repo):
    import yaml

    from tinylens.model_config import VECTOR_KINDS

    schema = yaml.safe_load((repo / "config/schema.yaml").read_text(encoding="utf-8"))
    kinds = schema["$defs"]["preset"]["properties"]["analysis"]["properties"]["string_kinds"]
    assert set(kinds["items"]["enum"]) == set(VECTOR_KINDS)


def _variant(**options) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=11, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.0,
                                    **options))
    with torch.no_grad():  # non-trivial gains, so a misplaced one shows
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln"):
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def test_tied_embeddings_share_one_weight_and_round_trip_through_the_files(tmp_path):
    from tinylens.weights import load_model, save_model

    tied, untied = _variant(tie_embeddings=True), _variant()
    assert tied.lm_head.weight is tied.tok_emb.weight and tied.lm_head.bias is not None
    assert tied.n_params() == untied.n_params() - 11 * 16  # the unembedding's weight is the embedding
    save_model(tmp_path, tied)
    assert json.loads((tmp_path / "config.json").read_text())["tie_embeddings"] is True
    back = load_model(tmp_path)
    assert back.lm_head.weight is back.tok_emb.weight
    idx = torch.tensor([[1, 2, 3, 4, 0, 10]])
    torch.testing.assert_close(back(idx)[0], tied(idx)[0], atol=0, rtol=0)
    # the unembedding reads the embedding: logits minus bias are ln_f(x) . E[v]
    x = tied.ln_f(torch.randn(3, 16))
    torch.testing.assert_close(tied.lm_head(x) - tied.lm_head.bias, x @ tied.tok_emb.weight.T)


def test_rmsnorm_divides_by_the_root_mean_square_and_is_blind_to_scale_and_rotation(tmp_path):
    from tinylens.weights import load_model, save_model

    model = _variant(norm="rmsnorm")
    norms = [model.ln_f] + [b.ln1 for b in model.blocks] + [b.ln2 for b in model.blocks]
    assert all(isinstance(n, torch.nn.RMSNorm) and n.eps == 1e-5 for n in norms)
    x = torch.randn(5, 16)
    g = model.ln_f.weight
    torch.testing.assert_close(model.ln_f(x), x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-5) * g)
    q, _ = torch.linalg.qr(torch.randn(16, 16))
    unit = torch.nn.RMSNorm(16, eps=0.0)  # gain 1: the normalisation alone commutes with rotations and scalings
    torch.testing.assert_close(unit(3.0 * x @ q), unit(x) @ q, atol=1e-5, rtol=0)
    save_model(tmp_path, model)
    assert json.loads((tmp_path / "config.json").read_text())["norm"] == "rmsnorm"
    idx = torch.tensor([[1, 2, 3, 4, 0, 10]])
    torch.testing.assert_close(load_model(tmp_path)(idx)[0], model(idx)[0], atol=0, rtol=0)


def test_the_default_model_writes_the_config_json_it_always_wrote():
    """The variant options appear in config.json only where a model uses them, so every model trained before
    keeps its exact file and its training fingerprint (no retraining)."""
    cfg = ModelConfig(vocab_size=65, block_size=64, d_model=64, n_layer=6, n_head=4, dropout=0.0)
    assert list(cfg.to_dict()) == ["vocab_size", "block_size", "n_embed", "n_layer", "n_head", "dropout"]
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    tied = ModelConfig(**{**vars(cfg), "tie_embeddings": True})
    assert tied.to_dict()["tie_embeddings"] is True and ModelConfig.from_dict(tied.to_dict()) == tied
    with pytest.raises(ValueError, match="norm must be one of"):
        ModelConfig(norm="batchnorm")
