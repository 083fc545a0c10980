"""Textual widgets the console draws differently from Textual's own: a sparkline that lies flat when
there is nothing to show, and a selection list whose picked items carry a mark, not only a colour."""

from __future__ import annotations

from typing import Generic

from rich.segment import Segment
from textual.app import RenderResult
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.strip import Strip
from textual.widgets import SelectionList, Sparkline
from textual.widgets._selection_list import SelectionType
from textual.widgets._toggle_button import ToggleButton
from textual.widgets.option_list import OptionDoesNotExist

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
            colour = base + (
                self.get_component_styles("sparkline--min-color").color
                if self.min_color is None
                else self.min_color
            )
            return SparklineRenderable(
                [], width=self.size.width, height=self.size.height, min_color=colour.rich_color
            )
        return super().render()


class MarkedSelectionList(SelectionList[SelectionType], Generic[SelectionType]):
    """A selection list whose toggle shows ``✓`` for a picked item and a blank for one left out (Textual
    shows the same ``X`` for both, told apart by colour alone)."""

    def render_line(self, y: int) -> Strip:
        """Return line ``y`` with the toggle's inner character set to the option's mark."""
        strip = super().render_line(y)
        segments = list(strip)
        _, scroll_y = self.scroll_offset
        if len(segments) < 3 or segments[1].text != ToggleButton.BUTTON_INNER:
            return strip
        try:
            option = self.get_option_at_index(scroll_y + y)
        except OptionDoesNotExist:  # no option on this line: Textual's line as it is
            return strip
        mark = PICKED if option.value in self.selected else NOT_PICKED
        segments[1] = Segment(mark, segments[1].style, segments[1].control)
        return Strip(segments, strip.cell_length)
