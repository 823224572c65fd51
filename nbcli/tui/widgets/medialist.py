"""The media list: one node per media tag, its records by step below it.

Labels are literal text (tags and captions are logged data). Moving the cursor posts
:class:`MediaList.Highlighted` with the key of the record, or ``(tag,)`` on a tag.
A tag with many records is filled when it is opened.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ..media import MediaRecord
from ..text import lit

EXPAND_ALL = 200  # with at most this many records every tag starts open


def record_label(r: MediaRecord) -> Text:
    """``step N`` and what kind of record it is (size, caption, duration)."""
    t = Text(f"step {r.step}", no_wrap=True, end="")
    if r.kind == "image":
        if r.width and r.height:
            t.append(f"  {r.width}×{r.height}", style="dim")
        if r.caption:
            t.append("  ")
            t.append_text(lit(r.caption, "italic dim"))
    elif r.kind == "audio":
        t.append(f"  audio {r.sample_rate or '?'} Hz", style="dim")
    elif r.kind != "histogram":
        t.append_text(lit(f"  {r.kind}", "dim"))
    return t


def tag_label(tag: str, recs: list[MediaRecord], omitted: int) -> Text:
    """The tag (literal), its kind and how many records it has."""
    t = lit(tag, "bold")
    kinds = sorted({r.kind or "?" for r in recs})
    t.append(f"  {'/'.join(kinds)} ×{len(recs) + omitted}", style="dim")
    if omitted:
        t.append(f" (newest {len(recs)})", style="dim")
    return t


class MediaList(Tree):
    """Tree of media tags and records; ``data`` of a node is ``(tag,)`` for a tag and
    the record's key for a record."""

    class Highlighted(Message):
        """The cursor is on ``key``: a record key, or ``(tag,)``; None: nothing."""

        def __init__(self, key: tuple | None) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("media", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._keys: list[tuple] = []
        self._by_tag: dict[str, list[MediaRecord]] = {}
        self._by_key: dict[tuple, TreeNode] = {}

    @property
    def cursor_key(self) -> tuple | None:
        """The key of the node under the cursor: a record key, ``(tag,)``, or None."""
        node = self.cursor_node
        return node.data if node is not None else None

    def set_records(self, records: list[MediaRecord], omitted: dict[str, int] | None = None) -> None:
        """Show ``records`` (by tag, then as logged); keeps the cursor and the open
        tags when the records only grew."""
        keys = [r.key for r in records]
        if keys == self._keys and self.root.children:
            return
        omitted = omitted or {}
        cursor = self.cursor_key
        was_open = {n.data[0] for n in self.root.children if n.is_expanded and n.data is not None}
        first = not self._keys
        self._keys = keys
        self._by_tag = {}
        for r in records:
            self._by_tag.setdefault(r.tag, []).append(r)
        self.clear()
        self._by_key = {}
        open_all = len(records) <= EXPAND_ALL
        for tag, recs in self._by_tag.items():
            node = self.root.add(tag_label(tag, recs, omitted.get(tag, 0)), data=(tag,))
            self._by_key[(tag,)] = node
            if open_all or tag in was_open or (cursor is not None and cursor[0] == tag and len(cursor) > 1):
                self._fill(node)
                node.expand()
            else:
                node.allow_expand = True
        self.root.expand()
        target = self._by_key.get(cursor) if cursor is not None else None
        if target is None and cursor is not None and len(cursor) > 1:
            target = self._by_key.get((cursor[0],))  # the record went away: its tag
        if target is not None:
            self._move(target)
        elif records and (first or self.cursor_line < 0):
            self.cursor_line = 0

    def select(self, tag: str, step: int | None = None) -> bool:
        """Move the cursor to ``tag``'s newest record at ``step`` (None: to the tag).
        Returns False when there is no such record."""
        node = self._by_key.get((tag,))
        if node is None:
            return False
        if step is not None:
            self._fill(node)
            node.expand()
            leaf = next((self._by_key[r.key] for r in reversed(self._by_tag[tag]) if r.step == step), None)
            if leaf is None:
                return False
            node = leaf
        self._move(node)
        return True

    def _move(self, node: TreeNode) -> None:
        _ = self.last_line  # lays out the lines now: a node just added has no line before
        self.move_cursor(node)

    def _fill(self, node: TreeNode) -> None:
        if node.data is None or node.children:  # the root, or filled already
            return
        for r in self._by_tag.get(node.data[0], []):
            self._by_key[r.key] = node.add_leaf(record_label(r), data=r.key)

    def on_resize(self, _event: events.Resize) -> None:
        # a smaller window keeps the scroll offset: bring the cursor's row back into view
        # once the new size is laid out (not at the next key press)
        self.call_after_refresh(self._show_cursor)

    def _show_cursor(self) -> None:
        if self.cursor_line >= 0:
            self.scroll_to_line(self.cursor_line, animate=False)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        event.stop()
        self._fill(event.node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        self.post_message(self.Highlighted(event.node.data))
