"""The keys every workbench screen shares: `?` shows this screen's keys, `q` closes it (quits from the main one).

`KeysScreen` is the base of every full screen: its help is built from the
screen's own bindings (and the app's), never from a hand-kept table; `q` and
`?` step aside while a text box has focus, so they are typed there instead.
"""

from __future__ import annotations

from typing import Sequence

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input

from ..workbench import Workbench
from .help import HelpScreen

HELP = Binding("question_mark", "show_keys", "Help", key_display="?", tooltip="the keys of this screen")


def back_keys(q_shown: bool = True) -> list[Binding]:
    """Esc and q both close a pushed screen; the footer shows one of them (q, unless a text box usually has focus)."""
    return [Binding("escape", "app.pop_screen", "Back", show=not q_shown, tooltip="back to the previous screen"),
            Binding("q", "close", "Back", show=q_shown, tooltip="close this screen (in a text box, q is typed)")]


class KeysScreen(Screen):
    HELP_TITLE = "this screen"
    # the actions that belong to a focused text box's typing when their key is a character
    TYPED = frozenset({"close", "show_keys"})

    @property
    def kx(self) -> Workbench:
        return self.app  # type: ignore[return-value]  # KxApp, seen through the face screens may use

    def help_sections(self) -> list[tuple[str, Sequence[Binding]]]:
        return [(self.HELP_TITLE, [b for b in self.BINDINGS if isinstance(b, Binding)]),
                ("anywhere", list(self.kx.help_bindings()))]

    def action_show_keys(self) -> None:
        self.app.push_screen(HelpScreen(self.help_sections()))

    def action_close(self) -> None:
        self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.TYPED and isinstance(self.focused, Input):
            return False
        return True
