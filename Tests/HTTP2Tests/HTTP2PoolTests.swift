// Behaviour of the HTTP/2 connection pool against the scriptable test server, through real TLS on loopback.

import ChildProcesses
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import HTTP2

@Suite("HTTP/2 pool against the test server", .serialized)
struct HTTP2PoolTests {
    static let group = EventLoopGroup(threadCount: 2)

    func makePool(
        _ server: HTTP2TestServer, _ adjust: (inout ConnectionPool.Configuration) -> Void = { _ in }
    ) throws -> ConnectionPool {
        try makeTestPool(server, group: Self.group, adjust)
    }

    @Test func postReturnsStatusHeadersAndBodyAndServerSeesRequest() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            .respond(
                status: 201, headers: [("x-echo-path", request.path), ("x-body-bytes", "\(request.body.count)")],
                body: Array("reply to \(request.method)".utf8))
        }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let body = [UInt8](repeating: 0x61, count: 40_000)
        let response = try await pool.send(
            HTTP2Request(
                method: "POST", path: "/3/device/abc",
                headers: [HTTP2Header("apns-topic", "com.example")], body: body))
        #expect(response.status == 201)
        #expect(response.header("x-echo-path") == "/3/device/abc")
        #expect(response.header("X-Body-Bytes") == "40000")
        #expect(String(decoding: response.body, as: UTF8.self) == "reply to POST")
        let empty = try await pool.send(HTTP2Request(method: "GET", path: "/empty"))
        #expect(empty.status == 201)
        #expect(server.snapshot.connections == 1)
        #expect(server.snapshot.requests == 2)
        await pool.shutdown()
        await server.stop()
    }

    @Test func concurrentStreamsNeverExceedTheServersLimit() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 3
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(30)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let statuses = try await sendConcurrently(pool, count: 30)
        #expect(statuses == Array(repeating: 200, count: 30))
        let counters = server.snapshot
        #expect(counters.maximumActiveStreams == 3, "the pool should use, and never exceed, the 3 allowed streams")
        #expect(counters.limitViolations == 0)
        await pool.shutdown()
        await server.stop()
    }

    @Test func loweredLimitMidConnectionIsHonouredDownToOne() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 10
        options.lowerLimit = (afterRequests: 5, to: 1)
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(15)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        // Streams sent before the client saw the new SETTINGS may be refused (nghttp2 servers do so);
        // they must come back as `.unprocessed`, and every stream opened after the ACK must fit the limit.
        let outcomes = await sendConcurrentlyCollecting(pool, count: 40)
        let refused = outcomes.filter { ($0 as? HTTP2ClientError)?.code == .unprocessed }.count
        let succeeded = outcomes.filter { $0 == nil }.count
        #expect(succeeded + refused == 40, "only refusals are acceptable failures: \(outcomes.compactMap { $0 })")
        let statuses = try await sendConcurrently(pool, count: refused)
        #expect(statuses.allSatisfy { $0 == 200 })
        let counters = server.snapshot
        #expect(counters.limitViolations == 0, "no stream may open while the lowered limit is reached")
        #expect(counters.maximumActiveStreams >= 5, "before the change the pool should have used several streams")
        #expect(counters.connections == 1)
        await pool.shutdown()
        await server.stop()
    }

    @Test func goawayHandsBackStreamsAboveLastStreamIDAndNewRequestsUseANewConnection() async throws {
        var options = HTTP2TestServer.Options()
        options.goaway = (afterRequests: 10, lastProcessed: 4)
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let outcomes = await withTaskGroup(of: Result<Int, any Error>.self) { group in
            for index in 0..<10 {
                group.addTask {
                    do {
                        return .success(try await pool.send(HTTP2Request(path: "/n/\(index)")).status)
                    } catch {
                        return .failure(error)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let successes = outcomes.filter { if case .success(200) = $0 { true } else { false } }.count
        let unprocessed = outcomes.filter {
            if case .failure(let error as HTTP2ClientError) = $0 { error.code == .unprocessed } else { false }
        }
        #expect(successes == 4)
        #expect(unprocessed.count == 6)
        if case .failure(let error as HTTP2ClientError) = unprocessed.first {
            #expect(error.message.contains("GOAWAY"))
            #expect(error.requestWasNotProcessed)
        }
        #expect(server.snapshot.requests == 4)
        let retry = try await pool.send(HTTP2Request(path: "/retry"))
        #expect(retry.status == 200)
        #expect(server.snapshot.connections == 2)
        await pool.shutdown()
        await server.stop()
    }

    @Test func stalledRequestTimesOutAndItsStreamIsReset() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            request.path == "/stall" ? .stall : .respond(status: 200, delay: .milliseconds(50))
        }
        let server = try HTTP2TestServer(options: options)
        // The timeout makes the connection ask with a PING whether it is alive; it answers, so it stays.
        let pool = try makePool(server) { $0.pingTimeout = .milliseconds(100) }
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTP2ClientError.self) {
            try await pool.send(HTTP2Request(path: "/stall"), timeout: .milliseconds(300))
        }
        #expect(error?.code == .requestTimeout)
        #expect(ContinuousClock.now - started >= .milliseconds(300), "not before the request's own timeout")
        #expect(await eventually { server.snapshot.resetsReceived == 1 })
        // The connection stays usable for other requests, past the PING's timeout.
        for _ in 0..<6 { #expect(try await pool.send(HTTP2Request(path: "/next")).status == 200) }
        #expect(server.snapshot.connections == 1)
        await pool.shutdown()
        await server.stop()
    }

    @Test func cancellingTheCallerResetsTheStream() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .stall }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let task = Task { try await pool.send(HTTP2Request(path: "/stall")) }
        #expect(await eventually { server.snapshot.requests == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(await eventually { server.snapshot.resetsReceived == 1 })
        #expect(await eventually { pool.statistics.streamsInFlight == 0 })
        await pool.shutdown()
        await server.stop()
    }

    /// How a silent connection is found dead: the idle PING, after `pingInterval` without a read; or, on a
    /// path that went dark while requests were out (no RST, no FIN), the PING a request's timeout sends at
    /// once, where the idle one would ask only after a minute.
    enum SilenceFinder: CaseIterable, Sendable {
        case idlePing, requestTimeout
    }

    @Test(arguments: SilenceFinder.allCases)
    func silentConnectionIsFoundDeadByPingAndReplaced(by finder: SilenceFinder) async throws {
        var options = HTTP2TestServer.Options()
        options.silentConnections = [1]
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server) {
            $0.pingInterval = finder == .idlePing ? .milliseconds(200) : .seconds(600)
            $0.pingTimeout = .milliseconds(300)
            $0.requestTimeout = finder == .idlePing ? .seconds(10) : .milliseconds(200)
        }
        let error = await #expect(throws: HTTP2ClientError.self) {
            try await pool.send(HTTP2Request(path: "/lost"))
        }
        switch finder {
        case .idlePing:
            // Found dead by the PING, not by the request's 10 s timeout (that would be `.requestTimeout`).
            #expect(error?.code == .connectionClosed)
            #expect(error?.message.contains("PING") == true)
        case .requestTimeout:
            #expect(error?.code == .requestTimeout)
            // Closed within the PING's timeout, and replaced by the pool before any other request asked.
            #expect(await eventually { server.snapshot.connections == 2 }, "the silent connection was not replaced")
        }
        let response = try await pool.send(HTTP2Request(path: "/next"))
        #expect(response.status == 200)
        #expect(server.snapshot.connections == 2)
        await pool.shutdown()
        await server.stop()
    }

    @Test func restartedServerIsReconnected() async throws {
        let first = try HTTP2TestServer()
        let port = first.port
        let pool = try makePool(first) {
            $0.reconnectBackoff = ExponentialBackoff(
                initial: .milliseconds(50),
                maximum: .milliseconds(200))
        }
        #expect(try await pool.send(HTTP2Request(path: "/before")).status == 200)
        await first.stop()
        #expect(await eventually { pool.statistics.readyConnections == 0 }, "the pool should notice the close")
        let second = try HTTP2TestServer(certificate: first.certificate, port: port)
        var status = 0
        var unexpected: [any Error] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while status == 0, ContinuousClock.now < deadline {
            do {
                status = try await pool.send(HTTP2Request(path: "/after")).status
            } catch let error as HTTP2ClientError where error.requestWasNotProcessed {
                try await Task.sleep(for: .milliseconds(50))
            } catch {
                unexpected.append(error)
            }
        }
        #expect(status == 200)
        #expect(unexpected.isEmpty)
        #expect(second.snapshot.requests == 1)
        await pool.shutdown()
        await second.stop()
    }

    @Test func oversizedResponseBodyIsRefused() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .respond(status: 200, body: [UInt8](repeating: 1, count: 100_000)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server) { $0.maximumResponseBodyBytes = 65_536 }
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .responseTooLarge)
        await pool.shutdown()
        await server.stop()
    }

    @Test func streamsOfADrainingConnectionStillCountAsInFlight() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            request.path == "/slow" ? .respond(status: 200, delay: .milliseconds(400)) : .respond(status: 200)
        }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let first = try await pool.send(HTTP2Request(path: "/first"))
        let slow = Task { try await pool.send(HTTP2Request(path: "/slow")) }
        #expect(await eventually { pool.statistics.streamsInFlight == 1 })
        pool.retireConnection(id: first.connectionID)
        let statistics = pool.statistics
        #expect(statistics.drainingConnections == 1)
        #expect(statistics.streamsInFlight == 1, "the retired connection's stream is still in flight")
        #expect(try await slow.value.status == 200)
        #expect(await eventually { pool.statistics.streamsInFlight == 0 })
        await pool.shutdown()
        await server.stop()
    }

    @Test func fullWaitQueueFailsAtOnceWithPoolSaturated() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 1
        options.reply = { _ in .stall }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server) { $0.maximumQueuedRequests = 2 }
        var tasks = [Task { try await pool.send(HTTP2Request(path: "/first")) }]
        #expect(await eventually { pool.statistics.streamsInFlight == 1 })
        tasks += (0..<2).map { index in Task { try await pool.send(HTTP2Request(path: "/\(index)")) } }
        #expect(
            await eventually {
                let statistics = pool.statistics
                return statistics.streamsInFlight == 1 && statistics.queuedRequests == 2
            })
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/x")) }
        // Refused on arrival (a queued request would expire with "no free stream within ...") while the
        // queue still holds the two others.
        #expect(error?.code == .poolSaturated)
        #expect(error?.message.contains("already waiting") == true)
        #expect(pool.statistics.queuedRequests == 2)
        for task in tasks { task.cancel() }
        for task in tasks { _ = try? await task.value }
        #expect(await eventually { pool.statistics.queuedRequests == 0 && pool.statistics.streamsInFlight == 0 })
        await pool.shutdown()
        await server.stop()
    }

    @Test func queuedRequestTimesOutWithoutBeingSent() async throws {
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 1
        options.reply = { _ in .stall }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let blocker = Task { try await pool.send(HTTP2Request(path: "/blocker")) }
        #expect(await eventually { server.snapshot.requests == 1 })
        let error = await #expect(throws: HTTP2ClientError.self) {
            try await pool.send(HTTP2Request(path: "/queued"), timeout: .milliseconds(250))
        }
        // The pool's own limit, not a failure of the request: callers may send it again uncounted.
        #expect(error?.code == .poolSaturated)
        #expect(error?.message.contains("not sent") == true)
        #expect(server.snapshot.requests == 1)
        blocker.cancel()
        _ = try? await blocker.value
        await pool.shutdown()
        await server.stop()
    }

    @Test func timeSpentInThePoolsQueueIsNotChargedToTheServer() async throws {
        // One stream: the second request waits in the queue while the first is answered (1.2 s), then is
        // answered in 1.2 s itself, inside its own 2 s timeout. Measured from when it was queued, it would
        // time out (2.4 s) as if the server had not answered: an attempt spent and a fault counted against
        // a pool whose only fault was being busy.
        var options = HTTP2TestServer.Options()
        options.maximumConcurrentStreams = 1
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(1200)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server) { $0.requestTimeout = .seconds(2) }
        let first = Task { try await pool.send(HTTP2Request(path: "/first")) }
        #expect(await eventually { server.snapshot.requests == 1 })
        let second = Task { try await pool.send(HTTP2Request(path: "/second")) }
        #expect(await eventually { pool.statistics.queuedRequests == 1 }, "the second request never queued")
        #expect(try await first.value.status == 200)
        #expect(try await second.value.status == 200)
        #expect(server.snapshot.connections == 1)
        await pool.shutdown()
        await server.stop()
    }

    @Test func requestsSpreadOverAllConnections() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(50)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server) { $0.connectionCount = 3 }
        _ = try await pool.send(HTTP2Request(path: "/warm-up"))
        #expect(await eventually { pool.statistics.readyConnections == 3 })
        let statuses = try await sendConcurrently(pool, count: 30)
        #expect(statuses.allSatisfy { $0 == 200 })
        let perConnection = server.snapshot.requestsPerConnection
        #expect(perConnection.count == 3)
        #expect(perConnection.values.allSatisfy { $0 >= 8 }, "least-loaded dispatch: \(perConnection)")
        await pool.shutdown()
        await server.stop()
    }

    @Test func shutdownLetsOpenStreamsFinishThenRefusesRequests() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .respond(status: 200, delay: .milliseconds(200)) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let inFlight = Task { try await pool.send(HTTP2Request(path: "/slow")) }
        #expect(await eventually { server.snapshot.requests == 1 })
        await pool.shutdown(gracePeriod: .seconds(3))
        #expect(try await inFlight.value.status == 200)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .poolShutDown)
        await server.stop()
    }

    @Test func startCallsItsHandlerOnceWithTheResponseOrAtOnceOnAShutDownPool() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            .respond(status: request.path.hasPrefix("/missing") ? 404 : 200, body: Array("ok".utf8))
        }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let calls = Mutex<[String: [Int]]>([:])
        let paths = (0..<20).map { "/\($0 % 5 == 0 ? "missing" : "found")/\($0)" }
        let allAnswered = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let remaining = Atomic<Int>(paths.count)
            for path in paths {
                pool.start(HTTP2Request(path: path)) { result in
                    calls.withLock { $0[path, default: []].append((try? result.get().status) ?? -1) }
                    if remaining.wrappingSubtract(1, ordering: .relaxed).newValue == 0 {
                        continuation.resume(returning: true)
                    }
                }
            }
        }
        #expect(allAnswered)
        // Once the pool has shut down no connection is left to call a handler a second time.
        await pool.shutdown()
        let answers = calls.withLock { $0 }
        #expect(answers.count == paths.count)
        for path in paths {
            #expect(answers[path] == [path.hasPrefix("/missing") ? 404 : 200], "\(path)")
        }
        // A pool that takes no more requests answers before `start` returns.
        let refused = Mutex<(any Error)?>(nil)
        pool.start(HTTP2Request(path: "/late")) { result in
            if case .failure(let error) = result { refused.withLock { $0 = error } }
        }
        let error = try #require(refused.withLock { $0 } as? HTTP2ClientError)
        #expect(error.code == .poolShutDown)
        await server.stop()
    }

    @Test func serverResetsAreReportedWithTheirCode() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in request.path == "/refuse" ? .reset(7) : .reset(2) }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let reset = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/x")) }
        #expect(reset?.code == .streamReset)
        #expect(reset?.message.contains("INTERNAL_ERROR") == true)
        let refused = await #expect(throws: HTTP2ClientError.self) {
            try await pool.send(HTTP2Request(path: "/refuse"))
        }
        #expect(refused?.code == .unprocessed)
        await pool.shutdown()
        await server.stop()
    }

    @Test func connectionRetiresAfterItsStreamBudgetAndIsReplaced() async throws {
        let server = try HTTP2TestServer()
        let pool = try makePool(server) { $0.maximumStreamsPerConnection = 3 }
        for index in 0..<7 {
            #expect(try await pool.send(HTTP2Request(path: "/\(index)")).status == 200)
        }
        #expect(server.snapshot.connections == 3)
        await pool.shutdown()
        await server.stop()
    }

    /// Sends `count` requests at once; nil for a 200, the error otherwise.
    private func sendConcurrentlyCollecting(_ pool: ConnectionPool, count: Int) async -> [(any Error)?] {
        await withTaskGroup(of: (any Error)?.self) { group in
            for index in 0..<count {
                group.addTask {
                    do {
                        let status = try await pool.send(HTTP2Request(path: "/item/\(index)")).status
                        return status == 200 ? nil : TestFailure("status \(status)")
                    } catch {
                        return error
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    private func sendConcurrently(_ pool: ConnectionPool, count: Int) async throws -> [Int] {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask { try await pool.send(HTTP2Request(path: "/item/\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }
}
