"""A member's layout of a thread: the app view pinned beside the conversation (the side
pane) and its width (docs/side-pane.md). Each member's own: nobody else sees it change."""
