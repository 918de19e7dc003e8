import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tinylens.core.training_log import summarize_training
from tinylens.model import ModelConfig, Transformer
from tinylens.train import (
    BatchSampler,
    Phase,
    TrainConfig,
    autocast_dtype,
    check_resume_fingerprint,
    matmul_precision,
    run_fingerprint,
    train,
)
from tinylens.train_config import checkpoint_schedule

TINY = ModelConfig(vocab_size=8, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.1)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train fastest on one thread; and resume is bit-identical for the same thread count
    (the README's promise), so every test here pins it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def periodic_ids(n: int) -> np.ndarray:
    """A perfectly predictable sequence: 0 1 2 ... 7 0 1 2 ..."""
    return (np.arange(n) % 8).astype(np.uint8)


def test_phases_and_checkpoint_steps_are_checked():
    with pytest.raises(ValueError, match="strictly increasing"):
        TrainConfig(seed=0, batch_size=2, phases=(Phase(10, 1e-3), Phase(5, 1e-4)), eval_interval=5, eval_iters=1)
    with pytest.raises(ValueError, match="outside"):
        TrainConfig(seed=0, batch_size=2, phases=(Phase(10, 1e-3),), eval_interval=5, eval_iters=1,
                    checkpoint_steps=(11,))
    cfg = TrainConfig(seed=0, batch_size=2, phases=(Phase(10, 1e-3), Phase(15, 1e-4)), eval_interval=5,
                      eval_iters=1, checkpoint_steps=(0, 5))
    assert [cfg.phase_at(s) for s in (0, 9, 10, 14)] == [0, 0, 1, 1]
    assert cfg.save_steps == (0, 5, 15)


def test_checkpoint_schedule_is_log_spaced_with_every_phase_end():
    steps = checkpoint_schedule(10, 26, (1600, 2000))
    assert steps[0] == 0 and steps[1] == 10 and steps[-1] == 2000 and 1600 in steps
    ratios = np.diff(np.log([s for s in steps if s not in (0, 1600)]))
    assert np.allclose(ratios, np.log(200) / 25, atol=0.03)  # equal steps in log(step)
    assert len(steps) == 28
    assert checkpoint_schedule(1, 5, (4,)) == (0, 1, 2, 3, 4)  # rounding duplicates are kept once
    with pytest.raises(ValueError, match="must lie in 1..299"):
        checkpoint_schedule(300, 5, (300,))


def test_batch_sampler_is_reproducible_and_shifted():
    ids = np.arange(100, dtype=np.uint8)
    a = BatchSampler(ids, 8, 4, seed=3, device=torch.device("cpu"))
    b = BatchSampler(ids, 8, 4, seed=3, device=torch.device("cpu"))
    (xa, ya), (xb, yb) = a.sample(), b.sample()
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert torch.equal(xa[:, 1:], ya[:, :-1]) and xa.shape == (4, 8)


def test_training_learns_and_writes_checkpoints(tmp_path):
    cfg = TrainConfig(seed=1, batch_size=8, phases=(Phase(60, 3e-3), Phase(80, 3e-4)), eval_interval=20,
                      eval_iters=2, checkpoint_steps=(0, 40))
    ids = periodic_ids(2000)
    result = train(TINY, cfg, ids[:1800], ids[1800:], tmp_path / "work", progress=False)
    losses = [row["val_loss"] for row in result.history]
    assert [row["step"] for row in result.history] == [0, 20, 40, 60, 80]
    assert losses[-1] < 0.5 * losses[0]  # a periodic sequence is easy to learn
    assert sorted(p.name for p in (tmp_path / "work/checkpoints").iterdir()) == [
        "step_000000.safetensors", "step_000040.safetensors", "step_000080.safetensors"]
    assert result.metrics["steps"] == 80 and result.metrics["tokens_seen"] == 80 * 8 * 8


class Interrupted(Exception):
    pass


def train_interrupted_after(step, *args, **kwargs):
    """Train, but die (as a killed job would) right after the checkpoint of ``step`` is written."""
    import tinylens.train as train_module

    real = train_module.save_weights

    def save_then_die(path, model, *a, **k):
        real(path, model, *a, **k)
        if path.name == f"step_{step + 1:06d}.safetensors":  # the next checkpoint after the resume point
            raise Interrupted

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_module, "save_weights", save_then_die)
        with pytest.raises(Interrupted):
            train(*args, **kwargs)


RESUMABLE = TrainConfig(seed=2, batch_size=4, phases=(Phase(30, 1e-3), Phase(40, 1e-4)), eval_interval=10,
                        eval_iters=1, checkpoint_steps=(0, 10, 17, 18, 25, 33, 34))
RESUMABLE_MODEL = ModelConfig(vocab_size=8, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.1)


def test_an_interrupted_run_resumes_to_bit_identical_weights(tmp_path):
    ids = periodic_ids(500)
    whole = train(RESUMABLE_MODEL, RESUMABLE, ids[:400], ids[400:], tmp_path / "whole", progress=False)
    # die mid-phase 1 (after step 17's resume point) and again in phase 2, each time resuming
    train_interrupted_after(17, RESUMABLE_MODEL, RESUMABLE, ids[:400], ids[400:], tmp_path / "work", progress=False)
    assert torch.load(tmp_path / "work/resume.pt", weights_only=True)["step"] == 17
    train_interrupted_after(33, RESUMABLE_MODEL, RESUMABLE, ids[:400], ids[400:], tmp_path / "work", progress=False)
    resumed = train(RESUMABLE_MODEL, RESUMABLE, ids[:400], ids[400:], tmp_path / "work", progress=False)
    for name, tensor in whole.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    def without_time(history):
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in history]

    assert without_time(resumed.history) == without_time(whole.history)


SHORT = TrainConfig(seed=2, batch_size=4, phases=(Phase(10, 1e-3), Phase(12, 1e-4)), eval_interval=10,
                    eval_iters=1, checkpoint_steps=(0, 4, 5))


def _interrupted(tmp_path, ids):
    train_interrupted_after(4, RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], tmp_path / "work", progress=False)
    return tmp_path / "work"


@pytest.mark.parametrize("change, key", [
    (dict(phases=(Phase(10, 2e-3), Phase(12, 1e-4))), "train.phases"),  # learning rate
    (dict(phases=(Phase(9, 1e-3), Phase(12, 1e-4))), "train.phases"),  # schedule
    (dict(batch_size=8), "train.batch_size"),
    (dict(seed=3), "train.seed"),
    (dict(eval_iters=2), "train.eval_iters"),
])
def test_resume_with_other_training_settings_is_refused(tmp_path, change, key):
    ids = periodic_ids(500)
    work = _interrupted(tmp_path, ids)
    other = TrainConfig(**{**SHORT.__dict__, **change})
    with pytest.raises(ValueError, match="was written for other settings") as err:
        train(RESUMABLE_MODEL, other, ids[:400], ids[400:], work, progress=False)
    message = str(err.value)
    assert f"\n  {key}: the interrupted run had" in message and f"Delete {work}" in message
    assert message.count(": the interrupted run had") == 1  # only what changed is named


def test_resume_on_another_corpus_slice_or_model_is_refused(tmp_path):
    ids = periodic_ids(600)
    work = _interrupted(tmp_path, ids)
    with pytest.raises(ValueError, match=r"train_ids\.sha256: the interrupted run had"):
        train(RESUMABLE_MODEL, SHORT, ids[1:401], ids[400:], work, progress=False)
    with pytest.raises(ValueError, match=r"train_ids\.tokens: .* had 400, this run asks for 450"):
        train(RESUMABLE_MODEL, SHORT, ids[:450], ids[400:], work, progress=False)
    with pytest.raises(ValueError, match=r"resume state .* for other settings:\n  val_ids\.sha256: the interrupted run "
                                         r"had '[0-9a-f]{64}', this run asks for '[0-9a-f]{64}'\n"):
        train(RESUMABLE_MODEL, SHORT, ids[:400], ids[401:], work, progress=False)  # another validation slice
    with pytest.raises(ValueError, match=r"model\.n_embed: .* had 16, this run asks for 32"):
        train(ModelConfig(**{**RESUMABLE_MODEL.__dict__, "d_model": 32}), SHORT, ids[:400], ids[400:], work,
              progress=False)
    # nothing was touched: the original settings still resume
    train(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], work, progress=False)


def test_resume_on_another_device_type_is_refused():
    ids = periodic_ids(500)
    cpu = run_fingerprint(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], torch.device("cpu"))
    cuda = run_fingerprint(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], torch.device("cuda"))
    state = {"fingerprint": json.dumps(cpu, sort_keys=True)}
    check_resume_fingerprint(state, cpu, Path("w/resume.pt"))
    with pytest.raises(ValueError, match=r"for other settings:\n  cpu_threads: the interrupted run had 1, this run asks "
                                         r"for None\n  device: the interrupted run had 'cpu', this run asks "
                                         r"for 'cuda'\nResuming would produce a model that no configuration describes\. "
                                         r"Delete w to train from scratch"):
        check_resume_fingerprint(state, cuda, Path("w/resume.pt"))


def test_resume_state_without_a_fingerprint_is_refused(tmp_path):
    ids = periodic_ids(500)
    work = _interrupted(tmp_path, ids)
    state = torch.load(work / "resume.pt", weights_only=True)
    del state["fingerprint"]
    torch.save(state, work / "resume.pt")
    with pytest.raises(ValueError, match="records no settings fingerprint"):
        train(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], work, progress=False)


def test_summary_reports_each_seed_and_the_spread():
    metrics = [{"seed": s, "train_loss": v - 0.1, "val_loss": v, "steps": 10, "train_seconds": 1.0}
               for s, v in ((1337, 2.0), (88, 2.2))]
    summary = summarize_training(metrics, 1337)
    assert summary["val_loss_original"] == 2.0 and summary["models"]["88"]["val_loss"] == 2.2
    assert summary["val_loss_mean"] == pytest.approx(2.1)


def test_compiled_steps_train_the_same_model(tmp_path):
    """The compiled path (here dynamo's graph capture without code generation, the part shared with
    every backend) trains the same weights, and saves the model's own parameter names."""
    cfg = TrainConfig(seed=4, batch_size=4, phases=(Phase(12, 1e-3),), eval_interval=6, eval_iters=2,
                      checkpoint_steps=(6,))
    ids = periodic_ids(500)
    plain = train(TINY, cfg, ids[:400], ids[400:], tmp_path / "plain", progress=False)
    traced = train(TINY, cfg, ids[:400], ids[400:], tmp_path / "traced", progress=False, compile="eager")
    assert traced.metrics["compile"] == "eager" and plain.metrics["compile"] == "none"
    drop_time = lambda history: [{k: v for k, v in row.items() if k != "elapsed_s"} for row in history]  # noqa: E731
    assert drop_time(traced.history) == drop_time(plain.history)
    for name, tensor in plain.model.state_dict().items():
        torch.testing.assert_close(traced.model.state_dict()[name], tensor, rtol=0, atol=1e-6)
    from safetensors.torch import load_file
    saved = load_file(tmp_path / "traced/checkpoints/step_000006.safetensors")
    assert set(saved) == set(load_file(tmp_path / "plain/checkpoints/step_000006.safetensors"))
    with pytest.raises(ValueError, match="unknown compile mode"):
        train(TINY, cfg, ids[:400], ids[400:], tmp_path / "bad", progress=False, compile="fast")


def test_a_non_finite_loss_stops_training_between_evaluations(tmp_path):
    cfg = TrainConfig(seed=5, batch_size=4, phases=(Phase(40, 1e9),), eval_interval=40, eval_iters=1)
    with pytest.raises(FloatingPointError, match="training loss became .* at step [1-9]"):  # not the final estimate
        train(TINY, cfg, periodic_ids(400)[:300], periodic_ids(400)[300:], tmp_path / "w", progress=False,
              check_every=5)


# --- training as the original code trained (method.md §12): one global generator, its batch starts ---


def original_get_batch(data: torch.Tensor, block_size: int, batch_size: int):
    """The original code's ``get_batch``, verbatim but for the arguments."""
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + block_size + 1] for i in ix])
    return x, y


def original_training(model_cfg, seed, phases, eval_interval, eval_iters, batch_size, train_ids, val_ids):
    """The original notebooks' procedure: seed, build the model, a starting loss estimate, then per phase a
    fresh AdamW trained until its step, estimating every ``eval_interval`` steps after the step."""
    train_data, val_data = (torch.tensor(np.asarray(ids, dtype=np.int64)) for ids in (train_ids, val_ids))
    torch.manual_seed(seed)
    m = Transformer(model_cfg)

    @torch.no_grad()
    def estimate():
        m.eval()
        out = {}
        for split, data in (("train", train_data), ("val", val_data)):
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                _, loss = m(*original_get_batch(data, model_cfg.block_size, batch_size))
                losses[k] = loss.item()
            out[split] = losses.mean().item()
        m.train()
        return out

    history, iters = [estimate()], 0
    m.train()
    for until, lr in phases:
        optimizer = torch.optim.AdamW(m.parameters(), lr=lr)
        while iters < until:
            _, loss = m(*original_get_batch(train_data, model_cfg.block_size, batch_size))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            iters += 1
            if iters % eval_interval == 0:
                history.append(estimate())
    return m, history


ORIGINAL = TrainConfig(seed=5, batch_size=4, phases=(Phase(20, 3e-3), Phase(30, 3e-4)), eval_interval=10,
                       eval_iters=2, checkpoint_steps=(0, 13, 14), batch_sampling="original")


def test_original_batch_sampling_trains_exactly_as_the_original_code(tmp_path):
    """Same initialisation, batches, dropout masks and loss-estimate batches, in the same order, from the
    same generator: bit-identical weights (CPU, one thread) and the same loss estimates."""
    ids = (np.random.default_rng(0).integers(0, 8, 300)).astype(np.uint8)
    ours = train(RESUMABLE_MODEL, ORIGINAL, ids[:240], ids[240:], tmp_path / "work", progress=False)
    theirs, history = original_training(RESUMABLE_MODEL, 5, [(20, 3e-3), (30, 3e-4)], 10, 2, 4, ids[:240], ids[240:])
    for name, tensor in theirs.state_dict().items():
        assert torch.equal(tensor, ours.model.state_dict()[name]), name
    assert [row["val_loss"] for row in ours.history] == pytest.approx([h["val"] for h in history], abs=1e-6)
    # our own sampling gives another model from the same seed
    separate = train(RESUMABLE_MODEL, TrainConfig(**{**ORIGINAL.__dict__, "batch_sampling": "separate"}),
                     ids[:240], ids[240:], tmp_path / "separate", progress=False)
    assert not torch.equal(separate.model.state_dict()["lm_head.weight"], theirs.state_dict()["lm_head.weight"])


def test_original_batch_sampling_reaches_the_last_window_and_ours_does_not():
    ids = np.arange(10, dtype=np.uint8)  # block_size 8: windows of 9 tokens start at 0 or 1
    torch.manual_seed(0)
    original = BatchSampler(ids, 8, 64, seed=0, device=torch.device("cpu"), sampling="original")
    x, y = original.sample()
    assert set(x[:, 0].tolist()) == {0, 1} and torch.equal(x[:, 1:], y[:, :-1])
    torch.manual_seed(0)  # the same draw as the original get_batch, from the global generator
    ox, oy = original_get_batch(torch.arange(10), 8, 64)
    assert torch.equal(x, ox) and torch.equal(y, oy)
    separate = BatchSampler(ids, 8, 64, seed=0, device=torch.device("cpu"))
    assert set(separate.sample()[0][:, 0].tolist()) == {0}


def test_original_batch_sampling_resumes_to_bit_identical_weights(tmp_path):
    ids = periodic_ids(500)
    whole = train(RESUMABLE_MODEL, ORIGINAL, ids[:400], ids[400:], tmp_path / "whole", progress=False)
    train_interrupted_after(13, RESUMABLE_MODEL, ORIGINAL, ids[:400], ids[400:], tmp_path / "work", progress=False)
    torch.manual_seed(12345)  # whatever the process did meanwhile: the resume restores the global generator
    resumed = train(RESUMABLE_MODEL, ORIGINAL, ids[:400], ids[400:], tmp_path / "work", progress=False)
    for name, tensor in whole.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name


def test_precision_settings():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert autocast_dtype(cuda, "mixed") == torch.bfloat16
    assert autocast_dtype(cuda, "float32") is None and autocast_dtype(cpu, "mixed") is None
    with pytest.raises(ValueError, match="precision must be one of"):
        autocast_dtype(cuda, "fp16")
    with pytest.raises(ValueError, match="batch_sampling must be one of"):
        TrainConfig(**{**ORIGINAL.__dict__, "batch_sampling": "global"})
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    for precision, allowed in (("float32", False), ("mixed", True)):
        with matmul_precision(cuda, precision):
            assert torch.backends.cuda.matmul.allow_tf32 is allowed and torch.backends.cudnn.allow_tf32 is allowed
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_float32_training_records_no_autocast(tmp_path):
    ids = periodic_ids(300)
    cfg = TrainConfig(**{**SHORT.__dict__, "precision": "float32"})
    result = train(RESUMABLE_MODEL, cfg, ids[:240], ids[240:], tmp_path / "work", progress=False)
    assert result.metrics["autocast_dtype"] == "float32"


def test_resume_with_another_cpu_thread_count_is_refused(tmp_path):
    """Another thread count orders the sums differently (not bit-identical): refused, saying how to resume."""
    ids = periodic_ids(500)
    work = _interrupted(tmp_path, ids)  # under the autouse fixture's one thread
    torch.set_num_threads(2)
    with pytest.raises(ValueError, match=r"for other settings:\n  cpu_threads: the interrupted run had 1, this run "
                                         r"asks for 2\n.*rerun with the interrupted run's train.threads"):
        train(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], work, progress=False)
    torch.set_num_threads(1)
    train(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], work, progress=False)  # the same count resumes


def test_resume_with_another_compile_mode_is_refused():
    ids = periodic_ids(500)
    eager = run_fingerprint(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], torch.device("cuda"))
    compiled = run_fingerprint(RESUMABLE_MODEL, SHORT, ids[:400], ids[400:], torch.device("cuda"), "default")
    assert eager["cpu_threads"] is None  # a GPU's sums do not depend on the CPU's threads
    with pytest.raises(ValueError, match=r"\n  compile: the interrupted run had None, this run asks for 'default'\n"):
        check_resume_fingerprint({"fingerprint": json.dumps(eager, sort_keys=True)}, compiled, Path("w/resume.pt"))
