// Faults that pass, met through the production send path (APNsPushTransport over APNsClient, against
// the simulator): a GOAWAY storm, APNs answering 503 or gone for longer than any retry budget. Pushes
// wait while their pool is down and are delivered once it is back; none is failed, none is sent after
// its expiration.

import APNs
import APNsSimulator
import Foundation
import HTTP2
import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite("APNs faults that pass", .serialized)
struct APNsOutageTests {
    static let app = APNsPushTransportTests.app

    /// A budget any outage here outlasts: 3 attempts within 300 ms.
    static let smallBudget = RetryPolicy(
        maximumAttempts: 3, maximumTotalTime: .milliseconds(300),
        backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(20)))

    /// Breaker changes as the client reported them.
    final class BreakerLog: Sendable {
        private let seen = Mutex<[String]>([])
        var changes: [String] { seen.withLock { $0 } }
        func record(_ transition: CircuitBreaker.Transition) { seen.withLock { $0.append("\(transition.to)") } }
    }

    static func client(_ simulator: APNsSimulator, loops: EventLoopGroup, log: BreakerLog) throws -> APNsClient {
        try APNsPushTransportTests.client(simulator, loops: loops) { configuration in
            configuration.connectTimeout = .seconds(2)
            configuration.reconnectBackoff = ExponentialBackoff(initial: .milliseconds(20), maximum: .milliseconds(100))
            configuration.breaker.openDuration = ExponentialBackoff(
                initial: .milliseconds(50),
                maximum: .milliseconds(100))
            configuration.onBreakerTransition = { _, transition in log.record(transition) }
        }
    }

    /// Sends `events` events of two pushes each, every event's pushes together, all events at once.
    static func sendEvents(_ transport: APNsPushTransport, _ pushes: [PlannedPush]) async -> [DeliveryResult] {
        await withTaskGroup(of: (Int, [DeliveryResult]).self) { group in
            for start in stride(from: 0, to: pushes.count, by: 2) {
                let event = Array(pushes[start..<min(start + 2, pushes.count)])
                group.addTask { (start, await transport.deliverAll(event[...])) }
            }
            var results = [DeliveryResult?](repeating: nil, count: pushes.count)
            for await (start, eventResults) in group {
                for (offset, result) in eventResults.enumerated() { results[start + offset] = result }
            }
            return results.map { $0! }
        }
    }

    static func statuses(_ results: [DeliveryResult]) -> [DeliveryStatus: Int] {
        results.reduce(into: [:]) { $0[$1.status, default: 0] += 1 }
    }

    /// A started simulator answering 503 ServiceUnavailable to everything, until its faults are changed.
    static func serviceUnavailableSimulator() throws -> APNsSimulator {
        var configuration = SimulatorConfiguration()
        configuration.faults.failureRate = 1
        configuration.faults.failure = .serviceUnavailable()
        let simulator = try APNsSimulator(configuration)
        _ = try simulator.start()
        return simulator
    }

    @Test func aGoAwayStormSpendsNoAttempts() async throws {
        var configuration = SimulatorConfiguration()
        configuration.faults.goAwayAfterStreams = 7
        configuration.faults.latency = LatencyDistribution(fixedMilliseconds: 2)
        let simulator = try APNsSimulator(configuration)
        _ = try simulator.start()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops, log: BreakerLog())
        // Two attempts each: a storm that cost attempts would fail most pushes.
        let policy = RetryPolicy(
            maximumAttempts: 2,
            backoff: ExponentialBackoff(
                initial: .milliseconds(10),
                maximum: .milliseconds(20)))
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: policy)
        let pushes = try (0..<400).map { try APNsPushTransportTests.push($0) }

        let results = await Self.sendEvents(transport, pushes)

        #expect(Self.statuses(results) == [.delivered: 400], "\(Set(results.map(\.summary)).prefix(3))")
        let unprocessed = results.reduce(0) { total, result in
            total + result.attempts.filter { $0.reason == "unprocessed" }.count
        }
        #expect(unprocessed > 0, "the storm must have left streams unprocessed")
        #expect(simulator.stats.goAwaysSent >= 400 / 7)
        #expect(Set(simulator.accepted.map(\.deviceToken)).count == 400, "each push accepted")
        for result in results {
            #expect(Set(result.attempts.map(\.apnsID)).count == result.attempts.count, "a fresh apns-id per try")
        }
        await client.shutdown()
        await loops.shutdown()
    }

    @Test func serviceUnavailableLongerThanTheBudgetHoldsPushesUntilAPNsAnswers() async throws {
        let simulator = try Self.serviceUnavailableSimulator()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let log = BreakerLog()
        let client = try Self.client(simulator, loops: loops, log: log)
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: Self.smallBudget)
        let pushes = try (0..<200).map { try APNsPushTransportTests.push($0) }

        async let sent = Self.sendEvents(transport, pushes)
        let breaker = client.breaker(for: .sandbox)
        #expect(await eventually(timeout: .seconds(30)) { breaker.snapshot.waiting >= 150 })
        // Probes keep finding APNs down well past the 300 ms budget: at least 20 of them, each at least
        // 25 ms after the last.
        let answeredWhenHeld = simulator.stats.requests
        #expect(await eventually(timeout: .seconds(30)) { simulator.stats.requests >= answeredWhenHeld + 20 })
        #expect(breaker.snapshot.state != .closed)
        try simulator.setFaults(.none)
        let results = await sent

        #expect(Self.statuses(results) == [.delivered: 200], "\(Set(results.map(\.summary)).prefix(3))")
        #expect(Set(simulator.accepted.map(\.deviceToken)).count == 200)
        #expect(log.changes.first == "open" && log.changes.last == "closed", "\(log.changes)")
        #expect(breaker.isClosed)
        await client.shutdown()
        await loops.shutdown()
    }

    /// A server certificate and key for localhost and 127.0.0.1, made with the openssl CLI, so that a
    /// simulator started again presents the certificate the client already trusts.
    static func serverIdentity() throws -> SimulatorTLSIdentity {
        let certificate = try TestCertificate.make()
        return .files(certificate: certificate.certificateFile, privateKey: certificate.keyFile)
    }

    @Test func apnsUnreachableLongerThanTheBudgetHoldsPushesUntilItIsBack() async throws {
        var configuration = SimulatorConfiguration()
        configuration.tls = try Self.serverIdentity()
        let simulator = try APNsSimulator(configuration)
        let port = try simulator.start()
        configuration.port = port
        let loops = EventLoopGroup(threadCount: 1)
        let log = BreakerLog()
        let client = try Self.client(simulator, loops: loops, log: log)
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: Self.smallBudget)
        let warmUp = await transport.deliverAll([try APNsPushTransportTests.push(999)][...])
        #expect(warmUp.map(\.status) == [.delivered])
        simulator.stop()
        let pushes = try (0..<100).map { try APNsPushTransportTests.push($0) }

        async let sent = Self.sendEvents(transport, pushes)
        let breaker = client.breaker(for: .sandbox)
        #expect(await eventually(timeout: .seconds(30)) { breaker.snapshot.waiting >= 90 })
        // The same identity on the same port: the client trusts it as it did the first.
        let restarted = try APNsSimulator(configuration)
        _ = try restarted.start()
        defer { restarted.stop() }
        let results = await sent

        #expect(Self.statuses(results) == [.delivered: 100], "\(Set(results.map(\.summary)).prefix(3))")
        #expect(Set(restarted.accepted.map(\.deviceToken)).count == 100)
        #expect(log.changes.first == "open" && log.changes.last == "closed", "\(log.changes)")
        await client.shutdown()
        await loops.shutdown()
    }

    @Test func aPushWhoseExpirationPassesWhileHeldIsExpiredAndNeverSent() async throws {
        let simulator = try Self.serviceUnavailableSimulator()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops, log: BreakerLog())
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: Self.smallBudget)
        let soon = Int64(Date().timeIntervalSince1970) + 2
        var pushes = try (0..<40).map { try APNsPushTransportTests.push($0) }
        for index in stride(from: 0, to: pushes.count, by: 2) { pushes[index].request.expiration = .at(soon) }

        async let sent = Self.sendEvents(transport, pushes)
        let breaker = client.breaker(for: .sandbox)
        #expect(await eventually(timeout: .seconds(30)) { breaker.snapshot.waiting >= 30 })
        // The expiring half leaves the wait by itself, expired; the rest still waits.
        #expect(await eventually(timeout: .seconds(30)) { breaker.snapshot.waiting <= 20 })
        try simulator.setFaults(.none)
        let results = await sent

        let expiring = stride(from: 0, to: pushes.count, by: 2).map { results[$0] }
        let lasting = stride(from: 1, to: pushes.count, by: 2).map { results[$0] }
        #expect(Self.statuses(expiring) == [.expired: 20], "\(expiring.map(\.summary).prefix(2))")
        #expect(Set(expiring.map(\.expiryReason)) == ["expired"])
        #expect(Self.statuses(lasting) == [.delivered: 20])
        let expiringTokens = Set(expiring.indices.map { pushes[$0 * 2].request.deviceToken?.hex })
        #expect(
            simulator.accepted.filter { expiringTokens.contains($0.deviceToken) }.isEmpty,
            "an expired push is never sent once APNs is back")
        await client.shutdown()
        await loops.shutdown()
    }

    @Test func aPushWithoutExpirationWaitsAtMostTheHoldLimit() async throws {
        let simulator = try Self.serviceUnavailableSimulator()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops, log: BreakerLog())
        var policy = Self.smallBudget
        policy.maximumHoldTime = .milliseconds(400)
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: policy)
        let pushes = try (0..<20).map { try APNsPushTransportTests.push($0) }

        let results = await Self.sendEvents(transport, pushes)

        #expect(Self.statuses(results) == [.expired: 20], "\(results.map(\.summary).prefix(2))")
        #expect(Set(results.map(\.expiryReason)) == ["holdLimitReached"])
        #expect(results.allSatisfy { $0.summary.contains("hold limit") })
        await client.shutdown()
        await loops.shutdown()
    }
}
