// The highest values a benchmark saw of what follows the load: APNs connections, the in-flight cap, and
// the records in flight (sampled while the backlog drains).

import Synchronization

final class PeakSampler: Sendable {
    struct Peak: Sendable {
        var connections = 0
        var cap = 0
        var inFlight = 0
    }

    private let state = Mutex(Peak())

    func observe(connections: Int, cap: Int, inFlight: Int) {
        state.withLock { peak in
            peak.connections = max(peak.connections, connections)
            peak.cap = max(peak.cap, cap)
            peak.inFlight = max(peak.inFlight, inFlight)
        }
    }

    var peak: Peak { state.withLock { $0 } }
}
