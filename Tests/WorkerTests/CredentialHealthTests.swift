// A credential APNs refuses is logged once, shown in /readyz and the gauge, and restored once it works.

import APNs
import Foundation
import Testing

@testable import Worker

@Suite struct CredentialHealthTests {
    static func attempt(_ status: Int, _ reason: String?) -> DeliveryAttempt {
        DeliveryAttempt(
            apnsID: .random(), httpStatus: status, reason: reason, errorMessage: nil, startedAt: Date(),
            latency: .milliseconds(3))
    }

    @Test func aRefusedCredentialIsLoggedOnceShownAndRestoredWhenAPushIsAccepted() throws {
        let captured = CapturedLog()
        let writer = LogWriter(output: captured.output, startsWriterThread: false)
        let readiness = Readiness(conditions: [Readiness.Condition.credentials])
        readiness.setReady(Readiness.Condition.credentials)
        let health = CredentialHealth(logger: Logger(writer: writer), readiness: readiness)

        for _ in 0..<50 { health.observe(pool: "production/key-a", Self.attempt(200, nil)) }
        health.observe(pool: "production/key-a", Self.attempt(410, "Unregistered"))
        health.observe(pool: "production/key-a", Self.attempt(403, "Forbidden"))
        #expect(readiness.isReady, "answers about a push say nothing of the credential")

        for _ in 0..<20 { health.observe(pool: "production/key-a", Self.attempt(403, "InvalidProviderToken")) }
        health.observe(pool: "production/key-b", Self.attempt(200, nil))
        #expect(!readiness.isReady)
        #expect(health.refusedPools == 1)
        let report = readiness.report().body
        #expect(report.compactString.contains("production/key-a: InvalidProviderToken"))

        health.observe(pool: "production/key-a", Self.attempt(200, nil))
        #expect(readiness.isReady)
        #expect(health.refusedPools == 0)
        writer.flush()
        let messages = try captured.lines().compactMap { $0["message"]?.stringValue }
        #expect(
            messages.filter { $0.contains("refuses the credential of pool production/key-a") }.count == 1,
            "once per change, not per push: \(messages)")
        #expect(messages.filter { $0.contains("accepts the credential of pool production/key-a again") }.count == 1)
    }
}
