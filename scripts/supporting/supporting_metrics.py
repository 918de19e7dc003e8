"""The family's metrics JSON, with the paper's numbers beside ours (rule supporting_metrics)."""


from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.supporting.schemas import (
    CONTRIBUTIONS_SCHEMA,
    ENDPOINT_SCHEMA,
    NOISE_SCHEMA,
    SCALING_SCHEMA,
    ablation_schema,
    load_subspace_tokens,
)
from tinylens.supporting.summary import family_metrics, rank_fit, split_by_mode, summarize_stage
from tinylens.tables import read_columns

with job(snakemake) as j:
    inp, p = j.input, j.params
    per_mode = lambda path, schema: split_by_mode(read_columns(path, schema), p.modes)  # noqa: E731
    tokens = {stage: load_subspace_tokens(path) for stage, path in zip(p.stages, inp.subspaces, strict=True)}
    result = family_metrics(
        ablation={seed: read_columns(path, ablation_schema(p.n_blocks))
                  for seed, path in zip(p.seeds, inp.ablation, strict=True)},
        scaling=per_mode(inp.scaling, SCALING_SCHEMA),
        noise=per_mode(inp.noise, NOISE_SCHEMA),
        endpoint=per_mode(inp.endpoint, ENDPOINT_SCHEMA),
        stages={stage: summarize_stage(t, p.target_nll, p.samples) for stage, t in tokens.items()},
        criterion={m: j.read_json(path) for m, path in zip(p.modes, inp.criterion, strict=True)},
        n_blocks=p.n_blocks,
        contributions=per_mode(inp.contributions, CONTRIBUTIONS_SCHEMA),
        model={k: getattr(load_config(inp.config), k) for k in ("vocab_size", "block_size", "d_model", "n_layer")},
        fits={stage: rank_fit(t["singular"]) for stage, t in tokens.items()},
        robustness=j.read_json(inp.robustness),
    )
    j.write_json(j.output.metrics, result)
    j.log.info("headline %s -> %s", result["headline"], j.output.metrics)
