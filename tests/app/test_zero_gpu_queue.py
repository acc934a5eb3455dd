"""A ZeroGPU Space's queue: gradio caps it at one waiting event there unless the app gives a size."""

import pytest

from tests.helpers import ui_config


@pytest.mark.slow  # builds the whole app
@pytest.mark.parametrize("zero", [True, False])
def test_a_zero_gpu_space_queues_more_than_one_waiting_event(zero, monkeypatch):
    """With SPACES_ZERO_GPU=true, gradio's `queue()` without a max_size gives 1: while one visitor decoded and a
    second waited, every other visitor's Send, Decode or Next round was refused ("Queue is full. Max size is 1").
    The app gives its own size there; elsewhere the queue stays unbounded, as before."""
    import gradio as gr

    from specui.ui.blocks import ZERO_GPU_QUEUE_SIZE, build

    if zero:
        monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    else:
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    with gr.Blocks() as bare:
        gr.Markdown("")
    assert bare.queue()._queue.max_size == (1 if zero else None)  # gradio's own default, the reason for this
    demo = build(ui_config(), preload=False)
    assert demo._queue.max_size == (ZERO_GPU_QUEUE_SIZE if zero else None) and ZERO_GPU_QUEUE_SIZE > 1
