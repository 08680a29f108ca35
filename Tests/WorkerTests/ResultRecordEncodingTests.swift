// Outcome records are written straight to bytes on the hot path; the value tree (`json`) is what the
// schema tests and `dev` read. The two must never drift apart.

import APNs
import Foundation
import JSON
import Testing

@testable import Worker

@Suite struct ResultRecordEncodingTests {
    static func attempt(_ status: Int?, _ reason: String?, started: Double, latency: Duration) -> DeliveryAttempt {
        DeliveryAttempt(
            apnsID: .random(), httpStatus: status, reason: reason, errorMessage: nil,
            startedAt: Date(timeIntervalSince1970: started), latency: latency)
    }

    static let records: [OutcomeRecord] = [
        OutcomeRecord(
            eventID: "evt-1", deviceToken: String(repeating: "ab", count: 32), environment: "production",
            topic: "com.example.app", pushType: "alert", ruleID: "chat", status: .delivered, httpStatus: 200,
            reason: nil, apnsID: try! APNsID(parsing: "5E5C7C5E-0D2B-4B6B-9E38-C7D1F8A1B001"), apnsUniqueID: "u-1",
            attempts: [
                attempt(503, "ServiceUnavailable", started: 1_795_953_600.0004, latency: .microseconds(12_345_678)),
                attempt(200, nil, started: 1_795_953_601.999, latency: .milliseconds(3)),
            ],
            source: RecordSource(topic: "push.requests", partition: 7, offset: 9_000_000_000),
            completedAt: 1_795_953_602.5),
        OutcomeRecord(
            eventID: "quote \" backslash \\ newline \n tab \t nul \u{0} é 🎉", deviceToken: "not hex <>",
            environment: "sandbox", topic: nil, pushType: nil, ruleID: nil, status: .skipped, httpStatus: nil,
            reason: "no_rule", apnsID: nil, apnsUniqueID: nil, attempts: [],
            source: RecordSource(topic: "t", partition: 0, offset: 0), completedAt: 0),
        OutcomeRecord(
            eventID: "e", deviceToken: "00", environment: "production", topic: "t", pushType: "voip", ruleID: "r",
            status: .failed, httpStatus: nil, reason: "requestTimeout", apnsID: nil, apnsUniqueID: nil,
            attempts: [attempt(nil, "requestTimeout", started: -1.5, latency: .seconds(30))],
            source: RecordSource(topic: "p", partition: -1, offset: -1), completedAt: 253_402_300_799.999),
        // A broadcast's outcome names its channel instead of a device token.
        OutcomeRecord(
            eventID: "evt-2", deviceToken: "", environment: "production",
            topic: "com.example.app.push-type.liveactivity",
            pushType: "liveactivity", ruleID: "score", status: .rejected, httpStatus: 400,
            reason: "ChannelNotRegistered", apnsID: nil, apnsUniqueID: nil, attempts: [],
            source: RecordSource(topic: "push.requests", partition: 0, offset: 1), completedAt: 1_795_953_602,
            channelID: "aMs2y8fFEe8AAPIAM4gHog=="),
    ]

    @Test(arguments: records.indices)
    func theDirectWriterGivesTheValueTreesBytes(index: Int) throws {
        let record = Self.records[index]
        let direct = record.jsonBytes
        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: record.json.compactBytes, as: UTF8.self))
        // And it is valid JSON, which our strict parser reads back to the same bytes.
        #expect(try JSONValue(parsing: direct).compactBytes == direct)
    }

    @Test func apnsIDsAreWrittenInTheirCanonicalLowercaseText() throws {
        let record = Self.records[0]
        let object = try JSONValue(parsing: record.jsonBytes)
        #expect(object["apns_id"]?.stringValue == "5e5c7c5e-0d2b-4b6b-9e38-c7d1f8a1b001")
        #expect(object["attempts"]?.arrayValue?[0]["apns_id"]?.stringValue == record.attempts[0].apnsID.string)
        #expect(object["attempts"]?.arrayValue?[1]["apns_id"]?.stringValue == record.attempts[1].apnsID.string)
        #expect(try JSONValue(parsing: Self.records[1].jsonBytes)["apns_id"]?.isNull == true)
    }

    @Test func timestampsAreRFC3339WithMilliseconds() {
        #expect(RFC3339.format(1_795_953_600.123) == "2026-11-29T12:00:00.123Z")
        #expect(RFC3339.format(0) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(-0.001) == "1969-12-31T23:59:59.999Z")
        #expect(RFC3339.format(253_402_300_799.999) == "9999-12-31T23:59:59.999Z")
        // Years beyond four digits are written in full, the rest of the text as ever.
        #expect(RFC3339.format(253_402_300_800) == "10000-01-01T00:00:00.000Z")
        #expect(RFC3339.format(-62_167_219_200.001) == "-1-12-31T23:59:59.999Z")
        #expect(RFC3339.format(wholeSeconds: 1_795_953_600) == "2026-11-29T12:00:00Z")
    }
}
