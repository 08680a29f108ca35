// What `bench pipeline` prints about the pools and the round trip: how fast the pools grew, and the rates
// APNs' latency allows by Little's law, from the run's own figures.

import APNsSimulator
import Foundation

extension PipelineBenchmark {
    /// What APNs' latency allows, by Little's law (in flight = rate × latency): the streams bound is what
    /// the pool's connections can carry (connections × the peer's SETTINGS_MAX_CONCURRENT_STREAMS ÷
    /// latency), the in-flight bound what the pipeline's record cap can (records × notifications per
    /// record ÷ latency). Connections and cap are those in force at the end of the backlog (both follow
    /// the load). The measured rate can reach neither when the machine's CPU is the limit.
    static func describeBounds(
        latency: LatencyDistribution, connections: Int, maximumConcurrentStreams: Int, maxInFlightRecords: Int,
        notificationsPerEvent: Double, measured: Double
    ) -> String {
        let seconds = latency.meanMilliseconds / 1000
        guard seconds > 0 else {
            return "  APNs answers at once (no --apns-latency-ms): the rate is bounded by CPU, not by streams"
        }
        let streamsBound = Double(connections * maximumConcurrentStreams) / seconds
        let inFlightBound = Double(maxInFlightRecords) * notificationsPerEvent / seconds
        return String(
            format:
                "  at %.1f ms mean APNs latency: streams bound %.0f/s (%d connections × %d streams), in-flight "
                + "bound %.0f/s (%d records × %.2f notifications); measured %.2f of the lower",
            latency.meanMilliseconds, streamsBound, connections, maximumConcurrentStreams, inFlightBound,
            maxInFlightRecords, notificationsPerEvent, measured / min(streamsBound, inFlightBound))
    }

    /// How fast the pools grew: when they first had their most connections, and what a handshake cost.
    static func describeGrowth(connections: Int, reachedAfter seconds: Double, handshakeMilliseconds: Double)
        -> String
    {
        let handshake =
            handshakeMilliseconds > 0
            ? String(format: ", each TLS handshake held %.0f ms (--apns-handshake-ms)", handshakeMilliseconds)
            : ", TLS handshakes not held (--apns-handshake-ms)"
        return String(format: "  the pools reached %d connections %.2f s into the backlog", connections, seconds)
            + handshake
    }
}
