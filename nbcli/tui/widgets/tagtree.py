"""The tag tree: tags grouped by ``/``, filtered as you type, several selectable.

Fast with thousands of tags: groups are filled lazily when expanded, and a filter
expands its matches only when there are few of them. Labels are literal text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ..text import lit

EXPAND_MATCHES = 300  # a filter with at most this many matches opens every group


class _Group:
    """A node's subtree: child groups and leaves (full tag names)."""

    __slots__ = ("groups", "leaves", "count")

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.leaves: list[tuple[str, str]] = []  # (last component, full tag)
        self.count = 0


def _build(tags: list[str]) -> _Group:
    root = _Group()
    for tag in tags:
        parts = tag.split("/")
        node = root
        node.count += 1
        for p in parts[:-1]:
            node = node.groups.setdefault(p, _Group())
            node.count += 1
        node.leaves.append((parts[-1], tag))
    return root


class TagTree(Tree):
    """Tree of tags. ``data`` of a leaf is its tag; of a group, its :class:`_Group`."""

    BINDINGS = [
        Binding("space", "toggle_tag", "select", show=True),
    ]

    class SelectionChanged(Message):
        def __init__(self, selected: list[str]) -> None:
            super().__init__()
            self.selected = selected

    class TagHighlighted(Message):
        def __init__(self, tag: str | None) -> None:
            super().__init__()
            self.tag = tag

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("tags", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self.tags: list[str] = []
        self.filter = ""
        self.selected: list[str] = []
        self._leaf_nodes: dict[str, TreeNode] = {}

    def set_tags(self, tags: list[str], filter_text: str | None = None) -> None:
        """Show ``tags`` (sorted list) filtered by ``filter_text`` (case-insensitive
        substring; several words must all match). Keeps selection and the cursor tag."""
        if filter_text is None:
            filter_text = self.filter
        if tags == self.tags and filter_text == self.filter and self.root.children:
            return
        cursor_tag = self.cursor_tag
        self.tags = list(tags)
        self.filter = filter_text
        words = filter_text.lower().split()
        shown = [t for t in self.tags if all(w in t.lower() for w in words)] if words else self.tags
        self.clear()
        self._leaf_nodes = {}
        tree = _build(shown)
        expand = bool(words) and len(shown) <= EXPAND_MATCHES or len(shown) <= 12
        self._fill(self.root, tree, expand)
        self.root.expand()
        if cursor_tag and cursor_tag in self._leaf_nodes:
            self.move_cursor(self._leaf_nodes[cursor_tag])
        elif shown and self.cursor_line < 0:
            self.cursor_line = 0

    def _fill(self, node: TreeNode, group: _Group, expand: bool) -> None:
        for name in sorted(group.groups):
            g = group.groups[name]
            label = lit(name + "/", "bold")
            label.append(f" {g.count}", style="dim")
            child = node.add(label, data=g, expand=expand)
            if expand:
                self._fill(child, g, True)
            else:
                child.allow_expand = True
        for last, tag in group.leaves:
            leaf = node.add_leaf(self._leaf_label(last, tag), data=tag)
            self._leaf_nodes[tag] = leaf

    def _leaf_label(self, last: str, tag: str) -> Text:
        label = lit(("● " if tag in self.selected else "  ") + last)
        if tag in self.selected:
            label.stylize("bold #5fafff")
        return label

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        node = event.node
        if isinstance(node.data, _Group) and not node.children:
            self._fill(node, node.data, False)

    @property
    def cursor_tag(self) -> str | None:
        node = self.cursor_node
        return node.data if node is not None and isinstance(node.data, str) else None

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        self.post_message(self.TagHighlighted(event.node.data if isinstance(event.node.data, str) else None))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        event.stop()
        if isinstance(event.node.data, str):
            self.toggle(event.node.data)

    def action_toggle_tag(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if isinstance(node.data, str):
            self.toggle(node.data)
        else:
            node.toggle()

    def toggle(self, tag: str) -> None:
        if tag in self.selected:
            self.selected.remove(tag)
        else:
            self.selected.append(tag)
        self._relabel(tag)
        self.post_message(self.SelectionChanged(list(self.selected)))

    def clear_selection(self) -> None:
        old, self.selected = self.selected, []
        for tag in old:
            self._relabel(tag)
        self.post_message(self.SelectionChanged([]))

    def _relabel(self, tag: str) -> None:
        node = self._leaf_nodes.get(tag)
        if node is not None:
            node.set_label(self._leaf_label(tag.split("/")[-1], tag))
