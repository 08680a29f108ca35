// The transport's batched send: every push of an event goes out at once and the event waits once;
// results come back in push order, refusals and retries as `deliver` gives them.

import APNs
import APNsSimulator
import Foundation
import HTTP2
import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite("APNs push transport")
struct APNsPushTransportTests {
    static let app = "com.example.app"

    static func token(_ index: Int) -> String { String(format: "%064x", 0xabc000 + index) }

    static func push(_ index: Int, app: String = app) throws -> PlannedPush {
        PlannedPush(
            request: APNsRequest(
                deviceToken: try DeviceToken(token(index)), environment: .sandbox,
                topic: app, payload: ["aps": ["alert": "hi"]]),
            app: app, ruleID: "r\(index)")
    }

    /// A client of the simulator on loops of its own, one connection per environment; `adjust` changes
    /// the rest.
    static func client(
        _ simulator: APNsSimulator, loops: EventLoopGroup,
        _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClient.Configuration(
            credential: .token(
                try ProviderTokenSigner(
                    key: try ProviderTokenKey.generate(
                        keyID: "KEY1234567",
                        teamID: "TEAM123456"))))
        configuration.endpointOverride = simulator.baseURL
        configuration.trustRoots = .caFile(simulator.caFilePath)
        configuration.connectionsPerEnvironment = 1
        adjust(&configuration)
        return try APNsClient(configuration: configuration, group: loops)
    }

    static let quickRetries = RetryPolicy(
        maximumAttempts: 4,
        backoff: ExponentialBackoff(
            initial: .milliseconds(10),
            maximum: .milliseconds(20)))

    /// Once every first attempt of an event has ended, nothing of the event's sends stays alive when their
    /// results are gone: each send refers to the collector (its receiver), and a collector that kept the
    /// sends made a cycle that leaked every push's send, request and collector for good. Both ways an event
    /// waits: a task (`deliverAll`) and a callback (`beginDeliverAll`).
    @Test(arguments: [false, true])
    func aBatchsSendsAndItsCollectorAreFreedOnceItsFirstAttemptsAreTaken(withCallback: Bool) async throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        _ = try simulator.start()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops)
        let pushes = try (0..<3).map { try Self.push($0) }
        let collector = WeakReference<FirstAttemptCollector>()
        let sends = (0..<pushes.count).map { _ in WeakReference<FirstAttempt>() }
        do {
            let firstAttempts: [FirstAttempt?] = await withUnsafeContinuation { continuation in
                let made =
                    withCallback
                    ? FirstAttemptCollector(count: pushes.count) { continuation.resume(returning: $0) }
                    : FirstAttemptCollector(count: pushes.count, continuation)
                collector.object = made
                for (slot, push) in pushes.enumerated() { client.beginSend(push.request, slot: slot, to: made) }
            }
            #expect(firstAttempts.allSatisfy { $0?.isDelivered == true })
            for (slot, send) in firstAttempts.enumerated() { sends[slot].object = send }
        }
        #expect(await eventually { collector.object == nil && sends.allSatisfy { $0.object == nil } })
        await client.shutdown(gracePeriod: .seconds(1))
        await loops.shutdown()
    }

    /// First attempts lost with their connection (a GOAWAY that leaves streams unprocessed, a dropped
    /// connection) come back through the batch as transport failures and are retried on a new connection.
    @Test(arguments: [FaultAction.goAway(processThisStream: false), .dropConnection])
    func firstAttemptsLostWithTheirConnectionAreRetriedOnANewOne(fault: FaultAction) async throws {
        var configuration = SimulatorConfiguration()
        configuration.faults.latency = LatencyDistribution(fixedMilliseconds: 50)
        configuration.faults.script = [ScriptedFault(.request(3), fault)]
        let simulator = try APNsSimulator(configuration)
        _ = try simulator.start()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops)
        let transport = APNsPushTransport(clients: [Self.app: [.sandbox: client]], policy: Self.quickRetries)
        let pushes = try (0..<5).map { try Self.push($0) }

        let results = await transport.deliverAll(pushes[...])

        #expect(results.map(\.status) == Array(repeating: .delivered, count: 5), "\(results.map(\.summary))")
        let retried = results.filter { $0.attempts.count > 1 }
        #expect(!retried.isEmpty, "the fault on request 3 must cost at least that push a second attempt")
        for result in retried {
            #expect(result.attempts.first?.httpStatus == nil, "lost with the connection, not answered")
            #expect(Set(result.attempts.map(\.apnsID)).count == result.attempts.count, "a fresh apns-id per attempt")
        }
        #expect(simulator.stats.connectionsAccepted >= 2, "the retries went out on a new connection")
        #expect(Set(simulator.accepted.map(\.deviceToken)) == Set(pushes.map(\.request.deviceToken?.hex)))
        await client.shutdown()
        await loops.shutdown()
    }

    @Test func deliverAllSendsEveryFirstAttemptAtOnceAndReturnsResultsInOrder() async throws {
        var configuration = SimulatorConfiguration()
        configuration.faults.latency = LatencyDistribution(fixedMilliseconds: 300)
        // The second request the simulator sees gets a 503: one push retries, with a fresh apns-id.
        configuration.faults.script = [ScriptedFault(.request(2), .fail(.serviceUnavailable()))]
        configuration.devices.unregistered = [Self.token(3): 1_764_417_600_000]
        let simulator = try APNsSimulator(configuration)
        _ = try simulator.start()
        defer { simulator.stop() }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try Self.client(simulator, loops: loops)
        // Each result's first apns-id (nil for the push without a credential, which sent nothing).
        let observed = Mutex<[APNsID?]>([])
        let transport = APNsPushTransport(
            clients: [Self.app: [.sandbox: client]],
            policy: RetryPolicy(
                maximumAttempts: 3,
                backoff: ExponentialBackoff(
                    initial: .milliseconds(10),
                    maximum: .milliseconds(10))),
            observe: { result in observed.withLock { $0.append(result.attempts.first?.apnsID) } })
        let pushes = try (0..<6).map { try Self.push($0) } + [try Self.push(6, app: "com.example.unknown")]

        let results = await transport.deliverAll(pushes[...])

        #expect(results.count == pushes.count)
        // All six first attempts were open on the one connection at once (each waits 300 ms for its
        // answer); sent one after another, at most one would be.
        let peak = simulator.stats.peakConcurrentStreams.values.max() ?? 0
        #expect(peak == 6, "at most \(peak) streams were open at once")
        for (index, result) in results.enumerated().prefix(6) {
            #expect(result.attempts.first?.apnsID == pushes[index].request.apnsID, "push \(index)")
        }
        #expect(results[3].status == .rejected)
        #expect(results[3].response?.reason == .unregistered)
        let retried = results.enumerated().filter { $0.element.attempts.count == 2 }
        #expect(retried.count == 1)
        if let (_, result) = retried.first {
            #expect(result.status == .delivered)
            #expect(result.attempts.map(\.httpStatus) == [503, 200])
            #expect(result.attempts[0].apnsID != result.attempts[1].apnsID)
        }
        #expect(results.filter { $0.status == .delivered }.count == 5)
        #expect(results[6].status == .failed && results[6].summary.contains("no credential"))
        #expect(
            observed.withLock { $0 } == pushes.prefix(6).map(\.request.apnsID) + [nil],
            "every push's result observed once, in order")
        let accepted = simulator.accepted.map(\.apnsID)
        #expect(Set(accepted).count == 5, "five notifications accepted, each once")
        await client.shutdown()
        await loops.shutdown()
    }
}

/// A weak reference a test can hand around: whether what it names is still alive.
final class WeakReference<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
}
