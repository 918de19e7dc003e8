"""Figure: token subspaces, their sigma ratios, single-direction and two-token checks (rule plot_token_subspaces)."""

from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.supporting.plots import plot_token_subspaces
from tinylens.supporting.schemas import load_subspace_tokens, mixtures_schema
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    vocab = CharTokenizer.load(snakemake.input.tokenizer).vocab
    stages = {}
    for path in snakemake.input.tokens:
        cols = load_subspace_tokens(path)
        stages[int(cols["stage"][0])] = cols
    mixtures = [row for path in snakemake.input.mixtures
                for row in read_table(path, mixtures_schema(len(vocab))).to_pylist()]
    plot_token_subspaces(stages, mixtures, vocab, snakemake.params.n_layer, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
