// The records the worker publishes, encoded exactly as schemas/ describes them: the outcome of
// every (event, device) and an invalid-token event per dead token (dead letters: DeadLetters.swift).
public import APNs

/// Where a record came from, carried into every result for tracing.
public struct RecordSource: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
}

/// The outcome of one (event, device) pair, published to the outcomes topic keyed by event id.
public struct OutcomeRecord: Sendable {
    public var eventID: String
    public var deviceToken: String
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

    /// `json.compactBytes`, written directly (one per notification, so it skips the value tree).
    public var jsonBytes: [UInt8] {
        // An outcome with one attempt is about 600 bytes: room for that, and for a retry or two, up front.
        var writer = JSONObjectWriter(capacity: 1024)
        writer.string("event_id", eventID)
        writer.string("device_token", deviceToken)
        writer.string("environment", environment)
        writer.string("topic", topic)
        writer.string("push_type", pushType)
        writer.string("rule_id", ruleID)
        writer.string("status", status.rawValue)
        writer.integer("http_status", httpStatus.map(Int64.init))
        writer.string("reason", reason)
        writer.apnsID("apns_id", apnsID)
        writer.string("apns_unique_id", apnsUniqueID)
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
        return writer.finish()
    }

    public var json: JSONValue {
        var object = JSONObject()
        object.appendUnchecked("event_id", .string(eventID))
        object.appendUnchecked("device_token", .string(deviceToken))
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
public struct InvalidTokenRecord: Sendable {
    public var deviceToken: String
    public var environment: String
    public var topic: String
    public var app: String
    public var reason: String
    /// UNIX seconds, from APNs' 410 timestamp when given.
    public var invalidSince: Double?
    public var eventID: String
    public var observedAt: Double

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
        return .object(object)
    }
}
