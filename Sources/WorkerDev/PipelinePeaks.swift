// The highest values a benchmark saw of what follows the load: APNs connections, the in-flight cap, and
// the records in flight (sampled on the benchmark's own task while the backlog drains).

struct PipelinePeaks {
    var connections = 0
    /// Seconds into the backlog when the pools first had `connections` open: how fast they grew.
    var connectionsReachedAt = 0.0
    var cap = 0
    var inFlight = 0

    mutating func observe(connections: Int, cap: Int, inFlight: Int, at seconds: Double) {
        if connections > self.connections {
            self.connections = connections
            connectionsReachedAt = seconds
        }
        self.cap = max(self.cap, cap)
        self.inFlight = max(self.inFlight, inFlight)
    }
}
