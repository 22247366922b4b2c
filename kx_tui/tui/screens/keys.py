"""The keys every workbench screen shares: `?` shows this screen's keys, `q` closes it (quits from the main one).

`KeysScreen` is the base of every full screen: its help is built from the
screen's own bindings (and the app's), never from a hand-kept table. While a
text box has focus Textual gives it the printable keys (`q`, `?` are typed);
F1 still shows the keys there, and the footer says so.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, OptionList

from ..workbench import Workbench
from .help import HelpScreen

HELP = Binding("question_mark", "show_keys", "Help", key_display="?", tooltip="the keys of this screen")
HELP_F1 = Binding("f1", "show_keys", "Help", show=False, tooltip="the keys of this screen (in a text box too)")


def back_keys(q_shown: bool = True) -> list[Binding]:
    """Esc and q both close a pushed screen; the footer shows one of them (q, unless a text box usually has focus)."""
    return [Binding("escape", "app.pop_screen", "Back", show=not q_shown, tooltip="back to the previous screen"),
            Binding("q", "close", "Back", show=q_shown, tooltip="close this screen (in a text box, q is typed)")]


def key_bindings(bindings: Iterable[BindingType]) -> list[Binding]:
    """The `Binding`s of a BINDINGS list, which Textual types as Bindings or (key, action[, description]) tuples;
    ours are all Bindings (they carry the tooltips the help shows), and this is where the type says so."""
    return [b for b in bindings if isinstance(b, Binding)]


class KeysScreen(Screen):
    BINDINGS = [HELP_F1]   # every screen's; Textual merges it with the subclass's own
    HELP_TITLE = "this screen"

    def on_mount(self) -> None:
        # Textual calls this as well as a subclass's own on_mount (its handlers run for each class of the MRO)
        self._focused_size: tuple[Widget | None, Size] = (None, Size(0, 0))
        self.screen_layout_refresh_signal.subscribe(self, self._focused_row_in_view)

    def _focused_row_in_view(self, _screen: Screen) -> None:
        """When the focused table or list changes height (a toast takes rows below it, the terminal shrinks), its
        cursor row scrolls back into view: the row a person is on is never left below the fold."""
        focused = self.focused
        size = focused.size if focused is not None else Size(0, 0)
        if (focused, size) == self._focused_size:
            return
        was, self._focused_size = self._focused_size, (focused, size)
        if was[0] is not focused or size.height >= was[1].height:
            return
        if isinstance(focused, DataTable) and focused.row_count:
            focused.move_cursor(row=focused.cursor_row, scroll=True, animate=False)
        elif isinstance(focused, OptionList):
            focused.scroll_to_highlight()

    @property
    def kx(self) -> Workbench:
        return self.app  # type: ignore[return-value]  # KxApp, seen through the face screens may use

    def help_sections(self) -> list[tuple[str, Sequence[Binding]]]:
        return [(self.HELP_TITLE, key_bindings(self.BINDINGS)),
                ("anywhere", [HELP_F1, *self.kx.help_bindings()])]

    def action_show_keys(self) -> None:
        self.app.push_screen(HelpScreen(self.help_sections()))

    def action_close(self) -> None:
        self.app.pop_screen()
