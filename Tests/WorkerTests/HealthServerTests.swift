// /healthz and /readyz: heartbeats, readiness reasons scrubbed of secrets, and what else the port refuses.

import APNs
import JSON
import Synchronization
import Testing

@testable import Worker

/// A monotonic clock the test moves by hand.
final class ManualClock: Sendable {
    private let nanoseconds = Atomic<UInt64>(1_000_000_000)
    func advance(_ duration: Duration) { nanoseconds.add(duration.nanosecondsClamped, ordering: .relaxed) }
    var read: MonotonicNanoseconds { { self.nanoseconds.load(ordering: .relaxed) } }
}

@Suite struct HealthServerTests {
    struct Fixture {
        let clock = ManualClock()
        let liveness: Liveness
        let readiness = Readiness(conditions: Readiness.Condition.all)
        let server: ObservabilityServer

        init() throws {
            liveness = Liveness(clock: clock.read)
            server = try ObservabilityServer(
                listen: ListenAddress(host: "127.0.0.1", port: 0), metrics: MetricsRegistry(), liveness: liveness,
                readiness: readiness)
        }

        func get(_ path: String) async throws -> (status: Int, body: JSONValue) {
            let response = try await TestHTTPClient.request(path, port: server.port)
            #expect(response.headers["content-type"] == "application/json")
            return (response.status, try JSONValue(parsing: response.body))
        }
    }

    @Test func healthzFollowsHeartbeatsThroughStallRecoveryAndRetirement() async throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        var (status, body) = try await fixture.get("/healthz")
        #expect(status == 200)
        #expect(body["status"] == "ok")

        let poll = fixture.liveness.register("kafka.poll", allowance: .seconds(30))
        let sender = fixture.liveness.register("apns.send", allowance: .seconds(60))
        fixture.clock.advance(.seconds(29))
        (status, body) = try await fixture.get("/healthz")
        #expect(status == 200)

        fixture.clock.advance(.seconds(2))
        (status, body) = try await fixture.get("/healthz")
        #expect(status == 503)
        #expect(body["status"] == "stalled")
        #expect(body["stalled"] == ["kafka.poll"])
        #expect(body["loops"]?.arrayValue?.first?["seconds_since_beat"]?.doubleValue == 31)

        poll.beat()
        (status, _) = try await fixture.get("/healthz")
        #expect(status == 200)

        fixture.clock.advance(.seconds(61))
        (status, body) = try await fixture.get("/healthz")
        #expect(status == 503)
        #expect(body["stalled"] == ["kafka.poll", "apns.send"])

        poll.retire()
        sender.retire()
        (status, body) = try await fixture.get("/healthz")
        #expect(status == 200)
        #expect(body["loops"] == [])
    }

    @Test func registeringALoopAgainReplacesItsStaleHeartbeat() async throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        _ = fixture.liveness.register("kafka.poll", allowance: .seconds(5))
        fixture.clock.advance(.seconds(10))
        #expect(!fixture.liveness.report().isPassing)
        _ = fixture.liveness.register("kafka.poll", allowance: .seconds(5))
        #expect(fixture.liveness.report().isPassing)
        #expect(fixture.liveness.report().body["loops"]?.arrayValue?.count == 1)
    }

    @Test func readyzNamesWhatIsNotReadyUntilEveryConditionHolds() async throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        var (status, body) = try await fixture.get("/readyz")
        #expect(status == 503)
        #expect(body["status"] == "not ready")
        #expect(body["not_ready"] == ["config", "credentials", "kafka.brokers", "kafka.group", "apns"])

        fixture.readiness.setReady(Readiness.Condition.config)
        fixture.readiness.setReady(Readiness.Condition.credentials)
        fixture.readiness.setReady(Readiness.Condition.kafkaBrokers)
        fixture.readiness.setReady(Readiness.Condition.consumerGroup)
        (status, body) = try await fixture.get("/readyz")
        #expect(status == 503)
        #expect(body["not_ready"] == ["apns"])

        fixture.readiness.setReady(Readiness.Condition.apns)
        (status, body) = try await fixture.get("/readyz")
        #expect(status == 200)
        #expect(body["status"] == "ready")

        fixture.readiness.setNotReady(Readiness.Condition.consumerGroup, reason: "rebalancing: partitions revoked")
        (status, body) = try await fixture.get("/readyz")
        #expect(status == 503)
        #expect(body["not_ready"] == ["kafka.group"])
        let group = body["conditions"]?.arrayValue?.first { $0["name"] == "kafka.group" }
        #expect(group?["reason"] == "rebalancing: partitions revoked")
    }

    @Test func readinessReasonsAreScrubbedOfSecrets() {
        let readiness = Readiness()
        let jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQyJ9.eyJpc3MiOiJURUFNIiwiaWF0IjoxfQ.c2lnbmF0dXJlc2lnbmF0dXJl"
        readiness.setNotReady("apns", reason: "403 InvalidProviderToken for bearer \(jwt)")
        let text = readiness.report().body.compactString
        #expect(!text.contains("eyJ"))
        #expect(text.contains("InvalidProviderToken"))
    }

    @Test func unknownPathsAndMethodsAreRefusedAndHeadHasNoBody() async throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let missing = try await TestHTTPClient.request("/admin", port: fixture.server.port)
        #expect(missing.status == 404)
        let post = try await TestHTTPClient.request("/metrics", method: "POST", port: fixture.server.port)
        #expect(post.status == 405)
        #expect(post.headers["allow"] == "GET, HEAD")
        let head = try await TestHTTPClient.request("/healthz", method: "HEAD", port: fixture.server.port)
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
    }

    @Test func portZeroGetsDistinctFreePortsAndATakenPortIsAClearError() throws {
        let first = try Fixture()
        let second = try Fixture()
        defer {
            first.server.stop()
            second.server.stop()
        }
        #expect(first.server.port != 0 && second.server.port != 0)
        #expect(first.server.port != second.server.port)
        #expect {
            _ = try ObservabilityServer(
                listen: ListenAddress(host: "127.0.0.1", port: first.server.port), metrics: MetricsRegistry(),
                liveness: Liveness(), readiness: Readiness())
        } throws: { error in
            let message = (error as? ObservabilityServerError)?.message ?? ""
            return message.contains("cannot listen on 127.0.0.1:\(first.server.port)") && message.contains("free port")
        }
    }

    @Test func stopClosesThePort() async throws {
        let fixture = try Fixture()
        let port = fixture.server.port
        fixture.server.stop()
        fixture.server.stop()
        await #expect(throws: TestHTTPError.self) { try await TestHTTPClient.request("/healthz", port: port) }
    }

    @Test func servesOnIPv6Loopback() throws {
        let server = try ObservabilityServer(
            listen: ListenAddress(parsing: "[::1]:0"), metrics: MetricsRegistry(), liveness: Liveness(),
            readiness: Readiness())
        defer { server.stop() }
        #expect(server.port != 0)
        #expect(server.address.description == "[::1]:\(server.port)")
    }

    @Test(arguments: [
        ("0.0.0.0:9090", "0.0.0.0:9090"), (":9090", "0.0.0.0:9090"), ("[::]:9090", "[::]:9090"),
        ("localhost:0", "127.0.0.1:0"), ("10.1.2.3:65535", "10.1.2.3:65535"),
    ])
    func parsesListenAddresses(text: String, expected: String) throws {
        #expect(try ListenAddress(parsing: text).description == expected)
    }

    @Test(arguments: [
        ("9090", "has no port"), ("0.0.0.0:99999", "not a number 0-65535"), ("::1:9090", "brackets"),
        ("[::1:9090", "unclosed"), ("metrics.local:9090", "not an IP address"), ("0.0.0.0:", "not a number"),
    ])
    func rejectsListenAddressesWithAReason(text: String, expected: String) {
        #expect {
            _ = try ListenAddress(parsing: text)
        } throws: { error in
            (error as? ListenAddressError)?.message.contains(expected) == true
        }
    }
}
