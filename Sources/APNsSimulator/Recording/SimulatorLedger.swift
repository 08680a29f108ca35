// What the simulator accepted (a bounded ring of records) and what it counted (connections, answers
// by status and reason, peak concurrent streams per connection), for tests to assert on.

public import APNs
public import JSON

/// One notification the simulator accepted (answered 200).
public struct AcceptedNotification: Sendable, Hashable {
    /// Which connection it came on (1, 2, ... in accept order).
    public var connectionID: Int
    public var streamID: Int
    /// Lowercase hex; empty for a broadcast.
    public var deviceToken: String
    /// The channel of a broadcast; nil for a device push.
    public var channelID: String? = nil
    /// The apns-id answered (the client's, or one the simulator made).
    public var apnsID: String
    /// The apns-unique-id answered; nil in the production environment.
    public var uniqueID: String?
    public var pushType: PushType
    /// The full topic, suffix included.
    public var topic: String
    /// The provider token's key id (token authentication); the token itself is never kept.
    public var keyID: String?
    /// Every request header in arrival order except `authorization`.
    public var headers: [APNsHeaderField]
    /// The request body as received.
    public var payload: [UInt8]
    /// Wall-clock time of arrival, milliseconds since 1970.
    public var receivedAtMilliseconds: Int64

    /// The first header of that (lowercase) name.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The payload parsed as JSON; nil if it does not parse (it always does for accepted requests).
    public var payloadJSON: JSONValue? { try? JSONValue(parsing: payload) }
}

/// An answer's status and, for errors, its reason.
public struct ResponseKind: Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    /// Nil for 200.
    public var reason: String?

    public init(status: Int, reason: String?) {
        self.status = status
        self.reason = reason
    }

    public var description: String { reason.map { "\(status) \($0)" } ?? String(status) }
}

/// Counters since the simulator started.
public struct SimulatorStats: Sendable, Hashable {
    /// TCP connections accepted (including those whose TLS handshake failed).
    public var connectionsAccepted = 0
    /// Connections closed at once because `maximumConnections` were already being served.
    public var connectionsRefused = 0
    /// Connections whose TLS handshake failed (no or untrusted client certificate, no h2 in ALPN).
    public var handshakeFailures = 0
    /// Why the latest failed handshake failed (OpenSSL's words), for diagnosing client setups.
    public var lastHandshakeFailure: String?
    /// Connections open now.
    public var connectionsOpen = 0
    /// Complete requests received (every stream the simulator planned an answer for).
    public var requests = 0
    /// Answers by status and reason (counted when decided, before any latency).
    public var responses: [ResponseKind: Int] = [:]
    /// Streams deliberately never answered.
    public var stalledStreams = 0
    /// Streams left unprocessed above a GOAWAY's last-stream-id by a `goAway(processThisStream: false)` fault.
    public var unprocessedStreams = 0
    /// Connections closed by a drop fault.
    public var droppedConnections = 0
    /// GOAWAY frames sent (faults and stop()).
    public var goAwaysSent = 0
    /// The highest number of streams open at once, by connection id (the latest 4096 connections).
    public var peakConcurrentStreams: [Int: Int] = [:]
    /// Accepted notifications recorded since start.
    public var acceptedRecorded = 0
    /// Records pushed out of the ring because it was full (the oldest go first).
    public var acceptedDropped = 0

    /// Answers with this status.
    public func count(status: Int) -> Int {
        responses.reduce(0) { $0 + ($1.key.status == status ? $1.value : 0) }
    }
    /// Answers with this reason.
    public func count(reason: String) -> Int {
        responses.reduce(0) { $0 + ($1.key.reason == reason ? $1.value : 0) }
    }
    /// The highest number of concurrent streams on any connection.
    public var maximumConcurrentStreams: Int { peakConcurrentStreams.values.max() ?? 0 }

    /// The counters as a JSON object (for the command's exit summary).
    public var json: JSONValue {
        var responseObject = JSONObject()
        for (kind, count) in responses.sorted(by: { $0.key.description < $1.key.description }) {
            responseObject.appendUnchecked(kind.description, .int(Int64(count)))
        }
        var peaks = JSONObject()
        for (connection, peak) in peakConcurrentStreams.sorted(by: { $0.key < $1.key }) {
            peaks.appendUnchecked(String(connection), .int(Int64(peak)))
        }
        return .object([
            "connectionsAccepted": .int(Int64(connectionsAccepted)),
            "connectionsRefused": .int(Int64(connectionsRefused)),
            "handshakeFailures": .int(Int64(handshakeFailures)),
            "lastHandshakeFailure": lastHandshakeFailure.map { .string($0) } ?? .null,
            "connectionsOpen": .int(Int64(connectionsOpen)),
            "requests": .int(Int64(requests)),
            "responses": .object(responseObject),
            "stalledStreams": .int(Int64(stalledStreams)),
            "unprocessedStreams": .int(Int64(unprocessedStreams)),
            "droppedConnections": .int(Int64(droppedConnections)),
            "goAwaysSent": .int(Int64(goAwaysSent)),
            "peakConcurrentStreams": .object(peaks),
            "acceptedRecorded": .int(Int64(acceptedRecorded)),
            "acceptedDropped": .int(Int64(acceptedDropped)),
        ])
    }
}

/// What one connection counted since its last report (`SimulatorEngine.report`), kept on its thread.
struct LedgerTally: Sendable {
    var requests = 0
    /// Answered 200; `unkept` of them with no record made (the ring has no room at all).
    var accepted = 0
    var unkept = 0
    var stalls = 0
    var unprocessed = 0
    var drops = 0
    /// Answers other than 200, by kind.
    var responses: [ResponseKind: Int] = [:]
    var records: [AcceptedNotification] = []
    /// The most streams the connection had open at once, when that rose since the last report.
    var peakStreams: Int?

    var isEmpty: Bool { requests == 0 && peakStreams == nil }

    mutating func count(_ kind: ResponseKind) {
        requests += 1
        responses[kind, default: 0] += 1
    }

    mutating func accept(_ record: AcceptedNotification) {
        requests += 1
        accepted += 1
        records.append(record)
    }

    mutating func acceptUnkept() {
        requests += 1
        accepted += 1
        unkept += 1
    }
}

/// The ring of accepted notifications plus the counters; guarded by the engine's lock.
struct SimulatorLedger {
    private var counters = SimulatorStats()
    /// 200 answers, counted apart from `responses` to keep the hot path off the dictionary.
    private var acceptedAnswers = 0

    var stats: SimulatorStats {
        var stats = counters
        if acceptedAnswers > 0 {
            stats.responses[ResponseKind(status: 200, reason: nil), default: 0] += acceptedAnswers
        }
        return stats
    }
    private var ring: [AcceptedNotification] = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(0, capacity)
        ring.reserveCapacity(min(self.capacity, 4096))
    }

    /// Counts a notification a ring of capacity 0 cannot keep; callers that know the capacity is 0
    /// call it without making the record at all.
    mutating func countUnkept() {
        counters.acceptedRecorded += 1
        counters.acceptedDropped += 1
    }

    /// Keeps `notification`; returns the oldest record when the ring was full (for the caller to
    /// release outside the lock).
    mutating func record(_ notification: AcceptedNotification) -> AcceptedNotification? {
        guard capacity > 0 else {
            countUnkept()
            return notification
        }
        counters.acceptedRecorded += 1
        if ring.count < capacity {
            ring.append(notification)
            return nil
        }
        counters.acceptedDropped += 1
        defer { next = (next + 1) % capacity }
        return swap(&ring[next], with: notification)
    }

    private func swap(_ slot: inout AcceptedNotification, with new: AcceptedNotification) -> AcceptedNotification {
        let old = slot
        slot = new
        return old
    }

    /// Oldest first.
    var accepted: [AcceptedNotification] {
        ring.count < capacity ? ring : Array(ring[next...]) + ring[..<next]
    }

    mutating func clearAccepted() {
        ring.removeAll(keepingCapacity: true)
        next = 0
    }

    /// Adds a connection's tally; returns the records pushed out of the full ring (for the caller to
    /// release outside the lock).
    mutating func add(_ tally: LedgerTally, connection: Int) -> [AcceptedNotification] {
        counters.requests += tally.requests
        acceptedAnswers += tally.accepted
        counters.acceptedRecorded += tally.unkept
        counters.acceptedDropped += tally.unkept
        counters.stalledStreams += tally.stalls
        counters.unprocessedStreams += tally.unprocessed
        counters.droppedConnections += tally.drops
        for (kind, count) in tally.responses { counters.responses[kind, default: 0] += count }
        if let peak = tally.peakStreams { self.peak(connection: connection, streams: peak) }
        var pushedOut: [AcceptedNotification] = []
        for record in tally.records {
            if let old = self.record(record) { pushedOut.append(old) }
        }
        return pushedOut
    }

    mutating func countGoAway() { counters.goAwaysSent += 1 }
    mutating func connectionAccepted() { counters.connectionsAccepted += 1 }
    mutating func connectionRefused() { counters.connectionsRefused += 1 }
    mutating func connectionOpened() { counters.connectionsOpen += 1 }
    mutating func connectionClosed(wasOpen: Bool) { if wasOpen { counters.connectionsOpen -= 1 } }
    mutating func handshakeFailed(reason: String) {
        counters.handshakeFailures += 1
        counters.lastHandshakeFailure = reason
    }
    mutating func peak(connection: Int, streams: Int) {
        counters.peakConcurrentStreams[connection] = max(counters.peakConcurrentStreams[connection] ?? 0, streams)
        // Bounded for long runs with many reconnects: forget the oldest connections.
        if counters.peakConcurrentStreams.count > Self.peakConnectionsKept,
            let oldest = counters.peakConcurrentStreams.keys.min()
        {
            counters.peakConcurrentStreams.removeValue(forKey: oldest)
        }
    }

    /// How many connections' peaks `peakConcurrentStreams` keeps.
    static let peakConnectionsKept = 4096
}
