// What happened to one notification across all its attempts: the record the worker turns into an
// outcome event (status, final response, and every attempt with its apns-id and latency).

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The final state of a notification.
public enum DeliveryStatus: String, Sendable, Hashable, CustomStringConvertible {
    /// APNs accepted it (HTTP 200).
    case delivered
    /// APNs (or request validation) refused it for good: sending it again would not help.
    case rejected
    /// It could not be delivered: retries ran out on failures of this push while its pool was healthy,
    /// or the transport or credential failed in a way retrying cannot fix.
    case failed
    /// Never delivered, and no longer worth sending: its `apns-expiration` passed (or would have before
    /// the next try), or it waited longer than the hold limit while its pool could not reach APNs.
    case expired
    /// Not delivered because APNs refused the credential, not this push (403 InvalidProviderToken,
    /// BadCertificate, BadCertificateEnvironment...): nothing is wrong with the push itself, so a sender
    /// keeps it (the worker parks it on its retry topic) and tries again once the credential works.
    case credentialRefused
    /// Not sent, and not finished either: its sender withdrew it while it waited (`SendWithdrawal`), for a
    /// pool that was down, a retry's delay or its device's pace. Whoever sends it next (a worker: the
    /// record's next owner) does it in full, so it is nobody's outcome.
    case withdrawn

    public var description: String { rawValue }
}

/// One try at sending a notification.
public struct DeliveryAttempt: Sendable, Hashable {
    /// The apns-id this attempt carried (fresh on every attempt).
    public var apnsID: APNsID
    /// The HTTP status, or nil when no response arrived.
    public var httpStatus: Int?
    /// APNs' reason for an error response, or the transport error's code (e.g. `requestTimeout`).
    public var reason: String?
    /// For failures without an APNs response: what went wrong.
    public var errorMessage: String?
    /// Wall-clock time the attempt started.
    public var startedAt: Date
    /// From the start of the attempt to its response or failure.
    public var latency: Duration

    public init(
        apnsID: APNsID, httpStatus: Int?, reason: String?, errorMessage: String?, startedAt: Date,
        latency: Duration
    ) {
        self.apnsID = apnsID
        self.httpStatus = httpStatus
        self.reason = reason
        self.errorMessage = errorMessage
        self.startedAt = startedAt
        self.latency = latency
    }

    /// Latency in milliseconds, as outcome records carry it.
    public var latencyMilliseconds: Double { latency.seconds * 1000 }
}

/// The result of `APNsClient.send(_:policy:)`.
public struct DeliveryResult: Sendable {
    public var status: DeliveryStatus
    /// The last APNs response, when the last attempt got one.
    public var response: APNsResponse?
    /// The attempts that left the worker, in order: all of them, or the first and the latest when there
    /// were more than `APNsClient.keptAttempts`; empty when nothing was sent (held until it expired).
    public var attempts: [DeliveryAttempt]
    /// Why the notification ended as it did, for people (never contains secrets).
    public var summary: String
    /// For `expired`: `expired` when its apns-expiration passed, `holdLimitReached` when it waited
    /// longer than the hold limit for a pool that could not reach APNs. Nil for other statuses.
    public var expiryReason: String?

    public init(
        status: DeliveryStatus, response: APNsResponse?, attempts: [DeliveryAttempt], summary: String,
        expiryReason: String? = nil
    ) {
        self.status = status
        self.response = response
        self.attempts = attempts
        self.summary = summary
        self.expiryReason = status == .expired ? expiryReason ?? "expired" : nil
    }

    /// The apns-id of the final attempt.
    public var finalAPNsID: APNsID? { attempts.last?.apnsID }
    /// What APNs' final answer means (invalid token, bad credential, ...); nil when delivered or when
    /// no response arrived.
    public var reasonClass: APNsReasonClass? { response?.reasonClass }
}
