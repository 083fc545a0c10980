"""Unit tests of the Atlas's colour scales and legends (pure numpy, no services)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from web_atlas.colors import (
    DIVERGING,
    LIGHT_SEQUENTIAL,
    NO_DATA_RGBA,
    color_scale,
    format_value,
    hex_to_rgb,
    legend_html,
    linear_scale,
    quantile_scale,
)

BW = ("#000000", "#ffffff")


def test_hex_and_number_formatting() -> None:
    assert hex_to_rgb("#b10026") == (177, 0, 38) and hex_to_rgb("2166AC") == (33, 102, 172)
    with pytest.raises(ValueError, match="'#fff' is not a #rrggbb colour"):
        hex_to_rgb("#fff")
    assert format_value(1234) == "1,234" and format_value(2.875) == "2.88" and format_value(-3.0) == "-3"
    assert format_value(123456.7) == "123,457" and format_value(0.0001234) == "1.23e-04"
    assert format_value(math.nan) == "–"


def test_linear_scale_interpolates_between_min_and_max() -> None:
    scale = linear_scale([0.0, 5.0, 10.0, math.nan], BW, alpha=200)
    assert scale.colors.tolist() == [
        [0, 0, 0, 200],
        [128, 128, 128, 200],
        [255, 255, 255, 200],
        list(NO_DATA_RGBA),
    ]
    assert [e.label for e in scale.entries] == ["0", "2.5", "5", "7.5", "10"]
    assert scale.entries[0].color == (0, 0, 0) and scale.entries[-1].color == (255, 255, 255)
    assert scale.gradient and scale.no_data and scale.domain == (0.0, 10.0)
    # One distinct value: every cell gets the top colour, one legend entry.
    flat = linear_scale([4.0, 4.0], BW)
    assert flat.colors[:, :3].tolist() == [[255, 255, 255]] * 2 and [e.label for e in flat.entries] == ["4"]


def test_quantile_scale_gives_each_class_a_palette_colour() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    scale = quantile_scale(values, LIGHT_SEQUENTIAL, alpha=255)
    assert [tuple(c[:3]) for c in scale.colors.tolist()] == [hex_to_rgb(c) for c in LIGHT_SEQUENTIAL]
    assert (
        len(scale.entries) == 7
        and scale.entries[0].label == "1 – 1.86"
        and scale.entries[-1].label == "6.14 – 7"
    )
    assert not scale.gradient and not scale.no_data
    # Many equal values collapse classes; the classes left spread over the whole palette.
    skewed = quantile_scale([1, 1, 1, 1, 1, 1, 9], LIGHT_SEQUENTIAL)
    assert [e.label for e in skewed.entries] == ["1 – 2.14", "2.14 – 9"]
    assert skewed.colors[0, :3].tolist() == list(hex_to_rgb(LIGHT_SEQUENTIAL[0]))
    assert skewed.colors[6, :3].tolist() == list(hex_to_rgb(LIGHT_SEQUENTIAL[-1]))
    same = quantile_scale([3, 3, 3], LIGHT_SEQUENTIAL)
    assert [e.label for e in same.entries] == ["3"]
    assert same.colors[:, :3].tolist() == [list(hex_to_rgb(LIGHT_SEQUENTIAL[-1]))] * 3
    two = quantile_scale([1, 1, 1, 2, 3, 4, 9, 9], LIGHT_SEQUENTIAL)
    assert two.colors[0, :3].tolist() == list(hex_to_rgb(LIGHT_SEQUENTIAL[0]))
    assert two.colors[-1, :3].tolist() == list(hex_to_rgb(LIGHT_SEQUENTIAL[-1]))


def test_diverging_scales_are_centred_on_zero() -> None:
    lin = linear_scale([-10.0, 0.0, 5.0], DIVERGING, diverging=True)
    assert lin.domain == (-10.0, 10.0)
    assert lin.colors[0, :3].tolist() == list(hex_to_rgb(DIVERGING[0]))
    assert lin.colors[1, :3].tolist() == list(hex_to_rgb(DIVERGING[3]))  # no change: the middle colour
    mid = (np.array(hex_to_rgb(DIVERGING[4])) + np.array(hex_to_rgb(DIVERGING[5]))) / 2
    assert lin.colors[2, :3].tolist() == np.rint(mid).astype(int).tolist()
    assert [e.label for e in lin.entries] == ["-10", "-5", "0", "+5", "+10"]

    q = quantile_scale([-4.0, -1.0, 0.0, 2.0, 8.0], DIVERGING, diverging=True)
    rgb = [tuple(c[:3]) for c in q.colors.tolist()]
    assert rgb == [
        hex_to_rgb(DIVERGING[0]),
        hex_to_rgb(DIVERGING[2]),
        hex_to_rgb(DIVERGING[3]),
        hex_to_rgb(DIVERGING[4]),
        hex_to_rgb(DIVERGING[6]),
    ]
    labels = [e.label for e in q.entries]
    assert labels[0] == "-4 – -3" and "0" in labels and labels[-1] == "+6 – +8"
    assert q.domain == (-8.0, 8.0)


def test_color_scale_dispatch_and_legend_html() -> None:
    assert color_scale([1, 2], "linear", BW).kind == "linear"
    assert color_scale([1, 2], "quantile", BW).kind == "quantile"
    with pytest.raises(ValueError, match="'log' is not one of quantile, linear"):
        color_scale([1, 2], "log", BW)  # type: ignore[arg-type]
    html = legend_html(linear_scale([0, 10, math.nan], BW), "<bookings>")
    assert (
        "&lt;bookings&gt;" in html and "linear-gradient(to right, rgb(0, 0, 0)" in html and "no data" in html
    )
    html = legend_html(quantile_scale([1, 2, 3], BW), "x")
    assert html.count("width:14px") == 2 and "color:inherit" in html


def test_integer_counts_get_whole_non_overlapping_classes() -> None:
    counts = [20, 21, 23, 28, 34, 35, 38, 44, 50, 61, 77, 90, 120]
    assert [e.label for e in quantile_scale(counts, LIGHT_SEQUENTIAL).entries][:2] == [
        "20 – 22.4",
        "22.4 – 30.6",
    ]
    scale = quantile_scale(counts, LIGHT_SEQUENTIAL, integer=True)
    assert [e.label for e in scale.entries] == [
        "20 – 22",
        "23 – 30",
        "31 – 35",
        "36 – 43",
        "44 – 56",
        "57 – 80",
        "81 – 120",
    ]
    # each count takes the colour of the class its label names
    colour = {e.label: e.color for e in scale.entries}
    assert tuple(scale.colors[2, :3]) == colour["23 – 30"] and tuple(scale.colors[1, :3]) == colour["20 – 22"]
    assert tuple(scale.colors[5, :3]) == colour["31 – 35"] and tuple(scale.colors[6, :3]) == colour["36 – 43"]
    assert [e.label for e in quantile_scale(range(1, 8), LIGHT_SEQUENTIAL, integer=True).entries] == [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6 – 7",
    ]
    changes = quantile_scale([-9, -4, -1, 0, 2, 3, 8, 13], DIVERGING, diverging=True, integer=True)
    assert [e.label for e in changes.entries] == [
        "-9 – -6",
        "-5 – -3",
        "-2 – -1",
        "0",
        "+2",
        "+3 – +7",
        "+8 – +13",
    ]
    assert [e.label for e in linear_scale([3, 10, 20], integer=True).entries] == ["3", "7", "12", "16", "20"]
    # a mean of counts is no count: it keeps its decimals
    assert quantile_scale([1.5, 2, 3], LIGHT_SEQUENTIAL, integer=True).entries[0].label == "1.5 – 1.64"
