// The highest values a benchmark saw of what follows the load: APNs connections, the in-flight cap, and
// the records in flight (sampled on the benchmark's own task while the backlog drains).

struct PipelinePeaks {
    var connections = 0
    var cap = 0
    var inFlight = 0

    mutating func observe(connections: Int, cap: Int, inFlight: Int) {
        self.connections = max(self.connections, connections)
        self.cap = max(self.cap, cap)
        self.inFlight = max(self.inFlight, inFlight)
    }
}
