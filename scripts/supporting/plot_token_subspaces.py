"""Figure: token subspaces, their sigma ratios, single-direction and two-token checks (rule plot_token_subspaces)."""

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.plots import make_token_subspaces
from tinylens.supporting.schemas import load_subspace_tokens, mixtures_schema
from tinylens.tables import read_table

with job(snakemake) as j:
    vocab = CharTokenizer.load(j.input.tokenizer).vocab
    stages = {}
    for path in j.input.tokens:
        cols = load_subspace_tokens(path)
        stages[int(cols["stage"][0])] = cols
    mixtures = [row for path in j.input.mixtures
                for row in read_table(path, mixtures_schema(len(vocab))).to_pylist()]
    j.save_figure(make_token_subspaces(stages, mixtures, vocab, j.params.n_layer))
