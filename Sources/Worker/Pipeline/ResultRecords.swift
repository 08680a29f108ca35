// The records the worker publishes, encoded exactly as schemas/ describes them: the outcome of
// every (event, device) and an invalid-token event per dead token (dead letters: DeadLetters.swift).

public import APNs
public import JSON

/// Where a record came from, carried into every result for tracing.
public struct RecordSource: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
}

/// What the counters and the observer learn of a record's outcomes once Kafka has them: how many ended in
/// each status, and when they were written. The outcome records themselves are kept only for an observer
/// that asks for them (`PipelineObserver.keepsOutcomeRecords`): kept, they held every outcome's strings and
/// attempts until Kafka acknowledged the record, and freeing them took a fifth of the producer thread's
/// time in `bench pipeline`.
public struct PublishedOutcomes: Sendable {
    /// UNIX seconds; every outcome of a record is completed at once.
    public let completedAt: Double
    /// The records, when kept; nil otherwise.
    public private(set) var records: [OutcomeRecord]?
    private var delivered = 0
    private var rejected = 0
    private var failed = 0
    private var expired = 0
    private var skipped = 0

    /// None yet (a dead letter has none at all).
    public init(completedAt: Double = 0, keepingRecords: Bool = false) {
        self.completedAt = completedAt
        records = keepingRecords ? [] : nil
    }

    /// Every outcome, whatever its status.
    public var count: Int { delivered + rejected + failed + expired + skipped }

    /// Whether the records are kept (`append(_:)` then needs each one; `count(_:)` is for the others).
    var keepsRecords: Bool { records != nil }

    /// Counts `outcome`, and keeps it when records are kept.
    mutating func append(_ outcome: OutcomeRecord) {
        count(outcome.status)
        records?.append(outcome)
    }

    /// Counts an outcome of `status` whose record is not kept.
    mutating func count(_ status: OutcomeStatus) {
        switch status {
        case .delivered: delivered += 1
        case .rejected: rejected += 1
        case .failed: failed += 1
        case .expired: expired += 1
        case .skipped: skipped += 1
        }
    }

    /// The outcomes that ended in `status`.
    public subscript(status: OutcomeStatus) -> Int {
        switch status {
        case .delivered: delivered
        case .rejected: rejected
        case .failed: failed
        case .expired: expired
        case .skipped: skipped
        }
    }

    /// Calls `body` for each status some outcome ended in, with how many did.
    public func forEachStatus(_ body: (OutcomeStatus, Int) -> Void) {
        for status in Self.statuses where self[status] > 0 { body(status, self[status]) }
    }

    private static let statuses = OutcomeStatus.allCases
}

/// The outcome of one (event, device) pair, published to the outcomes topic keyed by event id.
public struct OutcomeRecord: Sendable {
    public var eventID: String
    public var deviceToken: String
    /// The environment of the final answer: the event's, or the other one when the push was sent again
    /// there after BadDeviceToken (then `environmentFallback`).
    public var environment: String
    public var topic: String?
    public var pushType: String?
    public var ruleID: String?
    public var status: OutcomeStatus
    public var httpStatus: Int?
    public var reason: String?
    /// The last attempt's apns-id: kept as its 16 bytes and written as text only into the record.
    public var apnsID: APNsID?
    public var apnsUniqueID: String?
    public var attempts: [DeliveryAttempt]
    public var source: RecordSource
    /// UNIX seconds.
    public var completedAt: Double
    /// The push was refused with BadDeviceToken in the event's environment and sent again in the other.
    public var environmentFallback = false
    /// The broadcast channel, for an outcome of the event's `channels`: written as `channel_id` instead of
    /// `device_token` (schemas/push-outcome.schema.json).
    public var channelID: String? = nil

    /// `json.compactBytes`, written directly (one per notification, so it skips the value tree).
    public var jsonBytes: [UInt8] {
        Self.jsonBytes(
            eventID: eventID, deviceToken: deviceToken, environment: environment, topic: topic, pushType: pushType,
            ruleID: ruleID, status: status, httpStatus: httpStatus, reason: reason, apnsID: apnsID,
            apnsUniqueID: apnsUniqueID.map(APNsUniqueID.init), attempts: attempts, source: source,
            completedAt: completedAt, environmentFallback: environmentFallback, channelID: channelID,
            keepingRecord: false
        ).bytes
    }

    /// The `jsonBytes` of an outcome with these fields, written from them where they lie; and the record,
    /// made only when `keepingRecord` asks for it.
    ///
    /// The pipeline writes each sent push's outcome this way: making the record first retained every one
    /// of its strings and its attempts, and released them again, once per notification.
    static func jsonBytes(
        eventID: String, deviceToken: String, environment: String, topic: String?, pushType: String?,
        ruleID: String?, status: OutcomeStatus, httpStatus: Int?, reason: String?, apnsID: APNsID?,
        apnsUniqueID: APNsUniqueID?, attempts: [DeliveryAttempt], source: RecordSource, completedAt: Double,
        environmentFallback: Bool, channelID: String?, keepingRecord: Bool
    ) -> (bytes: [UInt8], record: OutcomeRecord?) {
        let record =
            keepingRecord
            ? OutcomeRecord(
                eventID: eventID, deviceToken: deviceToken, environment: environment, topic: topic, pushType: pushType,
                ruleID: ruleID, status: status, httpStatus: httpStatus, reason: reason, apnsID: apnsID,
                apnsUniqueID: apnsUniqueID?.description, attempts: attempts, source: source,
                completedAt: completedAt, environmentFallback: environmentFallback, channelID: channelID) : nil
        // An outcome with one attempt is about 600 bytes: room for that, and for a retry or two, on the
        // stack, so that the record's one allocation is the array of its bytes.
        let bytes = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { scratch in
            var writer = JSONObjectWriter(scratch: scratch)
            writer.string("event_id", eventID)
            if let channelID {
                writer.string("channel_id", channelID)
            } else {
                writer.string("device_token", deviceToken)
            }
            writer.string("environment", environment)
            writer.string("topic", topic)
            writer.string("push_type", pushType)
            writer.string("rule_id", ruleID)
            writer.string("status", status.rawValue)
            writer.integer("http_status", httpStatus.map(Int64.init))
            writer.string("reason", reason)
            writer.apnsID("apns_id", apnsID)
            writer.apnsUniqueID("apns_unique_id", apnsUniqueID)
            writer.objects("attempts", attempts) { object, attempt in
                object.apnsID("apns_id", attempt.apnsID)
                object.integer("http_status", attempt.httpStatus.map(Int64.init))
                object.string("reason", attempt.reason)
                object.timestamp("started_at", attempt.startedAt.timeIntervalSince1970)
                object.double("latency_ms", attempt.roundedLatencyMilliseconds)
            }
            writer.object("source") { object in
                object.string("topic", source.topic)
                object.integer("partition", Int64(source.partition))
                object.integer("offset", source.offset)
            }
            writer.timestamp("completed_at", completedAt)
            writer.bool("environment_fallback", environmentFallback)
            return writer.finish()
        }
        return (bytes, record)
    }

    public var json: JSONValue {
        var object = JSONObject()
        object.appendUnchecked("event_id", .string(eventID))
        if let channelID {
            object.appendUnchecked("channel_id", .string(channelID))
        } else {
            object.appendUnchecked("device_token", .string(deviceToken))
        }
        object.appendUnchecked("environment", .string(environment))
        object.appendUnchecked("topic", topic.map(JSONValue.string) ?? .null)
        object.appendUnchecked("push_type", pushType.map(JSONValue.string) ?? .null)
        object.appendUnchecked("rule_id", ruleID.map(JSONValue.string) ?? .null)
        object.appendUnchecked("status", .string(status.rawValue))
        object.appendUnchecked("http_status", httpStatus.map { .int(Int64($0)) } ?? .null)
        object.appendUnchecked("reason", reason.map(JSONValue.string) ?? .null)
        object.appendUnchecked("apns_id", apnsID.map { .string($0.string) } ?? .null)
        object.appendUnchecked("apns_unique_id", apnsUniqueID.map(JSONValue.string) ?? .null)
        object.appendUnchecked("attempts", .array(attempts.map(\.json)))
        object.appendUnchecked(
            "source",
            [
                "topic": .string(source.topic), "partition": .int(Int64(source.partition)),
                "offset": .int(source.offset),
            ])
        object.appendUnchecked("completed_at", .string(RFC3339.format(completedAt)))
        object.appendUnchecked("environment_fallback", .bool(environmentFallback))
        return .object(object)
    }
}

extension DeliveryAttempt {
    var json: JSONValue {
        var object = JSONObject()
        object.appendUnchecked("apns_id", .string(apnsID.string))
        object.appendUnchecked("http_status", httpStatus.map { .int(Int64($0)) } ?? .null)
        object.appendUnchecked("reason", reason.map(JSONValue.string) ?? .null)
        object.appendUnchecked("started_at", .string(RFC3339.format(startedAt.timeIntervalSince1970)))
        object.appendUnchecked("latency_ms", .double(roundedLatencyMilliseconds))
        return .object(object)
    }

    /// Milliseconds to the microsecond, as records carry them.
    var roundedLatencyMilliseconds: Double { (latencyMilliseconds * 1000).rounded() / 1000 }
}

/// A device token Apple reported dead or wrong for its topic, keyed by token so the topic compacts.
/// Downstream services delete tokens on it, so it is made only on a definitive answer
/// (`invalidatingReason`).
public struct InvalidTokenRecord: Sendable {
    public var deviceToken: String
    /// The environment whose answer is `reason` (the last in `checkedEnvironments`).
    public var environment: String
    public var topic: String
    public var app: String
    public var reason: String
    /// UNIX seconds, from APNs' 410 timestamp when given.
    public var invalidSince: Double?
    public var eventID: String
    public var observedAt: Double
    /// Every environment the token was sent to, in order: two when BadDeviceToken in the event's
    /// environment sent it to the other as well, one otherwise.
    public var checkedEnvironments: [String]

    /// The reason a push's final answer makes its token invalid, or nil when it does not: 410
    /// Unregistered or ExpiredToken; DeviceTokenNotForTopic (invalid for this topic only); BadDeviceToken
    /// only as the final answer, which the transport gives after the other environment refused it too
    /// or when the app has no other environment. Any other answer, or none, proves nothing.
    public static func invalidatingReason(of result: DeliveryResult) -> APNsErrorReason? {
        guard let response = result.response, let reason = response.reason else { return nil }
        switch reason {
        case .unregistered, .expiredToken: return response.status == 410 ? reason : nil
        case .deviceTokenNotForTopic, .badDeviceToken: return reason
        default: return nil
        }
    }

    public var json: JSONValue {
        var object = JSONObject()
        object.appendUnchecked("device_token", .string(deviceToken))
        object.appendUnchecked("environment", .string(environment))
        object.appendUnchecked("topic", .string(topic))
        object.appendUnchecked("app", .string(app))
        object.appendUnchecked("reason", .string(reason))
        object.appendUnchecked("invalid_since", invalidSince.map { .string(RFC3339.format($0)) } ?? .null)
        object.appendUnchecked("event_id", .string(eventID))
        object.appendUnchecked("observed_at", .string(RFC3339.format(observedAt)))
        object.appendUnchecked("checked_environments", .array(checkedEnvironments.map(JSONValue.string)))
        return .object(object)
    }
}
