"""A recommendation's evidence and assumptions read as words on the pages (issue 27): keys such
as `mean_gpus_in_use` were shown as "Meangpusinuse", booleans as "True"."""

from __future__ import annotations

from finops.web.templatetags.finops_tags import key_words, value_words


def test_keys_read_as_words_and_booleans_as_yes_or_no() -> None:
    assert key_words("mean_gpus_in_use") == "Mean GPUs in use"
    assert key_words("demand_exceeds_pool") == "Demand exceeds pool"
    assert key_words("window_days") == "Window days"
    assert value_words(True) == "yes"
    assert value_words(False) == "no"
    assert value_words(None) == "-"
    assert value_words("66.2") == "66.2"
    assert value_words(0) == 0
