// The Kafka module; see ARCHITECTURE.md.
