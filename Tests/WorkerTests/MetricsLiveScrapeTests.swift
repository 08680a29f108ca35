// A live scrape checked by promtool, and the label folding that keeps metric families bounded.

import Foundation
import TestSupport
import Testing

@testable import Worker

/// The worker's metric set served by the real server, scraped over a socket and checked by Prometheus' promtool.
@Suite struct MetricsLiveScrapeTests {
    static func populatedMetrics() throws -> WorkerMetrics {
        let metrics = try WorkerMetrics()
        metrics.recordsConsumed.labels("push.requests").increment(by: 12)
        metrics.countRequest(pushType: "alert", httpStatus: 200, reason: nil)
        metrics.countRequest(pushType: "alert", httpStatus: 410, reason: "Unregistered")
        metrics.countRequest(pushType: "voip", httpStatus: nil, reason: "requestTimeout")
        metrics.retries.labels(WorkerMetrics.reasonLabel("TooManyRequests")).increment()
        metrics.outcomes.labels("delivered").increment(by: 10)
        metrics.deadLetters.labels("undecodable").increment()
        metrics.invalidTokens.labels("Unregistered").increment()
        metrics.ruleMatches.labels("chat-message").increment(by: 11)
        metrics.rulesReloads.labels("success").increment()
        metrics.requestsInFlight.set(3)
        metrics.recordsInFlight.set(7)
        metrics.partitionsPaused.set(1)
        metrics.consumerLag.labels("push.requests", "0").set(42)
        metrics.connectionsOpen.labels("production/chat-token").set(2)
        metrics.requestsQueued.set(5)
        metrics.providerTokenAge.labels("chat-token").set(125.5)
        metrics.certificateExpiry.labels("legacy-cert").set(1_798_761_600)
        metrics.apnsResponseDuration.labels("production").observe(.milliseconds(23))
        metrics.eventToOutcome.labels("delivered").observe(0.4)
        return metrics
    }

    @Test func liveScrapePassesPromtoolCheckMetrics() async throws {
        let metrics = try Self.populatedMetrics()
        let server = try ObservabilityServer(
            listen: ListenAddress(host: "127.0.0.1", port: 0), metrics: metrics.registry, liveness: Liveness(),
            readiness: Readiness())
        defer { server.stop() }
        #expect(server.port != 0)

        let response = try await TestHTTPClient.request("/metrics", port: server.port)
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        let text = response.text
        for family in [
            "records_consumed_total", "apns_requests_total", "retries_total", "outcomes_total",
            "dead_letters_total", "invalid_tokens_total", "rule_matches_total", "rules_reloads_total",
            "apns_requests_in_flight", "records_in_flight", "partitions_paused", "consumer_lag_records",
            "apns_connections_open", "apns_connections_connecting", "provider_token_age_seconds",
            "certificate_expiry_timestamp_seconds",
            "apns_response_duration_seconds", "event_to_outcome_seconds", "apns_requests_queued", "build_info",
            "apns_devices_throttled",
        ] {
            #expect(text.contains("# TYPE apns_worker_\(family) "), "missing \(family)")
        }
        #expect(
            text.contains(
                #"apns_worker_apns_requests_total{push_type="voip",status="none",reason="requestTimeout"} 1"#))
        #expect(
            text.contains(
                #"apns_worker_apns_response_duration_seconds_bucket{environment="production",le="0.025"} 1"#))

        let check = try await Promtool.checkMetrics(response.body)
        #expect(check.status == 0, "promtool: \(check.output)")
        #expect(check.output.isEmpty, "promtool: \(check.output)")
    }

    /// Guards the check above against passing vacuously: promtool must object to a counter named like a gauge.
    @Test func promtoolRejectsAnExpositionThatBreaksTheConventions() async throws {
        let broken = """
            # HELP demo_sent Sent.
            # TYPE demo_sent counter
            demo_sent 1

            """
        let check = try await Promtool.checkMetrics(Array(broken.utf8))
        #expect(check.status != 0)
        #expect(check.output.contains("_total"))
    }
}

@Suite struct MetricsWorkerSetTests {
    @Test func foldsUnboundedLabelValuesIntoOther() {
        #expect(WorkerMetrics.pushTypeLabel("liveactivity") == "liveactivity")
        #expect(WorkerMetrics.pushTypeLabel("a1b2c3d4") == "other")
        #expect(WorkerMetrics.reasonLabel("Unregistered") == "Unregistered")
        #expect(WorkerMetrics.reasonLabel(nil) == "none")
        #expect(WorkerMetrics.reasonLabel("") == "none")
        #expect(WorkerMetrics.reasonLabel("SomethingApple2030Adds") == "other")
        #expect(WorkerMetrics.statusLabel(503) == "503")
        #expect(WorkerMetrics.statusLabel(nil) == "none")
        #expect(WorkerMetrics.statusLabel(1234) == "other")
    }

    @Test func countRequestUsesFoldedLabels() throws {
        let metrics = try WorkerMetrics()
        metrics.countRequest(pushType: "bogus", httpStatus: 400, reason: "<device token here>")
        #expect(metrics.apnsRequests.labels("other", "400", "other").value == 1)
        #expect(metrics.apnsRequests.labelSetCount == 1)
    }

    @Test func everySeriesCarriesThePrefixAndRegisteringTwiceOnOneRegistryFails() throws {
        let metrics = try WorkerMetrics()
        let text = String(decoding: metrics.registry.exposition(), as: UTF8.self)
        let names = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(!names.isEmpty)
        #expect(names.allSatisfy { $0.hasPrefix(WorkerMetrics.prefix) })
        #expect(throws: MetricsRegistryError.self) { try WorkerMetrics(registry: metrics.registry) }
    }
}

/// Runs Prometheus' promtool, taken from Debian's package by `scripts/setup.sh --test`.
enum Promtool {
    static func path() throws -> String {
        if let path = ProcessInfo.processInfo.environment["PROMTOOL"] { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = root.appendingPathComponent(".cache/promtool/promtool").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestHTTPError(
                description: "promtool not found at \(path): run scripts/setup.sh --test (or set PROMTOOL)")
        }
        return path
    }

    /// `promtool check metrics` on `exposition`; its exit status and what it printed.
    static func checkMetrics(_ exposition: [UInt8]) async throws -> (status: Int32, output: String) {
        let executable = try path()
        return try await TestHTTPClient.offPool {
            let result = try runProcessCapturing(
                executable, ["check", "metrics"], input: exposition, mergingErrors: true)
            return (result.status, result.outputText)
        }
    }
}
