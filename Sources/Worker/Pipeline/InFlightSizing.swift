// How many records the pipeline keeps in flight when nobody tuned it: enough to keep every stream the
// APNs pools can carry busy (Little's law: a record holds its streams for a round trip, so at 100 ms a
// fixed cap starves the pools that a 1 ms round trip fills), never more than the configured bound, which
// is what limits memory.

/// Derives the in-flight cap from the transport's stream capacity and the pushes records carry.
///
/// - Important: Not thread-safe; the pipeline calls it under its lock.
struct InFlightSizing: Sendable {
    /// The configured cap: the most records in flight whatever the pools could carry (memory).
    let upperBound: Int
    /// The fewest records the cap shrinks to, so that a pool still connecting does not starve the start.
    let lowerBound: Int
    /// Streams per record in flight: a record also spends time being decoded and having its results
    /// acknowledged, when it holds no stream, and the pool grows only while requests wait for one.
    static let headroom = 1.5
    /// Recomputed every this many records taken or finished (reading the pools' statistics takes their
    /// locks); finishes count too, so that a paused pipeline, which takes none, still resizes.
    static let interval = 64
    /// How often the cap is resized while the pipeline is paused at it, taking and finishing nothing.
    static let pausedInterval = Duration.milliseconds(25)

    /// Pushes per finished record: the mean of the first 64 records, then smoothed over roughly the last 64.
    private(set) var pushesPerRecord = 1.0
    private var recordsSeen = 0
    private var events = 0

    init(upperBound: Int) {
        self.upperBound = max(1, upperBound)
        lowerBound = min(self.upperBound, 256)
    }

    mutating func recordFinished(pushes: Int) {
        recordsSeen = min(recordsSeen + 1, 64)
        pushesPerRecord += (Double(max(1, pushes)) - pushesPerRecord) / Double(recordsSeen)
    }

    /// Counts a record taken or finished; true every `interval` of them: time to ask the transport for its
    /// capacity again.
    mutating func tick() -> Bool {
        events &+= 1
        return events % Self.interval == 0
    }

    /// The cap for a transport that can carry `streams` requests at once (nil: it does not say, so the
    /// configured bound applies).
    func capacity(streams: Int?) -> Int {
        guard let streams else { return upperBound }
        let records = (Self.headroom * Double(streams) / pushesPerRecord).rounded(.up)
        return min(upperBound, max(lowerBound, records.isFinite ? Int(min(records, 1e9)) : upperBound))
    }
}
