// What APNs answered to one request: status, ids, and for errors the reason and (410) the time
// the token stopped being valid.

import JSON

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// APNs' answer to one request.
///
/// Parsing never fails: a body that is not the JSON APNs documents leaves `reason` nil, and
/// `reasonClass` falls back on the HTTP status, so a sender can always decide what to do.
public struct APNsResponse: Sendable, Hashable {
    /// The HTTP status: 200 accepted, else an error.
    public var status: Int
    /// The `apns-id` header: the request's id echoed back (APNs answers in upper case; parsed either way).
    public var apnsID: APNsID?
    /// The `apns-unique-id` header (sandbox only), for looking the push up in Apple's delivery log.
    public var uniqueID: APNsUniqueID?
    /// `uniqueID`'s text.
    public var apnsUniqueID: String? {
        get { uniqueID?.description }
        set { uniqueID = newValue.map(APNsUniqueID.init) }
    }
    /// The error reason from the body; nil on success or when the body held none.
    public var reason: APNsErrorReason?
    /// For 410: when APNs learned the token was no longer valid, in milliseconds since 1970.
    public var timestampMilliseconds: Int64?
    /// The `Retry-After` header, in seconds, when it was a number.
    public var retryAfterSeconds: Int?

    public init(
        status: Int, apnsID: APNsID? = nil, apnsUniqueID: String? = nil, reason: APNsErrorReason? = nil,
        timestampMilliseconds: Int64? = nil, retryAfterSeconds: Int? = nil
    ) {
        self.status = status
        self.apnsID = apnsID
        self.uniqueID = apnsUniqueID.map(APNsUniqueID.init)
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// Parses a response from its status, headers (names in any case) and body
    /// (`{"reason": "...", "timestamp": <ms>}` for errors).
    public init(status: Int, headers: some Sequence<APNsHeaderField>, body: some Collection<UInt8>) {
        self.init(status: status)
        for field in headers {
            switch field.name.lowercased() {
            case "apns-id": apnsID = try? APNsID(parsing: field.value)
            // A broadcast's answer echoes its `apns-request-id` (Apple, "Sending broadcast push
            // notification requests to APNs"); it is the id the request was sent with.
            case "apns-request-id": if apnsID == nil { apnsID = try? APNsID(parsing: field.value) }
            case "apns-unique-id": uniqueID = APNsUniqueID(field.value)
            case "retry-after":
                // Only the delay-seconds form; APNs does not send HTTP dates.
                retryAfterSeconds = Int(field.value.filter { !$0.isWhitespace }).flatMap { $0 >= 0 ? $0 : nil }
            default: break
            }
        }
        guard !body.isEmpty, let json = try? JSONValue(parsing: body) else { return }
        if let text = json["reason"]?.stringValue { reason = APNsErrorReason(text) }
        timestampMilliseconds = json["timestamp"]?.intValue
    }

    /// True for 200: APNs accepted the notification (which is not yet the device showing it).
    public var isAccepted: Bool { status == 200 }

    /// What to do about an error; nil when accepted.
    public var reasonClass: APNsReasonClass? {
        if isAccepted { return nil }
        if let reason { return reason.reasonClass(status: status) }
        return APNsReasonClass(unknownReasonStatus: status)
    }

    /// For 410: when the token stopped being valid.
    public var timestamp: Date? {
        timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }
}
