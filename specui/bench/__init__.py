"""The benchmark, `python -m specui.bench`: specui's engine against transformers' own generation.

    flags   the options, read and checked before torch loads
    cli     prompts and `main`
    run     the four methods, the timing loop, the forward costs and the summary
    report  the table printed at the end
"""
