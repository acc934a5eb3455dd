"""specui's Gradio showcase: pure renderers, chart builders and a session driver, wired by `blocks`.

`render`, `charts`, `stats`, `text` and `session` are plain Python (plotly at most) and testable
without a server; only `blocks` imports gradio. Nothing outside this package imports gradio.
"""
