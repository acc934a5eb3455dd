"""The symbols the page draws beside words are in the fonts this machine has: "⏸ Pause" on the Teach tab's play
button and the tree chart's carriage return mark "␍" showed empty boxes in Debian's Chromium (its fonts, DejaVu and
Liberation, have neither U+23F8 nor U+240D). Fontconfig answers which font has a character; no model, no browser."""

from __future__ import annotations

from specui.ui import teaching, tree_chart
from tests.app.test_stop_mark import without_a_font


def test_the_teach_play_buttons_labels_are_drawn_by_the_fonts_here():
    class Controls:
        play, speed = "play", "speed"

    class UI:
        controls, timer, run = Controls, "timer", "run"

    pause = teaching.toggle(UI, {"play": "▶ Play", "run": object(), "speed": 1.0})["play"]["value"]
    play = teaching.stopped(UI)["play"]["value"]
    assert "Pause" in pause and "Play" in play
    assert without_a_font(pause + play) == []


def test_the_tree_charts_whitespace_marks_are_drawn_by_the_fonts_here():
    shown = tree_chart.plain_label(" \n\r\t", limit=None) + tree_chart.plain_label("")
    assert len(shown) == 5 and without_a_font(shown) == []
