"""The chat model's prompts: held-out prompts share no subject with any training prompt (of either set),
so acceptance measured on them is not flattered by memorised answers."""

from __future__ import annotations

from specui import chat_prompts


def test_no_held_out_subject_in_any_training_prompt():
    training = [p.lower() for make in chat_prompts.PROMPT_SETS.values() for p in make(seed=0)]
    assert len(chat_prompts.HELD_OUT) == len(chat_prompts.HELD_OUT_SUBJECTS) == 16
    for prompt, subject in zip(chat_prompts.HELD_OUT_CHAT + chat_prompts.HELD_OUT_CODE, chat_prompts.HELD_OUT_SUBJECTS):
        assert subject.lower() in prompt.lower()  # the subject names what the prompt is about
        assert not any(subject.lower() in p for p in training), subject
    assert not set(chat_prompts.HELD_OUT) & {p for make in chat_prompts.PROMPT_SETS.values() for p in make()}


def test_prompt_sets_are_distinct_and_stable():
    main, extra = chat_prompts.training_prompts(seed=1234), chat_prompts.extra_prompts(seed=1234)
    everyday = chat_prompts.everyday_prompts(seed=1234)
    assert len(main) == 2480 and len(extra) == 368 and not set(main) & set(extra)
    assert len(everyday) == len(set(everyday)) == 450 and not set(everyday) & set(main + extra)
    assert main == chat_prompts.training_prompts(seed=1234)  # answers files are indexed by position: the order is fixed
    assert everyday == chat_prompts.everyday_prompts(seed=1234)
    fresh = chat_prompts.fresh_prompts(seed=1234)
    assert len(fresh) == len(set(fresh)) == 294 and not set(fresh) & set(main + extra + everyday)
    assert fresh == chat_prompts.fresh_prompts(seed=1234)
    wide = chat_prompts.wide_prompts(seed=1234)
    assert len(wide) == len(set(wide)) == 466 and not set(wide) & set(main + extra + everyday + fresh)
    assert wide == chat_prompts.wide_prompts(seed=1234)


def test_library_prompts_ask_about_the_running_standard_library():
    library = chat_prompts.library_prompts(seed=1234)
    assert library == chat_prompts.library_prompts(seed=1234) and len(library) == len(set(library)) > 1000
    assert not set(library) & set(chat_prompts.training_prompts() + chat_prompts.extra_prompts())
    assert "What is the Python json module used for?" in library
    assert any("itertools.combinations" in p for p in library)
    assert not any(word in p.lower() for p in library for word in chat_prompts.LIBRARY_AVOID)
