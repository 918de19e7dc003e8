"""Train one variant model of the original seed, resuming from its work directory if a previous attempt was
interrupted (rule train_variant)."""

from pathlib import Path

from tinylens.config import train_config
from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.jobs import job
from tinylens.model_config import ModelConfig
from tinylens.train import publish, train

with job(snakemake) as j:
    params, out = j.params, j.output
    tokenizer = CharTokenizer.load(j.input.tokenizer)
    device = j.device
    compile_mode = params.compile if device.type == "cuda" and params.compile != "none" else None
    cfg = ModelConfig.from_dict({"vocab_size": tokenizer.vocab_size, **params.model}, source="rule train_variant's params")
    j.log.info("training the variant %s (seed %d) on %s", cfg, params.seed, device)
    result = train(cfg, train_config(params.train, params.seed), load_ids(j.input.train), load_ids(j.input.val),
                   work_dir=params.work_dir, device=device, compile=compile_mode)
    publish(result, params.work_dir, Path(out.weights).parent, j.input.tokenizer)
    j.log.info("variant: train loss %.4f, val loss %.4f; wrote %s", result.metrics["train_loss"],
               result.metrics["val_loss"], Path(out.weights).parent)
