// The PushRules module; see ARCHITECTURE.md.
