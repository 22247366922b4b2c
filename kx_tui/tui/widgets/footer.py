"""A footer that fits its terminal: the keys of least importance go first, Help and Quit (or Back) never.

Textual's Footer lays every shown binding in one row and lets the row run off
the right edge, so on an 80-column terminal the last keys (Help, Quit) were
the ones hidden. `KeysFooter` measures the keys against its width and drops
the lowest-priority ones until the rest fit; the command palette's key shows
only when there is room to spare (Ctrl+P works regardless, and `?` lists it).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

ALWAYS = frozenset({"show_keys", "app.quit", "quit", "close", "app.pop_screen"})   # Help, Quit, Back
# While a text box has focus, Textual hands it the printable keys (`?`, `q`): the footer then shows the
# same action's other key (F1, Ctrl+Q), so Help and Quit are always there.
_FALLBACKS = (("show_keys",), ("app.quit", "quit"))


def key_width(key_display: str, description: str) -> int:
    """Cells a FooterKey takes: " key " then "description "."""
    return len(key_display) + 2 + len(description) + 1


def fit(items: Sequence[tuple[Binding, str]], width: int, priority: Sequence[str]) -> list[tuple[Binding, str]]:
    """The (binding, key display) items that fit `width`, in their own order, dropping the least important first.

    Importance: Help/Quit/Back always stay; then the actions in `priority`, most
    important first; then the rest, earlier bindings before later ones.
    """
    def rank(index: int) -> tuple[int, int]:
        action = items[index][0].action
        if action in ALWAYS:
            return (-1, index)
        if action in priority:
            return (0, priority.index(action))
        return (1, index)

    kept = list(range(len(items)))
    used = sum(key_width(display, binding.description) for binding, display in items)
    for index in sorted(kept, key=rank, reverse=True):
        if used <= width or rank(index)[0] < 0:
            break
        kept.remove(index)
        used -= key_width(items[index][1], items[index][0].description)
    return [items[i] for i in kept]


class KeysFooter(Footer):
    def __init__(self, priority: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.priority = tuple(priority)
        self._laid_out_for = 0

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        by_action: dict[str, tuple[Binding, bool, str]] = {}
        hidden: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in by_action:
                by_action[binding.action] = (binding, enabled, tooltip)
            elif not binding.show and binding.description:
                hidden.setdefault(binding.action, (binding, enabled, tooltip))
        backs = {"close", "app.pop_screen"} & set(by_action)
        for actions in _FALLBACKS:
            if backs and actions != ("show_keys",):
                continue   # a pushed screen shows Back instead of Quit
            if not any(a in by_action for a in actions):
                for action in actions:
                    if action in hidden:
                        by_action[action] = hidden[action]
                        break
        width = self.size.width or self.app.size.width
        self._laid_out_for = width
        items = [(binding, self.app.get_key_display(binding)) for binding, _e, _t in by_action.values()]
        shown = fit(items, width, self.priority)
        used = sum(key_width(display, binding.description) for binding, display in shown)
        for binding, display in shown:
            _b, enabled, tooltip = by_action[binding.action]
            yield FooterKey(binding.key, display, binding.description, binding.action, disabled=not enabled,
                            tooltip=tooltip).data_bind(compact=Footer.compact)
        palette = active.get(self.app.COMMAND_PALETTE_BINDING) if self.app.ENABLE_COMMAND_PALETTE else None
        if self.show_command_palette and palette is not None:
            _node, binding, enabled, tooltip = palette
            display = self.app.get_key_display(binding)
            if used + key_width(display, binding.description) + 1 <= width:   # + its border
                yield FooterKey(binding.key, display, binding.description, binding.action,
                                classes="-command-palette", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._laid_out_for:
            self.call_after_refresh(self.recompose)
