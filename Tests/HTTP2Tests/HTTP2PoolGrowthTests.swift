// A pool grows up to its ceiling while requests wait for a stream, by what the waiting requests need beyond
// the connections still connecting, overlapping handshakes, never before a connection is ready; without a
// ceiling it keeps exactly its connection count. And the capacity it reports for callers to size by.

import Glibc
import Synchronization
import TestSupport
import Testing

@testable import HTTP2

/// Lets numbered things through up to a number the test raises: the test server's connections (numbered from 1)
/// on with their TLS handshake, or, held as a whole (number 1), the server's answers.
final class NumberedGate: Sendable {
    private let count = Atomic<Int>(0)
    func allow(upTo number: Int) { count.store(number, ordering: .releasing) }
    func allows(_ number: Int) -> Bool { number <= count.load(ordering: .acquiring) }
}

@Suite("HTTP/2 pool growth", .serialized)
struct HTTP2PoolGrowthTests {
    static let group = EventLoopGroup(threadCount: 2)

    func sendConcurrently(_ pool: ConnectionPool, count: Int) async throws -> [Int] {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask { try await pool.send(HTTP2Request(path: "/item/\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test func growsToItsCeilingWhileRequestsWaitAndNoFurther() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 2
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(100)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makeTestPool(server, group: Self.group) {
            $0.connectionCount = 1
            $0.maximumConnectionCount = 3
        }
        let statuses = try await sendConcurrently(pool, count: 40)
        #expect(statuses == Array(repeating: 200, count: 40))
        let statistics = pool.statistics
        #expect(statistics.targetConnections == 3)
        #expect(statistics.connectionsOpened == 3, "up to the ceiling and no further")
        #expect(server.snapshot.connections == 3)
        #expect(server.snapshot.limitViolations == 0)
        #expect(statistics.streamCapacityWithGrowth == 6, "at its ceiling a pool offers no room to grow")
        await pool.shutdown()
        await server.stop()
    }

    /// A test server whose answers take `answer` and whose connections numbered above `handshakesAllowed`
    /// hold their TLS handshake, and a pool of one connection that may grow to `ceiling`.
    func serverAndPool(
        streams: UInt32, handshakesAllowed: NumberedGate? = nil, answersAllowed: NumberedGate? = nil,
        answer: Duration, ceiling: Int,
        growthWait: Duration = .milliseconds(20), shrinkAfter: Duration = .seconds(60),
        adjustServer: (inout HTTP2TestServer.Options) -> Void = { _ in }
    ) throws -> (HTTP2TestServer, ConnectionPool) {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = streams
        adjustServer(&options)
        if let handshakesAllowed {
            options.handshakeGate = { handshakesAllowed.allows($0) }
        }
        options.reply = { _ in
            // Held answers keep their streams busy (the server's connection thread waits).
            while let answersAllowed, !answersAllowed.allows(1) { usleep(1000) }
            return .respond(status: 200, delay: answer)
        }
        let server = try HTTP2TestServer(options: options)
        let pool = try makeTestPool(server, group: Self.group) {
            $0.connectionCount = 1
            $0.maximumConnectionCount = ceiling
            $0.growthWait = growthWait
            $0.shrinkAfter = shrinkAfter
        }
        return (server, pool)
    }

    /// A far server, its handshakes held until the test lets them go: with no connection ready the pool opens
    /// nothing beyond its first, however many requests wait (growthWait 0, so that every request would be
    /// reason enough); once the first is ready it opens the three more its queue needs at once, all three
    /// connecting side by side, where a pool that opened one per ready connection had one at a time.
    @Test func aFarServerGetsItsConnectionsInOverlappingHandshakesNotOneAfterAnother() async throws {
        let handshakesAllowed = NumberedGate()
        let (server, pool) = try serverAndPool(
            streams: 2, handshakesAllowed: handshakesAllowed, answer: .milliseconds(50), ceiling: 4,
            growthWait: .zero)
        let sent = Task { try await sendConcurrently(pool, count: 40) }
        #expect(await eventually { pool.statistics.queuedRequests == 40 })
        #expect(pool.statistics.connectingConnections == 1, "no connection beyond the first before it is ready")
        handshakesAllowed.allow(upTo: 1)
        #expect(
            await eventually {
                let statistics = pool.statistics
                return statistics.readyConnections == 1 && statistics.connectingConnections == 3
            }, "the three connections the queue needed connect side by side")
        handshakesAllowed.allow(upTo: 4)
        let statuses = try await sent.value
        #expect(statuses == Array(repeating: 200, count: 40))
        #expect(pool.statistics.connectionsOpened == 4)
        #expect(server.snapshot.limitViolations == 0)
        await pool.shutdown()
        await server.stop()
    }

    /// One step opens what the waiting requests need (25 waiting on connections of 10 streams: 3 more, not
    /// the ceiling of 8), and requests that the connections still connecting will take are no reason for more.
    @Test func growsByWhatItsQueueNeedsNotToItsCeiling() async throws {
        let handshakesAllowed = NumberedGate()
        let answersAllowed = NumberedGate()
        let (server, pool) = try serverAndPool(
            streams: 10, handshakesAllowed: handshakesAllowed, answersAllowed: answersAllowed,
            answer: .milliseconds(50), ceiling: 8, growthWait: .zero)
        let first = Task { try await sendConcurrently(pool, count: 35) }
        #expect(await eventually { pool.statistics.queuedRequests == 35 })
        handshakesAllowed.allow(upTo: 1)
        #expect(await eventually { pool.statistics.connectingConnections == 3 })
        // 25 waiting, 30 streams coming; 4 more make 29.
        let second = Task { try await sendConcurrently(pool, count: 4) }
        #expect(await eventually { pool.statistics.queuedRequests == 29 })
        #expect(pool.statistics.connectionsOpened == 4)
        handshakesAllowed.allow(upTo: 8)
        answersAllowed.allow(upTo: 1)
        let statuses = try await first.value + second.value
        #expect(statuses == Array(repeating: 200, count: 39))
        #expect(pool.statistics.connectionsOpened == 4)
        #expect(server.snapshot.connections == 4)
        #expect(server.snapshot.limitViolations == 0)
        await pool.shutdown()
        await server.stop()
    }

    /// A connection whose limit the server dropped to 1 (APNs has, after a rejected request) still counts for what
    /// the server's connections carry: 29 requests waiting on connections of 10 streams need 3 more, not one
    /// each up to the ceiling of 8. The new connections' handshakes and the throttled connection's answer are
    /// held until the pool has sized its growth (growthWait 0: every waiting request is reason to look), so the
    /// count does not depend on how fast the test queues its requests.
    @Test func aConnectionThrottledToOneStreamDoesNotSizeTheGrowth() async throws {
        let handshakesAllowed = NumberedGate()
        let answersAllowed = NumberedGate()
        handshakesAllowed.allow(upTo: 1)
        answersAllowed.allow(upTo: 1)
        let (server, pool) = try serverAndPool(
            streams: 10, handshakesAllowed: handshakesAllowed, answersAllowed: answersAllowed,
            answer: .zero, ceiling: 8, growthWait: .zero
        ) {
            $0.lowerLimit = (afterRequests: 1, to: 1)
            $0.lowerLimitConnections = [1]
        }
        _ = try await pool.send(HTTP2Request(path: "/warm-up"))
        #expect(await eventually { pool.statistics.streamCapacity == 1 })
        answersAllowed.allow(upTo: 0)
        let sent = Task { try await sendConcurrently(pool, count: 30) }
        #expect(await eventually { pool.statistics.queuedRequests == 29 })
        #expect(pool.statistics.connectingConnections == 3)
        #expect(pool.statistics.connectionsOpened == 4)
        handshakesAllowed.allow(upTo: 8)
        answersAllowed.allow(upTo: 1)
        let statuses = try await sent.value
        #expect(statuses == Array(repeating: 200, count: 30))
        #expect(pool.statistics.connectionsOpened == 4)
        #expect(server.snapshot.limitViolations == 0)
        await pool.shutdown()
        await server.stop()
    }

    /// After the burst it grew for, the pool gives its grown connections back one at a time, each after its
    /// streams fitted in one connection fewer for `shrinkAfter`, down to its connection count and no further;
    /// the retired connections close cleanly, and the next burst grows it again.
    @Test func aGrownPoolShrinksBackOnceItsLoadIsGoneAndGrowsAgainWhenItReturns() async throws {
        let (server, pool) = try serverAndPool(
            streams: 2, answer: .milliseconds(100), ceiling: 3, shrinkAfter: .milliseconds(200))
        #expect(try await sendConcurrently(pool, count: 30).allSatisfy { $0 == 200 })
        #expect(pool.statistics.connectionsOpened == 3)
        #expect(
            await eventually {
                let statistics = pool.statistics
                return statistics.targetConnections == 1 && statistics.readyConnections == 1
                    && statistics.drainingConnections == 0
            })
        #expect(try await pool.send(HTTP2Request(path: "/after")).status == 200)
        #expect(pool.statistics.connectionsOpened == 3, "the connection it kept serves, nothing reopened")

        #expect(try await sendConcurrently(pool, count: 30).allSatisfy { $0 == 200 })
        #expect(pool.statistics.connectionsOpened == 5, "the next burst grew it again")
        #expect(server.snapshot.limitViolations == 0)
        await pool.shutdown()
        await server.stop()
    }

    /// A pool whose streams stay busy keeps what it grew to: one load of 120 requests on 6 streams at 100 ms
    /// keeps every stream busy for about ten times `shrinkAfter`, and nothing is retired and reopened meanwhile
    /// (a retired connection would have left requests waiting, and the pool would have opened another). One
    /// load, not bursts: a loaded machine may pause the test between bursts for longer than `shrinkAfter`.
    @Test func aPoolWhoseStreamsStayBusyKeepsItsGrownConnections() async throws {
        let (server, pool) = try serverAndPool(
            streams: 2, answer: .milliseconds(100), ceiling: 3, shrinkAfter: .milliseconds(200))
        #expect(try await sendConcurrently(pool, count: 120).allSatisfy { $0 == 200 })
        #expect(pool.statistics.connectionsOpened == 3)
        await pool.shutdown()
        await server.stop()
    }

    @Test func aBurstTheNextFreedStreamsAbsorbBeforeTheGrowthWaitDoesNotGrowThePool() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 2
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(5)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makeTestPool(server, group: Self.group) {
            $0.connectionCount = 1
            $0.maximumConnectionCount = 3
            $0.growthWait = .seconds(30)
        }
        _ = try await pool.send(HTTP2Request(path: "/warm-up"))
        let statuses = try await sendConcurrently(pool, count: 40)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(pool.statistics.targetConnections == 1)
        #expect(server.snapshot.connections == 1)
        await pool.shutdown()
        await server.stop()
    }

    @Test func withoutACeilingKeepsItsConnectionCount() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 2
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(20)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makeTestPool(server, group: Self.group) { $0.connectionCount = 2 }
        let statuses = try await sendConcurrently(pool, count: 30)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(server.snapshot.connections == 2)
        #expect(pool.statistics.targetConnections == 2)
        await pool.shutdown()
        await server.stop()
    }

    @Test func aCeilingBelowTheConnectionCountIsRefused() {
        var configuration = ConnectionPool.Configuration(host: "127.0.0.1", port: 1)
        configuration.connectionCount = 3
        configuration.maximumConnectionCount = 2
        #expect(throws: HTTP2ClientError.self) { try ConnectionPool(configuration: configuration, group: Self.group) }
    }

    @Test func capacityWithGrowthCountsOneMoreConnectionUntilTheCeiling() {
        func statistics(ready: Int, capacity: Int, target: Int, ceiling: Int, opened: Int) -> ConnectionPool.Statistics
        {
            ConnectionPool.Statistics(
                readyConnections: ready, connectingConnections: target - ready, drainingConnections: 0,
                streamsInFlight: 0, streamCapacity: capacity, targetConnections: target, connectionCeiling: ceiling,
                queuedRequests: 0, streamsPerConnectionCap: 1000, connectFailures: 0, connectionsOpened: opened)
        }
        #expect(statistics(ready: 0, capacity: 0, target: 2, ceiling: 8, opened: 0).streamCapacityWithGrowth == 0)
        #expect(statistics(ready: 0, capacity: 0, target: 2, ceiling: 8, opened: 2).streamCapacityWithGrowth == 3000)
        #expect(statistics(ready: 2, capacity: 1000, target: 2, ceiling: 8, opened: 2).streamCapacityWithGrowth == 1500)
        #expect(statistics(ready: 2, capacity: 2000, target: 2, ceiling: 2, opened: 2).streamCapacityWithGrowth == 2000)
    }
}
