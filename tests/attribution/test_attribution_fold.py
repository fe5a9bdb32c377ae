"""The first pass summed into ledger rows as the engine makes its shares (engine.ShareFold, what
a month's attribution runs) equals the list of shares summed afterwards (engine.fold_shares),
row for row, in the same order and to the last GPU-second decimal."""

from __future__ import annotations

from finops.attribution.engine import ShareFold, allocate_lines, allocate_lines_into, fold_shares
from tests.strategies import JobSpec, LineSpec, engine_examples, engine_inputs


def _state(fold: ShareFold) -> list[object]:
    # Lists of items, not dicts: the order rows were made in is compared too.
    return [
        list(fold.ledger.items()),
        [(k, list(v.items())) for k, v in fold.spread_weights.items()],
        list(fold.job_team.items()),
        list(fold.pooled.items()),
        [(k, list(v.items())) for k, v in fold.pending.items()],
        fold.shared,
    ]


@engine_examples
def test_the_engine_folds_its_shares_as_the_list_sums(
    job_specs: list[JobSpec], line_specs: list[LineSpec], spread: dict[str, str]
) -> None:
    lines, job_inputs = engine_inputs(job_specs, line_specs, spread)
    folded = ShareFold(lines)
    allocate_lines_into(lines, job_inputs, folded)
    reference = fold_shares(lines, allocate_lines(lines, job_inputs))
    assert _state(folded) == _state(reference)
