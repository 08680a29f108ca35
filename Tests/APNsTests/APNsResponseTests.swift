// Apple's answers: every error reason with its status and class, and responses parsed from status,
// headers and body.

import APNs
import Foundation
import JSON
import Testing

@Suite struct ErrorReasonTests {
    static let table: [(String, Int, APNsReasonClass)] = [
        ("BadCollapseId", 400, .permanent),
        ("BadDeviceToken", 400, .invalidToken),
        ("BadExpirationDate", 400, .permanent),
        ("BadMessageId", 400, .permanent),
        ("BadPriority", 400, .permanent),
        ("BadTopic", 400, .permanent),
        ("DeviceTokenNotForTopic", 400, .invalidToken),
        ("DuplicateHeaders", 400, .permanent),
        ("IdleTimeout", 400, .retryOnNewConnection),
        ("InvalidPushType", 400, .permanent),
        ("MissingDeviceToken", 400, .permanent),
        ("MissingTopic", 400, .permanent),
        ("PayloadEmpty", 400, .permanent),
        ("TopicDisallowed", 400, .permanent),
        ("BadCertificate", 403, .badCredential),
        ("BadCertificateEnvironment", 403, .badCredential),
        ("ExpiredProviderToken", 403, .refreshProviderToken),
        ("Forbidden", 403, .permanent),
        ("InvalidProviderToken", 403, .badCredential),
        ("MissingProviderToken", 403, .badCredential),
        ("UnrelatedKeyIdInToken", 403, .retryOnNewConnection),
        ("BadEnvironmentKeyIdInToken", 403, .badCredential),
        ("BadPath", 404, .permanent),
        ("MethodNotAllowed", 405, .permanent),
        ("ExpiredToken", 410, .invalidToken),
        ("Unregistered", 410, .invalidToken),
        ("PayloadTooLarge", 413, .permanent),
        ("TooManyProviderTokenUpdates", 429, .retryWithBackoff),
        ("TooManyRequests", 429, .retryWithBackoff),
        ("InternalServerError", 500, .retryWithBackoff),
        ("ServiceUnavailable", 503, .retryWithBackoff),
        ("Shutdown", 503, .retryOnNewConnection),
        ("MissingChannelId", 400, .permanent),
        ("BadChannelId", 400, .permanent),
        ("ChannelNotRegistered", 400, .permanent),
        ("CannotCreateChannelConfig", 400, .permanent),
        ("FeatureNotEnabled", 400, .permanent),
    ]

    @Test func everyReasonInApplesTableHasItsStatusAndClass() {
        #expect(APNsErrorReason.allKnown.map(\.rawValue) == Self.table.map(\.0))
        for (name, status, reasonClass) in Self.table {
            let reason = APNsErrorReason(name)
            #expect(reason.rawValue == name)
            #expect(reason.httpStatus == status, "\(name)")
            #expect(reason.knownClass == reasonClass, "\(name)")
            // A known reason keeps its class whatever status it arrives with.
            #expect(reason.reasonClass(status: 500) == reasonClass, "\(name)")
            if case .unknown = reason { Issue.record("\(name) parsed as unknown") }
        }
    }

    @Test func unknownReasonsAreKeptAndClassedByStatus() {
        let reason = APNsErrorReason("QuantumEntanglementFailure")
        #expect(reason == .unknown("QuantumEntanglementFailure"))
        #expect(reason.rawValue == "QuantumEntanglementFailure")
        #expect(reason.httpStatus == nil)
        #expect(reason.knownClass == nil)
        #expect(reason.reasonClass(status: 500) == .retryWithBackoff)
        #expect(reason.reasonClass(status: 502) == .retryWithBackoff)
        #expect(reason.reasonClass(status: 599) == .retryWithBackoff)
        #expect(reason.reasonClass(status: 429) == .retryWithBackoff)
        #expect(reason.reasonClass(status: 400) == .permanent)
        #expect(reason.reasonClass(status: 403) == .permanent)
        #expect(reason.reasonClass(status: 410) == .permanent)
    }

    @Test func reasonsAreCaseSensitiveAsApnsSendsThem() {
        #expect(APNsErrorReason("unregistered") == .unknown("unregistered"))
    }

    @Test func onlyMalformedRequestReasonsAreClientBugs() {
        let bugs = APNsErrorReason.allKnown.filter(\.isClientBug).map(\.rawValue)
        #expect(
            bugs == [
                "BadMessageId", "DuplicateHeaders", "MissingDeviceToken", "PayloadEmpty", "BadPath",
                "MethodNotAllowed", "MissingChannelId",
            ])
    }
}

@Suite struct ResponseParsingTests {
    @Test func acceptedResponseCarriesTheIDs() {
        let response = APNsResponse(
            status: 200,
            headers: [
                APNsHeaderField("apns-id", "123E4567-E89B-42D3-A456-426614174000"),
                APNsHeaderField("apns-unique-id", "a8f0c1b2-0000-4000-8000-000000000001"),
            ],
            body: [UInt8]())
        #expect(response.isAccepted)
        #expect(response.apnsID == Sample.apnsID)
        #expect(response.apnsUniqueID == "a8f0c1b2-0000-4000-8000-000000000001")
        #expect(response.reason == nil)
        #expect(response.reasonClass == nil)
        #expect(response.timestamp == nil)
    }

    @Test func aUniqueIDIsWrittenBackExactlyAsItCameWhateverItsForm() {
        // A canonical lowercase UUID (as APNs sends it) is kept as 16 bytes; anything else as its text.
        for text in [
            "a8f0c1b2-0000-4000-8000-000000000001", "A8F0C1B2-0000-4000-8000-000000000001", "not-a-uuid", "",
        ] {
            let id = APNsUniqueID(text)
            #expect(id.description == text)
            var writer = JSONObjectWriter()
            writer.apnsUniqueID("apns_unique_id", id)
            #expect(String(decoding: writer.finish(), as: UTF8.self) == #"{"apns_unique_id":""# + text + #""}"#)
        }
        var writer = JSONObjectWriter()
        writer.apnsUniqueID("apns_unique_id", nil)
        #expect(String(decoding: writer.finish(), as: UTF8.self) == #"{"apns_unique_id":null}"#)
    }

    @Test func errorBodyGivesTheReasonAndItsClass() {
        let response = APNsResponse(
            status: 400, headers: [APNsHeaderField("apns-id", Sample.apnsID.string)],
            body: Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        #expect(!response.isAccepted)
        #expect(response.reason == .badDeviceToken)
        #expect(response.reasonClass == .invalidToken)
        #expect(response.timestampMilliseconds == nil)
    }

    @Test func goneResponseCarriesTheTimeTheTokenDied() throws {
        let response = APNsResponse(
            status: 410, headers: [APNsHeaderField](),
            body: Array(#"{"reason":"Unregistered","timestamp":1764417600123}"#.utf8))
        #expect(response.reason == .unregistered)
        #expect(response.reasonClass == .invalidToken)
        #expect(response.timestampMilliseconds == 1_764_417_600_123)
        let timestamp = try #require(response.timestamp)
        #expect(abs(timestamp.timeIntervalSince1970 - 1_764_417_600.123) < 0.0005)
    }

    @Test func unknownReasonIsKeptAndClassedByStatus() {
        let response = APNsResponse(
            status: 503, headers: [APNsHeaderField](),
            body: Array(#"{"reason":"NewThing"}"#.utf8))
        #expect(response.reason == .unknown("NewThing"))
        #expect(response.reasonClass == .retryWithBackoff)
    }

    @Test func unreadableBodyLeavesTheStatusToDecide() {
        for body in ["", "<html>502</html>", #"{"reason":5}"#] {
            let gateway = APNsResponse(status: 502, headers: [APNsHeaderField](), body: Array(body.utf8))
            #expect(gateway.reason == nil)
            #expect(gateway.reasonClass == .retryWithBackoff)
            let bad = APNsResponse(status: 400, headers: [APNsHeaderField](), body: Array(body.utf8))
            #expect(bad.reasonClass == .permanent)
        }
    }

    @Test func headerNamesMatchInAnyCaseAndRetryAfterIsRead() {
        let response = APNsResponse(
            status: 429,
            headers: [APNsHeaderField("APNS-ID", Sample.apnsID.string), APNsHeaderField("Retry-After", "30")],
            body: Array(#"{"reason":"TooManyRequests"}"#.utf8))
        #expect(response.apnsID == Sample.apnsID)
        #expect(response.retryAfterSeconds == 30)
        #expect(response.reasonClass == .retryWithBackoff)
        let dated = APNsResponse(
            status: 503, headers: [APNsHeaderField("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")], body: [UInt8]())
        #expect(dated.retryAfterSeconds == nil)
    }

    @Test func aMalformedApnsIDIsDroppedNotFatal() {
        let response = APNsResponse(status: 200, headers: [APNsHeaderField("apns-id", "garbage")], body: [UInt8]())
        #expect(response.apnsID == nil)
        #expect(response.isAccepted)
    }
}
