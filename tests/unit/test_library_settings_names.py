"""A setting's name misspelt, in `DecodeSettings(...)` or a run's keywords, is one line that names the one meant."""

import pickle

import pytest

from specui.settings import DecodeSettings, SettingsError, settings_from

NAMES = ("num_draft_tokens, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed, drafter, adaptive, "
         "ignore_eos, speculative, tree_width, tree_nodes, draft_confidence")


def test_a_misspelt_setting_of_decode_settings_names_the_one_meant():
    """It was Python's TypeError, 'DecodeSettings.__init__() got an unexpected keyword argument', naming none."""
    with pytest.raises(SettingsError, match=rf"^no setting named 'temprature'; the settings are {NAMES}; did you mean "
                                            r"temperature\?$"):
        DecodeSettings(temprature=0.7)


def test_a_run_s_misspelt_keyword_names_the_one_meant_and_transformers_words_theirs():
    with pytest.raises(SettingsError, match=r"; did you mean max_new_tokens\?$"):
        settings_from(None, {"max_new_token": 8})
    with pytest.raises(SettingsError, match=r"; for 'do_sample' use temperature \(0: greedy; above 0: sampled\)$"):
        settings_from(None, {"do_sample": True})
    with pytest.raises(SettingsError, match=rf"^no setting named 'colour'; the settings are {NAMES}$"):
        settings_from(None, {"colour": 1})


def test_settings_still_copy_and_pickle():
    settings = DecodeSettings(temperature=0.5, seed=3)
    assert pickle.loads(pickle.dumps(settings)) == settings and settings.but(top_k=2).top_k == 2


def test_the_modules_docstring_counts_the_settings_it_holds():
    """settings.py's docstring says how many values a DecodeSettings holds: it said twelve when it held fourteen."""
    import re
    from dataclasses import fields

    import specui.settings

    said = re.search(r"these (\w+) values", specui.settings.__doc__).group(1)
    words = ("twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen")
    assert said in words and words.index(said) + 12 == len(fields(DecodeSettings)), (
        f"settings.py's docstring says {said} values; DecodeSettings has {len(fields(DecodeSettings))}")
