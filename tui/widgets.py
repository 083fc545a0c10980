"""Textual widgets the console draws differently from Textual's own: a sparkline that lies flat when
there is nothing to show."""

from __future__ import annotations

from textual.app import RenderResult
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Sparkline

#: The mark of a picked item and of an item left out, in place of Textual's ``X`` for both.
PICKED, NOT_PICKED = "✓", " "


class FlatSparkline(Sparkline):
    """A sparkline that draws a series of zeros (or one zero) as a flat line on the floor.

    Textual scales a series between its minimum and maximum, and draws a single sample as full-height
    blocks, so a dagger reading nothing looked like one at its peak."""

    def render(self) -> RenderResult:
        """Return the flat floor line for an all-zero series, else Textual's sparkline."""
        data = self.data or []
        if data and not any(data):
            _, base = self.background_colors
            colour = base + (self.get_component_styles("sparkline--min-color").color
                             if self.min_color is None else self.min_color)
            return SparklineRenderable([], width=self.size.width, height=self.size.height,
                                       min_color=colour.rich_color)
        return super().render()

