// The APNsSimulator module; see ARCHITECTURE.md.
