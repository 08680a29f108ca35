// The Worker module; see ARCHITECTURE.md.
